// A server that survives its clients: bad input gets OpenAI-shaped 4xx while a stream beside it completes unharmed;
// 200 requests with a third disconnected mid-stream leave the KV pool at its idle level, as do non-streaming requests
// whose clients leave; a full queue answers 503
// with Retry-After; SIGTERM drains running streams before exiting.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { metrics, post, sleep, startServer, sumGroups, waitUntil } from './harness.mjs';

const MODEL_DIR = 'tests/e2e/fixtures/tiny-chat';
const DUMMY = ['--load-format', 'dummy'];

// Streams a completion; returns {tokens, finish}. abortAfter: disconnect after that many chunks.
async function streamCompletion(client, model, { prompt, maxTokens, abortAfter }) {
  const controller = new AbortController();
  const stream = await client.completions.create({ model, prompt, max_tokens: maxTokens, temperature: 0,
    ignore_eos: true, stream: true, return_token_ids: true }, { signal: controller.signal });
  let tokens = 0;
  let chunks = 0;
  let finish = null;
  try {
    for await (const chunk of stream) {
      for (const choice of chunk.choices) {
        tokens += choice.token_ids?.length ?? 0;
        finish = choice.finish_reason ?? finish;
      }
      if (abortAfter !== undefined && ++chunks >= abortAfter) {
        controller.abort();
        break;
      }
    }
  } catch (error) {
    if (abortAfter === undefined) throw error;
  }
  return { tokens, finish };
}

async function waitIdle(baseURL) {
  for (let i = 0; i < 800; ++i) {  // up to ~20 s: a sanitizer build on a busy machine is slow
    const values = await metrics(baseURL);
    if (values.radixserve_num_requests_running === 0 && values.radixserve_num_requests_waiting === 0) return values;
    await sleep(25);
  }
  throw new Error('server never became idle');
}

test('bad input gets 4xx while a stream beside it completes', async () => {
  const server = await startServer({ model: MODEL_DIR, args: DUMMY });
  try {
    const client = server.client();
    const beside = streamCompletion(client, server.model, { prompt: [1, 2, 3, 4], maxTokens: 300 });
    const ok = { model: server.model, messages: [{ role: 'user', content: 'hi' }] };
    const cases = [
      ['malformed JSON', '/v1/chat/completions', '{"model": "tiny-chat", "messages": [', 400],
      ['not an object', '/v1/chat/completions', '[1, 2]', 400],
      ['wrong type', '/v1/chat/completions', { ...ok, temperature: 'warm' }, 400, 'temperature'],
      ['wrong type for messages', '/v1/chat/completions', { ...ok, messages: 'hi' }, 400, 'messages'],
      ['unknown model', '/v1/chat/completions', { ...ok, model: 'gpt-9' }, 404, 'model'],
      ['model of the wrong type', '/v1/chat/completions', { ...ok, model: 7 }, 400, 'model'],
      ['empty messages', '/v1/chat/completions', { ...ok, messages: [] }, 400, 'messages'],
      ['bad role', '/v1/chat/completions', { ...ok, messages: [{ role: 'wizard', content: 'x' }] }, 400],
      ['n = 0', '/v1/chat/completions', { ...ok, n: 0 }, 400, 'n'],
      ['negative temperature', '/v1/chat/completions', { ...ok, temperature: -0.5 }, 400, 'temperature'],
      ['top_p above 1', '/v1/chat/completions', { ...ok, top_p: 1.5 }, 400, 'top_p'],
      ['max_tokens 0', '/v1/chat/completions', { ...ok, max_tokens: 0 }, 400, 'max_tokens'],
      ['max_tokens beyond the context', '/v1/completions', { model: server.model, prompt: 'x', max_tokens: 100000 },
        400, 'max_tokens'],
      ['prompt longer than the context', '/v1/completions',
        { model: server.model, prompt: Array(5000).fill(7), max_tokens: 1 }, 400, 'prompt'],
      ['token id outside the vocabulary', '/v1/completions', { model: server.model, prompt: [1, 99999] }, 400, 'prompt'],
      ['empty prompt', '/v1/completions', { model: server.model, prompt: [] }, 400, 'prompt'],
      ['top_logprobs without logprobs', '/v1/chat/completions', { ...ok, top_logprobs: 2 }, 400, 'top_logprobs'],
      ['stream_options without stream', '/v1/chat/completions', { ...ok, stream_options: { include_usage: true } },
        400, 'stream_options'],
      ['JSON nested 100000 deep', '/v1/chat/completions',
        `{"messages": [{"role": "user", "content": "x", "name": ${'['.repeat(100000)}${']'.repeat(100000)}}]}`, 400],
      ['more prompts x n than one call may queue', '/v1/completions',
        { model: server.model, prompt: Array(200).fill('x'), max_tokens: 1 }, 400, 'prompt'],
      ['unknown route', '/v1/engines', {}, 404],
    ];
    const results = await Promise.all(cases.map(([, route, body]) => post(server.baseURL, route, body)));
    cases.forEach(([name, , , status, param], i) => {
      const { status: got, body } = results[i];
      assert.equal(got, status, `${name}: ${results[i].text}`);
      assert.ok(body?.error, `${name}: no error object`);
      assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type'], name);
      assert.ok(body.error.message.length > 0, name);
      if (param) assert.equal(body.error.param, param, name);
    });
    const streamed = await beside;
    assert.equal(streamed.finish, 'length');
    assert.equal(streamed.tokens, 300);
    assert.equal((await fetch(`${server.baseURL}/health`)).status, 200);
  } finally {
    await server.stop();
  }
});

test('configured request limits give 4xx errors that name them', async () => {
  const server = await startServer({ model: MODEL_DIR, args: [...DUMMY, '--max-prompt-tokens', '50',
    '--max-tokens-limit', '20', '--max-request-bytes', '4096', '--max-messages', '2', '--max-n', '2',
    '--max-stop-sequences', '1', '--max-top-logprobs', '1'] });
  try {
    const user = { role: 'user', content: 'hi' };
    const ok = { model: server.model, messages: [user] };
    const cases = [
      ['prompt over --max-prompt-tokens', '/v1/completions', { model: server.model, prompt: Array(60).fill(7) }, 400,
        'prompt', 'limit of 50'],
      ['max_tokens over --max-tokens-limit', '/v1/completions', { model: server.model, prompt: [1], max_tokens: 21 },
        400, 'max_tokens', 'limit of 20'],
      ['body over --max-request-bytes', '/v1/completions', { model: server.model, prompt: 'x'.repeat(5000) }, 413,
        undefined, 'limit of 4096 bytes'],
      ['messages over --max-messages', '/v1/chat/completions', { ...ok, messages: [user, user, user] }, 400,
        'messages', 'limit of 2'],
      ['n over --max-n', '/v1/chat/completions', { ...ok, n: 3 }, 400, 'n'],
      ['stop strings over --max-stop-sequences', '/v1/chat/completions', { ...ok, stop: ['a', 'b'] }, 400, 'stop'],
      ['top_logprobs over --max-top-logprobs', '/v1/chat/completions', { ...ok, logprobs: true, top_logprobs: 2 },
        400, 'top_logprobs'],
    ];
    for (const [name, route, body, status, param, text] of cases) {
      const result = await post(server.baseURL, route, body);
      assert.equal(result.status, status, `${name}: ${result.text}`);
      assert.ok(result.body?.error, `${name}: no error object`);
      if (param) assert.equal(result.body.error.param, param, name);
      if (text) assert.ok(result.body.error.message.includes(text), `${name}: ${result.body.error.message}`);
    }
    // Without max_tokens a request gets at most --max-tokens-limit tokens.
    const completion = await server.client().completions.create({ model: server.model, prompt: [1, 2, 3],
      max_tokens: undefined, temperature: 0, ignore_eos: true });
    assert.ok(completion.usage.completion_tokens <= 16);  // the legacy endpoint's default is 16 (under the limit)
    const chat = await server.client().chat.completions.create({ ...ok, temperature: 0, ignore_eos: true });
    assert.equal(chat.usage.completion_tokens, 20);
    assert.equal(chat.choices[0].finish_reason, 'length');
    assert.equal((await fetch(`${server.baseURL}/health`)).status, 200);
  } finally {
    await server.stop();
  }
});

test('200 requests, a third disconnected mid-stream: KV returns to idle', async () => {
  const server = await startServer({ model: MODEL_DIR, args: [...DUMMY, '--max-running-requests', '16'] });
  try {
    const client = server.client();
    const before = await metrics(server.baseURL);
    assert.equal(sumGroups(before, 'radixserve_kv_pages_used'), 0);
    let next = 0;
    const outcomes = [];
    const worker = async () => {
      while (next < 200) {
        const i = next++;
        const prompt = Array.from({ length: 8 + (i % 40) }, (_, k) => ((i * 31 + k * 7) % 500) + 1);
        const disconnect = i % 3 === 0;
        // Disconnecting requests ask for far more tokens than they wait for, so they always leave mid-stream.
        outcomes[i] = await streamCompletion(client, server.model,
          { prompt, maxTokens: disconnect ? 1000 : 40, abortAfter: disconnect ? 2 + (i % 5) : undefined });
      }
    };
    await Promise.all(Array.from({ length: 24 }, worker));
    outcomes.forEach((outcome, i) => {
      if (i % 3 !== 0) assert.equal(outcome.tokens, 40, `request ${i} completed`);
    });
    const after = await waitIdle(server.baseURL);
    assert.equal(sumGroups(after, 'radixserve_kv_pages_used'), sumGroups(after, 'radixserve_kv_pages_cached'),
      'no page is held by a request');
    // A disconnecting client normally leaves mid-stream; on a loaded machine the server may finish its 1000 tokens
    // before the client reads its few chunks, and that request then counts as completed. Every call ends one way.
    const aborted = after['radixserve_requests_total{outcome="aborted"}'];
    assert.ok(aborted >= 60 && aborted <= 67, `disconnects noticed: ${aborted} of 67`);
    assert.equal(aborted + after['radixserve_requests_total{outcome="ok"}'], 200, 'every call completed or aborted');
    await post(server.baseURL, '/flush_cache', {});
    // The flush is a message the scheduler handles on its own thread: the level drops to idle soon after the reply.
    let used;
    await waitUntil(async () => (used = sumGroups(await metrics(server.baseURL), 'radixserve_kv_pages_used')) === 0,
      () => `idle level after flushing the prefix cache: ${used} KV pages still used`);
  } finally {
    await server.stop();
  }
});

test('non-streaming requests whose clients leave are aborted and free their KV', async () => {
  const server = await startServer({ model: MODEL_DIR, args: [...DUMMY, '--max-running-requests', '8'] });
  try {
    const client = server.client();
    const maxTokens = 4000;  // the whole context: far more than the requests live for
    const body = (i) => ({ model: server.model, prompt: [3 + i, 4, 5, 6], max_tokens: maxTokens, temperature: 0,
      ignore_eos: true });
    // A request that stays connected completes beside four whose clients give up once they are generating.
    const kept = client.completions.create({ ...body(9), max_tokens: 200 });
    const controllers = Array.from({ length: 4 }, () => new AbortController());
    const left = controllers.map((c, i) => client.completions.create(body(i), { signal: c.signal, maxRetries: 0 })
      .then(() => 'completed', (error) => error.constructor.name));
    for (let i = 0; i < 4000; ++i) {  // up to ~20 s on a slow (sanitizer) build; breaks as soon as they generate
      const values = await metrics(server.baseURL);
      if (values.radixserve_num_requests_running >= 4 && values.radixserve_generation_tokens_total > 8) break;
      await sleep(5);
    }
    controllers.forEach((c) => c.abort());
    assert.deepEqual(await Promise.all(left), Array(4).fill('APIUserAbortError'));
    assert.equal((await kept).usage.completion_tokens, 200);
    const after = await waitIdle(server.baseURL);
    assert.equal(after['radixserve_requests_total{outcome="aborted"}'], 4, 'every departure was noticed');
    assert.ok(after.radixserve_generation_tokens_total < 200 + 4 * maxTokens, 'the abandoned requests stopped early');
    assert.equal(sumGroups(after, 'radixserve_kv_pages_used'), sumGroups(after, 'radixserve_kv_pages_cached'),
      'no page is held by a request');
  } finally {
    await server.stop();
  }
});

test('a full queue answers 503 with Retry-After', async () => {
  const server = await startServer({ model: MODEL_DIR,
    args: [...DUMMY, '--max-running-requests', '1', '--max-queued-requests', '2'] });
  try {
    const body = { model: server.model, prompt: [5, 6, 7], max_tokens: 200, ignore_eos: true };
    const results = await Promise.all(Array.from({ length: 8 }, () => post(server.baseURL, '/v1/completions', body)));
    const refused = results.filter((r) => r.status === 503);
    assert.ok(refused.length >= 1, `statuses: ${results.map((r) => r.status)}`);
    assert.ok(results.some((r) => r.status === 200));
    for (const r of refused) {
      assert.equal(r.headers.get('retry-after'), '1');
      assert.equal(r.body.error.type, 'server_error');
    }
    const values = await metrics(server.baseURL);  // a 503 counts once, as rejected
    assert.equal(values['radixserve_requests_total{outcome="rejected"}'], refused.length);
    assert.equal(values['radixserve_requests_total{outcome="server_error"}'], 0);
  } finally {
    await server.stop();
  }
});

test('SIGTERM drains a running stream, then exits', async () => {
  const server = await startServer({ model: MODEL_DIR, args: DUMMY });
  const client = server.client();
  const stream = await client.completions.create({ model: server.model, prompt: [9, 9, 9], max_tokens: 400,
    temperature: 0, ignore_eos: true, stream: true, return_token_ids: true });
  let tokens = 0;
  let finish = null;
  let signalled = false;
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      tokens += choice.token_ids?.length ?? 0;
      finish = choice.finish_reason ?? finish;
    }
    if (!signalled) {
      signalled = true;
      server.child.kill('SIGTERM');
      await server.waitForLog(': draining');  // the signal reached the server; it stops taking calls right after
      await sleep(50);
      const refused = await post(server.baseURL, '/v1/completions', { model: server.model, prompt: [1], max_tokens: 1 })
        .catch(() => ({ status: 'closed' }));
      assert.ok(refused.status === 503 || refused.status === 'closed', `new call during drain: ${refused.status}`);
    }
  }
  assert.equal(finish, 'length');
  assert.equal(tokens, 400);
  const { code } = await server.exited;
  assert.equal(code, 0);
});
