// llama.cpp's prefill and decode throughput on one sequence, measured the way `radixserve bench` measures ours:
// prefill = prompt tokens / time to the first sampled token; decode = tokens / time for the next N greedy tokens.
// llama.cpp comes prebuilt (CPU variants chosen at run time) from the node-llama-cpp npm package.
//   node llamacpp_bench.mjs --model M.gguf [--prompt-tokens 128] [--decode-tokens 32] [--repeats 3] [--threads 2]
//                           [--prompt-ids 1,2,3]   (else a seeded random prompt; ids of the first run are printed)
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

function parseArgs(argv) {
  const args = { promptTokens: 128, decodeTokens: 32, repeats: 3, threads: 2, promptIds: null, model: null };
  for (let i = 2; i < argv.length; i += 2) {
    const [key, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${key} needs a value`);
    if (key === "--model") args.model = value;
    else if (key === "--prompt-tokens") args.promptTokens = Number(value);
    else if (key === "--decode-tokens") args.decodeTokens = Number(value);
    else if (key === "--repeats") args.repeats = Number(value);
    else if (key === "--threads") args.threads = Number(value);
    else if (key === "--prompt-ids") args.promptIds = value.split(",").map(Number);
    else throw new Error(`unknown option ${key}`);
  }
  if (!args.model) throw new Error("--model is required");
  return args;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

const args = parseArgs(process.argv);
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: args.threads });
const model = await llama.loadModel({ modelPath: args.model, gpuLayers: 0 });
const context = await model.createContext({
  contextSize: args.promptTokens + args.decodeTokens + 64,
  batchSize: Math.max(512, args.promptTokens),
  threads: { ideal: args.threads, min: args.threads },
});
const sequence = context.getSequence();

let seed = 12345;
const nextRandom = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
const prefillRates = [], decodeRates = [];
let firstOutput = null;
for (let r = 0; r < args.repeats; ++r) {
  const prompt = args.promptIds ?? Array.from({ length: args.promptTokens }, () => nextRandom() % model.tokens.length);
  await sequence.clearHistory();
  const output = [];
  let start = performance.now(), decodeStart = 0;
  for await (const token of sequence.evaluate(prompt, { temperature: 0 })) {
    output.push(token);
    if (output.length === 1) {
      prefillRates.push(prompt.length / ((performance.now() - start) / 1e3));
      decodeStart = performance.now();
    } else if (output.length === args.decodeTokens + 1) {
      decodeRates.push(args.decodeTokens / ((performance.now() - decodeStart) / 1e3));
      break;
    }
  }
  firstOutput ??= output;
}
console.log(JSON.stringify({
  engine: "llama.cpp",
  node_llama_cpp: "3.22.1",
  model: args.model,
  prompt_tokens: args.promptIds?.length ?? args.promptTokens,
  decode_tokens: args.decodeTokens,
  repeats: args.repeats,
  threads: args.threads,
  prefill_tokens_per_s: median(prefillRates),
  decode_tokens_per_s: median(decodeRates),
  prefill_runs: prefillRates,
  decode_runs: decodeRates,
  first_output_ids: firstOutput,
}, null, 2));
await context.dispose();
await model.dispose();
await llama.dispose();
