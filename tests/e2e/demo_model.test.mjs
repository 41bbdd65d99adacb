// The bundled demo model (models/radixserve-demo: real weights, own tokenizer and chat template) served over HTTP:
// greedy text from /v1/completions and /v1/chat/completions must equal transformers' greedy continuation
// (models/radixserve-demo/reference_greedy.json), so text in -> text out is checked end to end.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { repoRoot, startServer } from './harness.mjs';

const MODEL_DIR = 'models/radixserve-demo';
const reference = JSON.parse(fs.readFileSync(path.join(repoRoot, MODEL_DIR, 'reference_greedy.json'), 'utf8'));
const byName = Object.fromEntries(reference.prompts.map((p) => [p.name, p]));
let server;
let client;

before(async () => {
  server = await startServer({ model: MODEL_DIR });
  client = server.client();
});
after(async () => {
  await server.stop();
});

// transformers' text of the greedy continuation, without a trailing end-of-sequence token.
function expectedText(name) {
  const ref = byName[name];
  return ref.completion_text.replace(/<\|im_end\|>$|<\|endoftext\|>$/, '');
}

for (const name of ['postgres', 'quote', 'python_list']) {
  test(`completion text equals transformers (${name})`, async () => {
    const ref = byName[name];
    const completion = await client.completions.create({
      model: server.model, prompt: ref.prompt, max_tokens: ref.completion_ids.length, temperature: 0,
    });
    assert.equal(completion.choices[0].text, expectedText(name));
    assert.equal(completion.usage.prompt_tokens, ref.prompt_ids.length);
    assert.equal(completion.choices[0].finish_reason, ref.finish_reason);
  });
}

test('chat completion (rendered with the checkpoint template) equals transformers, streamed and not', async () => {
  const ref = byName.chat_ls;
  const messages = [{ role: 'user', content: 'What does the ls command do?' }];
  const completion = await client.chat.completions.create({
    model: server.model, messages, max_tokens: 32, temperature: 0,
  });
  assert.equal(completion.usage.prompt_tokens, ref.prompt_ids.length, 'template + tokenizer give HF prompt ids');
  assert.equal(completion.choices[0].message.content, expectedText('chat_ls'));
  assert.equal(completion.choices[0].finish_reason, 'stop');
  let streamed = '';
  const stream = await client.chat.completions.create({
    model: server.model, messages, max_tokens: 32, temperature: 0, stream: true,
  });
  for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(streamed, expectedText('chat_ls'));
});

test('a bare request without `model` (a newcomer\'s curl) is served by the one model', async () => {
  const res = await fetch(`${server.baseURL}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: byName.quote.prompt, max_tokens: 8, temperature: 0 }),
  });
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.equal(body.model, server.model);
  assert.equal(body.choices[0].text, expectedText('quote'));
});

test('sampled text is fluent-looking English and seeded sampling repeats', async () => {
  const request = { model: server.model, prompt: 'The file system', max_tokens: 40, temperature: 0.7, seed: 11 };
  const a = await client.completions.create(request);
  const b = await client.completions.create(request);
  assert.equal(a.choices[0].text, b.choices[0].text);
  const words = a.choices[0].text.split(/\s+/).filter((w) => /^[A-Za-z,.;:'()-]+$/.test(w));
  assert.ok(words.length >= 10, `expected English words, got: ${a.choices[0].text}`);
});
