// The official openai npm client against `radixserve serve` on the tiny chat fixture (dummy weights, real tokenizer
// and chat template): chat and completions, streaming and not, n, stop strings, logprobs, usage, cached tokens, auth.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { metrics, post, startServer } from './harness.mjs';

const MODEL_DIR = 'tests/e2e/fixtures/tiny-chat';
let server;
let client;

before(async () => {
  server = await startServer({ model: MODEL_DIR, args: ['--load-format', 'dummy'] });
  client = server.client();
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, 'SIGTERM exits cleanly');
});

const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Name three colours.' },
];

test('health, models and metrics', async () => {
  assert.equal((await fetch(`${server.baseURL}/health`)).status, 200);
  const models = await client.models.list();
  assert.equal(models.data[0].id, 'tiny-chat');
  const text = await (await fetch(`${server.baseURL}/metrics`)).text();
  for (const name of ['radixserve_num_requests_running', 'radixserve_num_requests_waiting', 'radixserve_kv_pages_used',
    'radixserve_kv_pages_free', 'radixserve_prefix_cache_hit_rate', 'radixserve_prompt_tokens_total',
    'radixserve_generation_tokens_total', 'radixserve_time_to_first_token_seconds_bucket',
    'radixserve_inter_token_latency_seconds_bucket', 'radixserve_request_queue_time_seconds_bucket']) {
    assert.ok(text.includes(name), `metrics lack ${name}`);
  }
});

test('chat completion, non-streaming', async () => {
  const completion = await client.chat.completions.create({
    model: server.model, messages, max_tokens: 12, temperature: 0, ignore_eos: true,
  });
  assert.equal(completion.object, 'chat.completion');
  assert.equal(completion.choices.length, 1);
  assert.equal(completion.choices[0].message.role, 'assistant');
  assert.equal(typeof completion.choices[0].message.content, 'string');
  assert.equal(completion.choices[0].finish_reason, 'length');
  assert.equal(completion.usage.completion_tokens, 12);
  assert.ok(completion.usage.prompt_tokens > 10);
  assert.equal(completion.usage.total_tokens, completion.usage.prompt_tokens + 12);
});

test('chat completion, streaming with usage, matches the non-streaming text', async () => {
  const request = { model: server.model, messages, max_tokens: 16, temperature: 0, ignore_eos: true };
  const whole = await client.chat.completions.create(request);
  const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  let role = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      role ??= choice.delta.role;
      text += choice.delta.content ?? '';
      finish = choice.finish_reason ?? finish;
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 16);
  assert.equal(usage.prompt_tokens, whole.usage.prompt_tokens);
});

test('completions: text and token-id prompts, streaming and not, n=2', async () => {
  const text = await client.completions.create({ model: server.model, prompt: 'The sky is', max_tokens: 8,
    temperature: 0, ignore_eos: true });
  assert.equal(text.object, 'text_completion');
  assert.equal(text.choices[0].finish_reason, 'length');
  const ids = await client.completions.create({ model: server.model, prompt: [84, 104, 101, 32, 115, 107, 121],
    max_tokens: 8, temperature: 0, ignore_eos: true, return_token_ids: true });
  assert.equal(ids.choices[0].token_ids.length, 8);

  const two = await client.completions.create({ model: server.model, prompt: 'Once upon', max_tokens: 10, n: 2,
    temperature: 1.0, seed: 5, ignore_eos: true, return_token_ids: true });
  assert.equal(two.choices.length, 2);
  assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
  assert.notDeepEqual(two.choices[0].token_ids, two.choices[1].token_ids, 'n choices differ');
  assert.equal(two.usage.completion_tokens, 20);
  const again = await client.completions.create({ model: server.model, prompt: 'Once upon', max_tokens: 10, n: 2,
    temperature: 1.0, seed: 5, ignore_eos: true, return_token_ids: true });
  assert.deepEqual(again.choices.map((c) => c.token_ids), two.choices.map((c) => c.token_ids), 'seeded calls repeat');

  const stream = await client.completions.create({ model: server.model, prompt: 'Once upon', max_tokens: 6, n: 2,
    temperature: 0, ignore_eos: true, stream: true });
  const texts = ['', ''];
  const finishes = [null, null];
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      texts[choice.index] += choice.text;
      finishes[choice.index] = choice.finish_reason ?? finishes[choice.index];
    }
  }
  assert.deepEqual(finishes, ['length', 'length']);
  assert.equal(texts[0], texts[1], 'greedy choices agree');
});

test('stop strings end the output before the stop string', async () => {
  const request = { model: server.model, prompt: 'abc', max_tokens: 40, temperature: 0, ignore_eos: true };
  const full = (await client.completions.create(request)).choices[0].text;
  // Pick an ASCII stretch from the middle of the greedy output as the stop string.
  const match = /[ -~]{2}/.exec(full.slice(3));
  assert.ok(match, `no ASCII pair in ${JSON.stringify(full)}`);
  const stop = match[0];
  const cut = full.indexOf(stop);
  const stopped = await client.completions.create({ ...request, stop: [stop] });
  assert.equal(stopped.choices[0].text, full.slice(0, cut));
  assert.equal(stopped.choices[0].finish_reason, 'stop');
  const streamed = await client.completions.create({ ...request, stop, stream: true });
  let text = '';
  let finish = null;
  for await (const chunk of streamed) {
    text += chunk.choices[0]?.text ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, full.slice(0, cut));
  assert.equal(finish, 'stop');
});

test('logprobs: chat and completions', async () => {
  const chat = await client.chat.completions.create({ model: server.model, messages, max_tokens: 5, temperature: 0,
    ignore_eos: true, logprobs: true, top_logprobs: 3 });
  const content = chat.choices[0].logprobs.content;
  assert.equal(content.length, 5);
  for (const entry of content) {
    assert.ok(entry.logprob <= 0);
    assert.equal(entry.top_logprobs.length, 3);
    assert.ok(Array.isArray(entry.bytes));
    // Greedy picks the most likely token, so it leads the alternatives.
    assert.ok(Math.abs(entry.top_logprobs[0].logprob - entry.logprob) < 1e-4);
  }
  const legacy = await client.completions.create({ model: server.model, prompt: 'hello', max_tokens: 4, temperature: 0,
    ignore_eos: true, logprobs: 2 });
  const logprobs = legacy.choices[0].logprobs;
  assert.equal(logprobs.tokens.length, 4);
  assert.equal(logprobs.token_logprobs.length, 4);
  assert.equal(Object.keys(logprobs.top_logprobs[0]).length, 2);
});

test('a shared prefix is reported as cached tokens', async () => {
  const long = 'The quick brown fox jumps over the lazy dog. '.repeat(10);
  const first = await client.completions.create({ model: server.model, prompt: long + 'First?', max_tokens: 4,
    temperature: 0, ignore_eos: true });
  const second = await client.completions.create({ model: server.model, prompt: long + 'Second!', max_tokens: 4,
    temperature: 0, ignore_eos: true });
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  assert.ok(second.usage.prompt_tokens_details.cached_tokens >= 256, JSON.stringify(second.usage));
  const values = await metrics(server.baseURL);
  assert.ok(values.radixserve_prefix_cache_hit_rate > 0);
});

test('template refusals and API errors come back as OpenAI errors', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: server.model, messages: [{ role: 'assistant', content: 'hi' }] }),
    (error) => error.status === 400 && /must start/.test(error.message));
  await assert.rejects(client.chat.completions.create({ model: 'nope', messages }),
    (error) => error.status === 404 && error.code === 'model_not_found');
  const raw = await post(server.baseURL, '/v1/chat/completions', '{"model": ');
  assert.equal(raw.status, 400);
  assert.deepEqual(Object.keys(raw.body.error).sort(), ['code', 'message', 'param', 'type']);
});

test('--api-key requires a bearer token', async () => {
  const secured = await startServer({ model: MODEL_DIR, args: ['--load-format', 'dummy'], apiKey: 'sekrit' });
  try {
    const ok = await secured.client().completions.create({ model: secured.model, prompt: 'x', max_tokens: 2 });
    assert.equal(ok.choices.length, 1);
    await assert.rejects(secured.client({ apiKey: 'wrong' }).models.list(), (error) => error.status === 401);
    const anonymous = await post(secured.baseURL, '/v1/completions', { model: secured.model, prompt: 'x' });
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.body.error.code, 'invalid_api_key');
    assert.equal((await fetch(`${secured.baseURL}/health`)).status, 200);
  } finally {
    await secured.stop();
  }
});
