// POST /v1/embeddings through the official openai npm client. On the committed embedding fixture
// (tests/data/models/qwen3_embedding, a sentence-transformers folder detected as an embedding model, served in exact
// f32) token-id inputs give the reference embeddings (transformers' final-normed hidden states); on Qwen3's tiny
// config with its real tokenizer (--task embed, dummy weights) text inputs equal their token ids, the SDK's default
// base64 transfer equals encoding_format float, batching changes no bit (deterministic inference), and misuse is
// refused: dimensions on a
// model without Matryoshka sizes, chat on an embedding server, embeddings on a generative one.
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { OpenAI, makeQwen3Fixture, post, repoRoot, startServer } from './harness.mjs';

const fixture = 'tests/data/models/qwen3_embedding';
const reference = JSON.parse(readFileSync(path.join(repoRoot, fixture, 'reference.json'), 'utf8'));
let exact;
let tiny;
let dir;

before(async () => {
  dir = makeQwen3Fixture('rs-embeddings-');
  [exact, tiny] = await Promise.all([
    startServer({ model: fixture, args: ['--exact-f32', '--skip-tokenizer-init'] }),
    // Batch-invariant numerics: a row's embedding must not depend on what shares its step or the prefix cache.
    startServer({ model: path.relative(repoRoot, dir),
      args: ['--load-format', 'dummy', '--task', 'embed', '--enable-deterministic-inference',
        '--max-queued-requests', '256'] }),
  ]);
});

after(async () => {
  await exact?.stop();
  await tiny?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const maxDiff = (a, b) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), a.length === b.length ? 0 : 1);
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

test('token-id inputs give the reference embeddings, one call for all', async () => {
  const client = exact.client();
  const answer = await client.embeddings.create({ model: exact.model, encoding_format: 'float',
    input: reference.cases.map((c) => c.prompt_ids) });
  assert.equal(answer.object, 'list');
  assert.equal(answer.model, exact.model);
  assert.equal(answer.data.length, reference.cases.length);
  const promptTokens = reference.cases.reduce((s, c) => s + c.prompt_ids.length, 0);
  assert.equal(answer.usage.prompt_tokens, promptTokens);
  assert.equal(answer.usage.total_tokens, promptTokens);
  answer.data.forEach((item, i) => {
    assert.equal(item.object, 'embedding');
    assert.equal(item.index, i);
    assert.ok(maxDiff(item.embedding, reference.cases[i].embedding) < 1e-4,
      `case ${i}: max |diff| ${maxDiff(item.embedding, reference.cases[i].embedding)}`);
  });
});

test('text equals its token ids; base64 (the SDK default) equals float; a batch equals single calls', async () => {
  const client = tiny.client();
  const texts = ['The radix tree shares prefixes.', 'Embeddings pool the last token.', 'x'];
  const floats = await client.embeddings.create({ model: tiny.model, input: texts, encoding_format: 'float' });
  const packed = await client.embeddings.create({ model: tiny.model, input: texts });  // base64 on the wire
  assert.equal(floats.data.length, 3);
  for (let i = 0; i < texts.length; ++i) {
    const v = floats.data[i].embedding;
    assert.equal(v.length, 64);  // the fixture's hidden size
    assert.ok(Math.abs(norm(v) - 1) < 1e-5, `normalised: ${norm(v)}`);
    assert.deepEqual(packed.data[i].embedding, v);
    const ids = (await post(tiny.baseURL, '/tokenize', { model: tiny.model, prompt: texts[i] })).body.tokens;
    const byIds = await client.embeddings.create({ model: tiny.model, input: ids, encoding_format: 'float' });
    assert.deepEqual(byIds.data[0].embedding, v, `text ${i} vs its ids`);
    const alone = await client.embeddings.create({ model: tiny.model, input: texts[i], encoding_format: 'float' });
    assert.deepEqual(alone.data[0].embedding, v, `text ${i} alone vs batched`);
  }
  assert.notDeepEqual(floats.data[0].embedding, floats.data[1].embedding);
});

test('misuse is refused with the reason', async () => {
  const client = tiny.client();
  await assert.rejects(client.embeddings.create({ model: tiny.model, input: 'x', dimensions: 16 }),
    (e) => e instanceof OpenAI.BadRequestError && /Matryoshka/.test(e.message));
  await assert.rejects(client.embeddings.create({ model: tiny.model, input: [] }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'input');
  // More inputs than one call may carry (OpenAI's 2,048 by default; this server's queue is smaller).
  await assert.rejects(client.embeddings.create({ model: tiny.model, input: Array(300).fill([1, 2]) }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'too_many_inputs');
  const many = await client.embeddings.create({ model: tiny.model, input: Array(200).fill([1, 2]) });
  assert.equal(many.data.length, 200, 'more inputs than the 128 choices a generation call may make');
  await assert.rejects(client.embeddings.create({ model: 'other', input: 'x' }),
    (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(client.chat.completions.create({ model: tiny.model, messages: [{ role: 'user', content: 'hi' }] }),
    (e) => e instanceof OpenAI.BadRequestError && /embeddings only/.test(e.message));
  const health = await fetch(`${tiny.baseURL}/health_generate`);
  assert.equal(health.status, 200, 'health_generate embeds a token on an embedding model');
});

test('a generative server refuses embeddings', async () => {
  const generator = await startServer({ model: 'tests/data/models/qwen3', args: ['--skip-tokenizer-init'] });
  try {
    await assert.rejects(generator.client().embeddings.create({ model: generator.model, input: [1, 2, 3] }),
      (e) => e instanceof OpenAI.BadRequestError && /--task embed/.test(e.message));
  } finally {
    await generator.stop();
  }
});
