// --reasoning-parser qwen3: chat answers split at <think> ... </think> into message.reasoning_content and
// message.content, streamed and not, through the official openai client. tiny-think's chat template ends the
// generation prompt with "<think>\n" (as Qwen3 thinking templates do), so the answer starts inside the reasoning; its
// random weights decide whether "</think>" ever comes, and the checks hold either way: the split pieces are exactly
// the raw answer that a server without the parser returns.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { startServer } from './harness.mjs';

const MODEL_DIR = 'tests/e2e/fixtures/tiny-think';
const ARGS = ['--load-format', 'dummy'];
const request = (model) => ({ model, messages: [{ role: 'user', content: 'What is 2 + 2?' }], max_tokens: 48,
  temperature: 0, ignore_eos: true });

test('reasoning_content and content split the raw answer, streamed or not', async () => {
  const plain = await startServer({ model: MODEL_DIR, args: ARGS });
  let raw;
  try {
    const answer = await plain.client().chat.completions.create(request(plain.model));
    raw = answer.choices[0].message.content;
    assert.equal(answer.choices[0].message.reasoning_content, undefined, 'no parser, no reasoning_content');
  } finally {
    await plain.stop();
  }
  assert.ok(raw.length > 0);

  const server = await startServer({ model: MODEL_DIR, args: [...ARGS, '--reasoning-parser', 'qwen3'] });
  try {
    const client = server.client();
    const whole = (await client.chat.completions.create(request(server.model))).choices[0].message;
    const reasoning = whole.reasoning_content ?? '';
    const content = whole.content;
    const close = raw.indexOf('</think>');
    if (close < 0) {
      assert.equal(reasoning, raw, 'without </think> the whole answer is reasoning');
      assert.equal(content, '');
    } else {
      assert.equal(reasoning, raw.slice(0, close));
      assert.equal(content, raw.slice(close + '</think>'.length).trimStart());
    }

    const stream = await client.chat.completions.create({ ...request(server.model), stream: true });
    let streamedReasoning = '', streamedContent = '', chunks = 0;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta ?? {};
      streamedReasoning += delta.reasoning_content ?? '';
      streamedContent += delta.content ?? '';
      if (delta.reasoning_content) ++chunks;
    }
    assert.equal(streamedReasoning, reasoning);
    assert.equal(streamedContent, content);
    if (reasoning.length > 0) assert.ok(chunks > 1, 'reasoning streams as it is generated');

    // Completions are raw text: the parser only applies to chat.
    const completion = await client.completions.create({ model: server.model, prompt: 'x', max_tokens: 4,
      temperature: 0 });
    assert.equal(completion.choices[0].reasoning_content, undefined);
  } finally {
    await server.stop();
  }
});

test('a tokenizer without <think> tokens refuses --reasoning-parser qwen3 with a clear error', async () => {
  await assert.rejects(
    startServer({ model: 'tests/e2e/fixtures/tiny-chat', args: ['--load-format', 'dummy', '--reasoning-parser', 'qwen3'] }),
    /has no <think> \/ <\/think> tokens/);
});
