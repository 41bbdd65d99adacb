// Second reference renderer for the chat-template tests: @huggingface/jinja (the JavaScript Jinja used by
// transformers.js). Same input and output format as render_jinja2.py.
// Usage: node render_hf_jinja.mjs CASES.json > RESULTS.json (run from anywhere; resolves tests/npm).
// Chat cases get the variables transformers' apply_chat_template passes (see render_jinja2.py).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "..", "npm", "package.json"));
const { Template, Environment } = await import(require.resolve("@huggingface/jinja"));

// Template.render declares its globals (strftime_now among them) before the caller's variables and refuses
// redeclaration; let the caller's strftime_now (a fixed clock) replace the global one.
const declare = Environment.prototype.set;
Environment.prototype.set = function (name, value) {
  if (name === "strftime_now") this.variables.delete(name);
  return declare.call(this, name, value);
};

const kMonthsShort = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const kMonthsLong = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
                     "October", "November", "December"];

// strftime over a fixed "YYYY-MM-DDTHH:MM:SS" time, for the directives chat templates use.
function fixedStrftime(iso) {
  const [date, time] = iso.split("T");
  const [year, month, day] = date.split("-").map(Number);
  const [hour, minute] = (time ?? "00:00").split(":").map(Number);
  const pad = (n) => String(n).padStart(2, "0");
  return (format) => format.replace(/%[YmdbBHM%]/g, (token) => ({
    "%Y": String(year), "%m": pad(month), "%d": pad(day), "%b": kMonthsShort[month - 1],
    "%B": kMonthsLong[month - 1], "%H": pad(hour), "%M": pad(minute), "%%": "%",
  })[token]);
}

const kSpecialTokenKeys = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"];
const tokenText = (token) => (typeof token === "object" && token !== null ? token.content : token);

function chatTemplateAndVariables(testCase) {
  const config = JSON.parse(readFileSync(testCase.tokenizer_config, "utf8"));
  let source = config.chat_template;
  if (testCase.chat_template_file) source = readFileSync(testCase.chat_template_file, "utf8");
  const tools = testCase.tools ?? null;
  if (Array.isArray(source)) {
    const named = Object.fromEntries(source.map((entry) => [entry.name, entry.template]));
    source = tools !== null && "tool_use" in named ? named.tool_use : named.default;
  }
  const special = {};
  for (const key of kSpecialTokenKeys) {
    if (config[key] !== undefined && config[key] !== null) special[key] = tokenText(config[key]);
  }
  if (config.additional_special_tokens?.length) special.additional_special_tokens = config.additional_special_tokens.map(tokenText);
  const variables = {
    messages: testCase.messages, tools, documents: null, add_generation_prompt: testCase.add_generation_prompt ?? false,
    ...special, ...(testCase.kwargs ?? {}),
  };
  return [source, variables];
}

function render(testCase) {
  try {
    const [source, given] = testCase.tokenizer_config ? chatTemplateAndVariables(testCase) : [testCase.template, testCase.variables ?? {}];
    const template = new Template(source);
    const variables = { ...given, strftime_now: fixedStrftime(testCase.now ?? "2025-08-05T10:20:30") };
    return { ok: true, output: template.render(variables) };
  } catch (error) {
    return { ok: false, error: error?.constructor?.name ?? "Error", message: String(error?.message ?? error) };
  }
}

const { cases } = JSON.parse(readFileSync(process.argv[2], "utf8"));
process.stdout.write(JSON.stringify(cases.map(render)));
