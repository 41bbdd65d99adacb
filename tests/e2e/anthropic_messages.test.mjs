// Anthropic's Messages API (POST /v1/messages) through the official @anthropic-ai/sdk npm client: a Message runs as
// the chat it stands for, so every answer is compared with the same conversation sent through the OpenAI client
// (same prompt tokens, same greedy text); streaming events assemble into the non-streamed Message; tool_use blocks
// come back from a forced tool choice and go in again with a tool_result; errors, the x-api-key header and the
// SDK's error classes. The fixture is Qwen3's tiny config with its real tokenizer and chat template, dummy weights.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { makeQwen3Fixture, repoRoot, requireFromNpm, startServer } from './harness.mjs';

const Anthropic = requireFromNpm('@anthropic-ai/sdk').default;
const API_KEY = 'messages-test-key';

let dir;
let server;
let anthropic;
let openai;

before(async () => {
  dir = makeQwen3Fixture('rs-messages-');
  server = await startServer({ model: path.relative(repoRoot, dir), apiKey: API_KEY,
    args: ['--load-format', 'dummy', '--tool-call-parser', 'auto', '--reasoning-parser', 'qwen3'] });
  anthropic = new Anthropic({ baseURL: server.baseURL, apiKey: API_KEY, maxRetries: 0, timeout: 120000 });
  openai = server.client();
});

after(async () => {
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const system = 'You are terse.';
const question = 'Name three colours.';

test('a Message is the chat it stands for: same prompt tokens and greedy text as the OpenAI client gets', async () => {
  const message = await anthropic.messages.create({
    model: server.model, max_tokens: 12, temperature: 0, system, thinking: { type: 'disabled' },
    messages: [{ role: 'user', content: question }],
  });
  assert.match(message.id, /^msg_/);
  assert.equal(message.type, 'message');
  assert.equal(message.role, 'assistant');
  assert.equal(message.model, server.model);
  assert.equal(message.content.length, 1);
  assert.equal(message.content[0].type, 'text');
  assert.ok(['end_turn', 'max_tokens'].includes(message.stop_reason), message.stop_reason);
  assert.ok(message.usage.output_tokens > 0 && message.usage.output_tokens <= 12);
  if (message.stop_reason === 'max_tokens') assert.equal(message.usage.output_tokens, 12);

  const chat = await openai.chat.completions.create({
    model: server.model, max_tokens: 12, temperature: 0, chat_template_kwargs: { enable_thinking: false },
    messages: [{ role: 'system', content: system }, { role: 'user', content: question }],
  });
  assert.equal(message.usage.input_tokens + message.usage.cache_read_input_tokens, chat.usage.prompt_tokens);
  assert.equal(message.content[0].text, chat.choices[0].message.content);
  assert.equal(message.usage.output_tokens, chat.usage.completion_tokens);

  // A stop sequence taken from that greedy text ends it there, and is named (stop_reason "stop_sequence").
  const text = message.content[0].text;
  if (text.length >= 4) {
    const stop = text.slice(2, 4);
    const stopped = await anthropic.messages.create({ model: server.model, max_tokens: 12, temperature: 0, system,
      thinking: { type: 'disabled' }, stop_sequences: [stop], messages: [{ role: 'user', content: question }] });
    assert.equal(stopped.stop_reason, 'stop_sequence');
    assert.equal(stopped.stop_sequence, stop);
    assert.equal(stopped.content[0].text, text.slice(0, text.indexOf(stop)));
    const streamed = await anthropic.messages.stream({ model: server.model, max_tokens: 12, temperature: 0, system,
      thinking: { type: 'disabled' }, stop_sequences: [stop], messages: [{ role: 'user', content: question }] })
      .finalMessage();
    assert.equal(streamed.stop_reason, 'stop_sequence');
    assert.equal(streamed.stop_sequence, stop);
  }

  // count_tokens: the prompt the same request would send, without running it.
  const counted = await anthropic.messages.countTokens({ model: server.model, system, thinking: { type: 'disabled' },
    messages: [{ role: 'user', content: question }] });
  assert.equal(counted.input_tokens, chat.usage.prompt_tokens);
});

test('streamed events assemble into the same Message', async () => {
  const request = {
    model: server.model, max_tokens: 12, temperature: 0, system: [{ type: 'text', text: system }],
    thinking: { type: 'disabled' }, messages: [{ role: 'user', content: [{ type: 'text', text: question }] }],
  };
  const whole = await anthropic.messages.create(request);
  const stream = anthropic.messages.stream(request);
  const types = [];
  let text = '';
  stream.on('streamEvent', (event) => types.push(event.type));
  stream.on('text', (delta) => { text += delta; });
  const final = await stream.finalMessage();
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');
  assert.ok(types.includes('content_block_start') && types.includes('content_block_stop') &&
    types.includes('message_delta'), types.join(' '));
  assert.equal(final.content[0].text, whole.content[0].text);
  assert.equal(text, whole.content[0].text);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  assert.equal(final.usage.input_tokens, whole.usage.input_tokens + whole.usage.cache_read_input_tokens -
    final.usage.cache_read_input_tokens);
});

test('tool use: a forced tool choice answers with a tool_use block, and its tool_result goes back in', async () => {
  const tools = [{ name: 'now', description: 'The current time', input_schema: { type: 'object', properties: {},
    additionalProperties: false } }];
  const messages = [{ role: 'user', content: 'What time is it?' }];
  const called = await anthropic.messages.create({ model: server.model, max_tokens: 2000, temperature: 0, tools,
    tool_choice: { type: 'any' }, thinking: { type: 'disabled' }, messages });
  assert.equal(called.stop_reason, 'tool_use', JSON.stringify(called.content));
  const use = called.content.find((block) => block.type === 'tool_use');
  assert.ok(use, JSON.stringify(called.content));
  assert.equal(use.name, 'now');
  assert.match(use.id, /^toolu_/);
  assert.deepEqual(use.input, {});

  // Streamed, the same call arrives as a tool_use block whose input assembles from input_json_delta.
  const streamed = await anthropic.messages.stream({ model: server.model, max_tokens: 2000, temperature: 0, tools,
    tool_choice: { type: 'tool', name: 'now' }, thinking: { type: 'disabled' }, messages }).finalMessage();
  assert.equal(streamed.stop_reason, 'tool_use');
  assert.deepEqual(streamed.content.find((block) => block.type === 'tool_use').input, {});

  const history = [...messages, { role: 'assistant', content: [use] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '12:30' }] }];
  const answered = await anthropic.messages.create({ model: server.model, max_tokens: 4, temperature: 0, tools,
    tool_choice: { type: 'none' }, thinking: { type: 'disabled' }, messages: history });
  const chat = await openai.chat.completions.create({ model: server.model, max_tokens: 4, temperature: 0,
    tool_choice: 'none', chat_template_kwargs: { enable_thinking: false },
    tools: tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description,
      parameters: t.input_schema } })),
    messages: [...messages,
      { role: 'assistant', content: null, tool_calls: [{ id: use.id, type: 'function',
        function: { name: 'now', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: use.id, content: '12:30' }] });
  assert.equal(answered.usage.input_tokens + answered.usage.cache_read_input_tokens, chat.usage.prompt_tokens);
  assert.equal(answered.content[0].text, chat.choices[0].message.content);
});

test('errors come back in Anthropic\'s shape and as the SDK\'s error classes', async () => {
  await assert.rejects(
    anthropic.messages.create({ model: server.model, messages: [{ role: 'user', content: 'hi' }] }),
    (error) => error instanceof Anthropic.BadRequestError && error.error?.type === 'error' &&
      error.error.error?.type === 'invalid_request_error' && /max_tokens/.test(error.message));
  await assert.rejects(
    anthropic.messages.create({ model: server.model, max_tokens: 4, messages: [{ role: 'user', content: [
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }] }),
    (error) => error instanceof Anthropic.BadRequestError && /text only/.test(error.message));
  const wrongKey = new Anthropic({ baseURL: server.baseURL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(
    wrongKey.messages.create({ model: server.model, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] }),
    (error) => error instanceof Anthropic.AuthenticationError);
});
