// OpenAI's Responses API (POST /v1/responses, GET and DELETE /v1/responses/{id}) through the official openai npm
// client: a Response runs as the chat it stands for, so each answer is compared with the same conversation sent to
// /v1/chat/completions (same prompt tokens, same greedy text); the typed stream events assemble (the SDK's own strict
// accumulator) into the non-streamed Response; previous_response_id continues a stored conversation, function calls
// come back from a forced tool choice and their outputs go in again; retrieve, delete, store: false and unknown ids.
// The fixture is Qwen3's tiny config with its real tokenizer and chat template, dummy weights.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { OpenAI, makeQwen3Fixture, repoRoot, startServer } from './harness.mjs';

let dir;
let server;
let client;

before(async () => {
  dir = makeQwen3Fixture('rs-responses-');
  server = await startServer({ model: path.relative(repoRoot, dir),
    args: ['--load-format', 'dummy', '--tool-call-parser', 'auto'] });
  client = server.client({ timeout: 120000 });
});

after(async () => {
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const instructions = 'You are terse.';
const noThinking = { chat_template_kwargs: { enable_thinking: false } };

// The chat equivalent of a conversation: prompt tokens and greedy text.
async function chat(messages, extra = {}) {
  const answer = await client.chat.completions.create({ model: server.model, max_tokens: 10, temperature: 0,
    messages, ...noThinking, ...extra });
  return { promptTokens: answer.usage.prompt_tokens, text: answer.choices[0].message.content ?? '' };
}

test('a Response is the chat it stands for; previous_response_id continues it', async () => {
  const first = await client.responses.create({ model: server.model, instructions, input: 'Name three colours.',
    max_output_tokens: 10, temperature: 0, ...noThinking });
  assert.match(first.id, /^resp_/);
  assert.equal(first.object, 'response');
  assert.ok(['completed', 'incomplete'].includes(first.status), first.status);
  if (first.status === 'incomplete') assert.equal(first.incomplete_details.reason, 'max_output_tokens');
  assert.equal(first.instructions, instructions);
  assert.equal(first.output.length, 1);
  assert.equal(first.output[0].type, 'message');
  assert.match(first.output[0].id, /^msg_/);
  const turn1 = [{ role: 'user', content: 'Name three colours.' }];
  const expected = await chat([{ role: 'system', content: instructions }, ...turn1]);
  assert.equal(first.usage.input_tokens, expected.promptTokens);
  assert.equal(first.output_text, expected.text);
  assert.equal(first.usage.total_tokens, first.usage.input_tokens + first.usage.output_tokens);

  // The next turn: the stored conversation, then the new input; instructions are not carried over (as OpenAI).
  const second = await client.responses.create({ model: server.model, previous_response_id: first.id,
    input: [{ role: 'user', content: [{ type: 'input_text', text: 'Two more.' }] }], max_output_tokens: 10,
    temperature: 0, ...noThinking });
  assert.equal(second.previous_response_id, first.id);
  const turn2 = await chat([...turn1, { role: 'assistant', content: first.output_text },
    { role: 'user', content: 'Two more.' }]);
  assert.equal(second.usage.input_tokens, turn2.promptTokens);
  assert.equal(second.output_text, turn2.text);
});

test('streamed events assemble into the same Response', async () => {
  const request = { model: server.model, instructions, input: 'Count to five.', max_output_tokens: 10,
    temperature: 0, ...noThinking };
  const whole = await client.responses.create(request);
  const stream = client.responses.stream(request);
  const types = [];
  stream.on('event', (event) => types.push(event.type));
  const final = await stream.finalResponse();
  assert.equal(types[0], 'response.created');
  assert.equal(types[1], 'response.in_progress');
  assert.equal(types.at(-1), whole.status === 'completed' ? 'response.completed' : 'response.incomplete');
  for (const type of ['response.output_item.added', 'response.content_part.added', 'response.output_text.done',
    'response.content_part.done', 'response.output_item.done'])
    assert.ok(types.includes(type), `${type} missing from ${types.join(' ')}`);
  assert.equal(final.output_text, whole.output_text);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);

  // Raw events: sequence numbers count from 0 without a gap.
  const raw = await client.responses.create({ ...request, stream: true });
  let expected = 0;
  for await (const event of raw) assert.equal(event.sequence_number, expected++);
  assert.ok(expected > 6);
});

test('function calls: a forced tool choice returns a function_call item, and its output goes back in', async () => {
  const tools = [{ type: 'function', name: 'now', description: 'The current time',
    parameters: { type: 'object', properties: {}, additionalProperties: false } }];
  const called = await client.responses.create({ model: server.model, input: 'What time is it?', tools,
    tool_choice: 'required', max_output_tokens: 2000, temperature: 0, ...noThinking });
  const call = called.output.find((item) => item.type === 'function_call');
  assert.ok(call, JSON.stringify(called.output));
  assert.equal(call.name, 'now');
  assert.match(call.call_id, /^call_/);
  assert.deepEqual(JSON.parse(call.arguments), {});

  const streamed = await client.responses.stream({ model: server.model, input: 'What time is it?', tools,
    tool_choice: { type: 'function', name: 'now' }, max_output_tokens: 2000, temperature: 0, ...noThinking })
    .finalResponse();
  assert.equal(streamed.output.find((item) => item.type === 'function_call').name, 'now');

  // The stored turn as a chat assistant message: its text (a random model may write some before the calls) and
  // every call (the grammar lets it call more than once).
  const answered = await client.responses.create({ model: server.model, previous_response_id: called.id, tools,
    tool_choice: 'none', input: [{ type: 'function_call_output', call_id: call.call_id, output: '12:30' }],
    max_output_tokens: 10, temperature: 0, ...noThinking });
  const text = called.output.filter((item) => item.type === 'message').map((item) => item.content[0].text).join('');
  const calls = called.output.filter((item) => item.type === 'function_call').map((item) => ({ id: item.call_id,
    type: 'function', function: { name: item.name, arguments: item.arguments } }));
  const expected = await chat([{ role: 'user', content: 'What time is it?' },
    { role: 'assistant', content: text || null, tool_calls: calls },
    { role: 'tool', tool_call_id: call.call_id, content: '12:30' }],
  { tools: tools.map(({ name, description, parameters }) => ({ type: 'function',
    function: { name, description, parameters } })), tool_choice: 'none' });
  assert.equal(answered.usage.input_tokens, expected.promptTokens);
  assert.equal(answered.output_text, expected.text);
});

test('retrieve, delete, store: false and unknown ids', async () => {
  const stored = await client.responses.create({ model: server.model, input: 'Hi.', max_output_tokens: 3 });
  const retrieved = await client.responses.retrieve(stored.id);
  assert.equal(retrieved.id, stored.id);
  assert.equal(retrieved.output_text, stored.output_text);
  await client.responses.delete(stored.id);  // the SDK returns nothing; the 404 below shows it is gone
  await assert.rejects(client.responses.retrieve(stored.id), (error) => error instanceof OpenAI.NotFoundError);
  const unstored = await client.responses.create({ model: server.model, input: 'Hi.', max_output_tokens: 3,
    store: false });
  await assert.rejects(client.responses.retrieve(unstored.id), (error) => error instanceof OpenAI.NotFoundError);
  await assert.rejects(
    client.responses.create({ model: server.model, input: 'Hi.', previous_response_id: 'resp_unknown' }),
    (error) => error instanceof OpenAI.NotFoundError && /resp_unknown/.test(error.message));
  await assert.rejects(
    client.responses.create({ model: server.model, input: [{ role: 'user', content: [
      { type: 'input_image', image_url: 'https://example.com/cat.png' }] }] }),
    (error) => error instanceof OpenAI.BadRequestError && /text only/.test(error.message));
});
