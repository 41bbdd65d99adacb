// The HTTP surface around generation: /version, /tokenize and /detokenize (vLLM's shapes; counts equal what
// generation bills), 405 for a known route asked with the wrong method, CORS for allowed origins only (preflight
// included), the API key from RADIXSERVE_API_KEY, one access-log line per request (prompts only with --log-requests),
// the periodic stats line, the chat page at GET / (--no-web-ui drops it; the page itself is tested in
// web_chat.test.mjs), and --chat-template.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { metrics, post, startServer } from './harness.mjs';

const MODEL_DIR = 'tests/e2e/fixtures/tiny-chat';
const DUMMY = ['--load-format', 'dummy'];

test('version, tokenize, detokenize, 405, the access log and the stats line', async () => {
  const server = await startServer({ model: MODEL_DIR, args: [...DUMMY, '--log-stats-interval', '1'] });
  try {
    const version = await (await fetch(`${server.baseURL}/version`)).json();
    assert.match(version.version, /^\d+\.\d+\.\d+ \(/);

    const text = 'hello world, hello tokens';
    const tokenized = await post(server.baseURL, '/tokenize', { model: server.model, prompt: text });
    assert.equal(tokenized.status, 200, tokenized.text);
    assert.equal(tokenized.body.count, tokenized.body.tokens.length);
    assert.ok(tokenized.body.max_model_len > 0);
    const client = server.client();
    const completion = await client.completions.create({ model: server.model, prompt: text, max_tokens: 1 });
    assert.equal(completion.usage.prompt_tokens, tokenized.body.count);
    const detokenized = await post(server.baseURL, '/detokenize', { tokens: tokenized.body.tokens });
    assert.equal(detokenized.status, 200, detokenized.text);
    assert.ok(detokenized.body.prompt.endsWith(text), detokenized.body.prompt);

    const messages = [{ role: 'system', content: 'be brief' }, { role: 'user', content: text }];
    const chatTokens = await post(server.baseURL, '/tokenize', { messages });
    assert.equal(chatTokens.status, 200, chatTokens.text);
    const chat = await client.chat.completions.create({ model: server.model, messages, max_tokens: 1 });
    assert.equal(chat.usage.prompt_tokens, chatTokens.body.count);
    const noGenerationPrompt = await post(server.baseURL, '/tokenize', { messages, add_generation_prompt: false });
    assert.ok(noGenerationPrompt.body.count < chatTokens.body.count);

    for (const [body, param] of [[{ prompt: text, messages }, 'prompt'], [{ tokens: 'x' }, undefined],
      [{ prompt: 7 }, 'prompt'], [{ prompt: text, frobnicate: 1 }, 'frobnicate']]) {
      const route = 'tokens' in body ? '/detokenize' : '/tokenize';
      const result = await post(server.baseURL, route, body);
      assert.equal(result.status, 400, result.text);
      if (param) assert.equal(result.body.error.param, param);
    }
    assert.equal((await post(server.baseURL, '/detokenize', { tokens: [1, 1e9] })).status, 400);
    // model reads as in /v1/completions: null is the served model, an unknown name is a 404 naming it as given.
    assert.equal((await post(server.baseURL, '/tokenize', { model: null, prompt: text })).status, 200);
    const unknownModel = await post(server.baseURL, '/tokenize', { model: 'nope', prompt: text });
    assert.equal(unknownModel.status, 404, unknownModel.text);
    assert.match(unknownModel.body.error.message, /^The model `nope` does not exist/);

    const wrongMethod = await fetch(`${server.baseURL}/v1/completions`);
    assert.equal(wrongMethod.status, 405);
    assert.equal(wrongMethod.headers.get('allow'), 'POST');
    assert.equal((await fetch(`${server.baseURL}/health`, { method: 'POST' })).status, 405);
    assert.equal((await fetch(`${server.baseURL}/no/such/route`)).status, 404);
    const slashModels = await fetch(`${server.baseURL}/v1/models/`);
    assert.equal(slashModels.status, 200);
    assert.equal((await slashModels.json()).data[0].id, server.model);
    const pageResponse = await fetch(`${server.baseURL}/`);
    assert.equal(pageResponse.status, 200);
    assert.equal(pageResponse.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.match(await pageResponse.text(), /^<!doctype html>/);
    assert.equal((await fetch(`${server.baseURL}/`, { method: 'POST' })).headers.get('allow'), 'GET');

    // One access line per request: id, route, status, token counts, latency, finish reason; no prompt text.
    await server.waitForLog(`${completion.id} /v1/completions 200 `);
    const log = await server.waitForLog(`${chat.id} /v1/chat/completions 200 `);
    assert.match(log, /cmpl-\S+ \/v1\/completions 200 prompt_tokens=\d+ cached_tokens=\d+ completion_tokens=1 ttft=\S+ total=\S+ finish=length/);
    assert.match(log, /chatcmpl-\S+ \/v1\/chat\/completions 200 prompt_tokens=/);
    assert.ok(!log.includes(text), 'prompt text must not be logged without --log-requests');
    assert.doesNotMatch(log, /messages=|prompt=/);
    // The periodic stats line reports the work since the previous one.
    await server.waitForLog(/running=\d+ waiting=\d+ kv_pages=\d+\/\d+ \(\S+%\) prefill=\S+ tok\/s/);
  } finally {
    await server.stop();
  }
});

test('--log-requests logs prompts and messages, truncated; --no-web-ui drops the page', async () => {
  const server = await startServer({ model: MODEL_DIR, args: [...DUMMY, '--log-requests', '--no-web-ui'] });
  try {
    const client = server.client();
    const chat = await client.chat.completions.create({ model: server.model, max_tokens: 1,
      messages: [{ role: 'user', content: 'first line\nsecond "quoted" line' }] });
    const long = `marker-start ${'word '.repeat(450)}marker-end`;
    const completion = await client.completions.create({ model: server.model, prompt: long, max_tokens: 1 });
    const tokens = await client.completions.create({ model: server.model, prompt: [5, 6, 7], max_tokens: 1 });
    // Every call's line, the last one's access line included, before the log is read.
    const log = await server.waitForLog(`${tokens.id} /v1/completions 200 `);
    // The messages as JSON on the call's own line (a newline in them cannot start a forged log line).
    assert.ok(log.includes(`${chat.id} /v1/chat/completions messages=[{"role":"user","content":"first line\\nsecond ` +
      '\\"quoted\\" line"}]'), log);
    const longLine = log.split('\n').find((line) => line.includes(`${completion.id} /v1/completions prompt=`));
    assert.ok(longLine?.includes('["marker-start word'), log);
    assert.ok(!longLine.includes('marker-end') && longLine.length < 2300, 'a long prompt is cut at 2000 bytes');
    assert.match(longLine, /\.\.\. \(\d+ bytes in all\)$/);
    assert.ok(log.includes(`${tokens.id} /v1/completions prompt=[[5,6,7]]`), log);

    assert.equal((await fetch(`${server.baseURL}/`)).status, 404);
  } finally {
    await server.stop();
  }
});

test('CORS for allowed origins only, and the API key from the environment', async () => {
  const origin = 'http://localhost:3000';
  const server = await startServer({ model: MODEL_DIR, args: [...DUMMY, '--allowed-origins', origin], apiKey: 'sk-env',
    keyFromEnv: true });
  try {
    const preflight = await fetch(`${server.baseURL}/v1/chat/completions`, { method: 'OPTIONS',
      headers: { Origin: origin, 'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'authorization, content-type' } });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get('access-control-allow-origin'), origin);
    assert.match(preflight.headers.get('access-control-allow-methods'), /POST/);
    assert.match(preflight.headers.get('access-control-allow-headers'), /Authorization/);
    // The OpenAI SDK in a browser sends its own headers: the preflight allows what the browser says it will send.
    const sdkPreflight = await fetch(`${server.baseURL}/v1/chat/completions`, { method: 'OPTIONS',
      headers: { Origin: origin, 'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'authorization, content-type, x-stainless-os, x-stainless-lang' } });
    assert.equal(sdkPreflight.status, 204);
    assert.match(sdkPreflight.headers.get('access-control-allow-headers'), /x-stainless-os, x-stainless-lang/);

    const body = { model: server.model, prompt: [1, 2, 3], max_tokens: 2 };
    const allowed = await post(server.baseURL, '/v1/completions', body,
      { Origin: origin, Authorization: 'Bearer sk-env' });
    assert.equal(allowed.status, 200, allowed.text);
    assert.equal(allowed.headers.get('access-control-allow-origin'), origin);
    const unauthorized = await post(server.baseURL, '/v1/completions', body, { Origin: origin });
    assert.equal(unauthorized.status, 401);
    assert.equal(unauthorized.headers.get('access-control-allow-origin'), origin);  // the browser may read the 401
    const other = await post(server.baseURL, '/v1/completions', body,
      { Origin: 'http://evil.example', Authorization: 'Bearer sk-env' });
    assert.equal(other.headers.get('access-control-allow-origin'), null);
  } finally {
    await server.stop();
  }
});

test('--chat-template replaces the model template; --served-model-name aliases', async () => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rs-template-')), 'template.jinja');
  fs.writeFileSync(file, '{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}' +
    '{% if add_generation_prompt %}[assistant]{% endif %}');
  const server = await startServer({ model: MODEL_DIR,
    args: [...DUMMY, '--chat-template', file, '--served-model-name', 'main-name,alias-name'] });
  try {
    const tokenized = await post(server.baseURL, '/tokenize', { messages: [{ role: 'user', content: 'hi there' }] });
    assert.equal(tokenized.status, 200, tokenized.text);
    const text = await post(server.baseURL, '/detokenize', { tokens: tokenized.body.tokens });
    assert.equal(text.body.prompt, '[user]hi there[assistant]');

    const models = await server.client().models.list();
    assert.deepEqual(models.data.map((m) => m.id), ['main-name', 'alias-name']);
    const byAlias = await post(server.baseURL, '/v1/completions', { model: 'alias-name', prompt: [1, 2], max_tokens: 2 });
    assert.equal(byAlias.status, 200, byAlias.text);
    assert.equal((await fetch(`${server.baseURL}/v1/models/alias-name`)).status, 200);
    const unknown = await post(server.baseURL, '/v1/completions', { model: 'tiny-chat', prompt: [1], max_tokens: 1 });
    assert.equal(unknown.status, 404);
  } finally {
    await server.stop();
  }
});

test('vLLM request fields: echo, include_stop_str_in_output, return_tokens_as_token_ids, continue_final_message, ' +
  'logit_bias, min_tokens, priority; vLLM flag names',
  async () => {
  // vLLM's spellings of our flags start the same server.
  const server = await startServer({ model: MODEL_DIR, args: [...DUMMY, '--max-num-seqs', '8', '--max-model-len', '2048',
    '--max-num-batched-tokens', '2048', '--enable-prefix-caching', '--tensor-parallel-size', '1',
    '--enable-auto-tool-choice'] });
  try {
    const client = server.client();
    const base = { model: server.model, prompt: 'hello world', temperature: 0, max_tokens: 24, ignore_eos: true };
    const plain = (await client.completions.create(base)).choices[0].text;
    assert.ok(plain.length >= 8, `output too short to test stops: ${JSON.stringify(plain)}`);

    const echoed = (await client.completions.create({ ...base, echo: true })).choices[0].text;
    assert.equal(echoed, 'hello world' + plain);

    // Fields today's SDKs and other servers' clients send are accepted and ignored (vLLM and SGLang do the same);
    // an unknown one is logged once by name (--strict-request-params refuses it, as OpenAI does).
    const tolerant = await post(server.baseURL, '/v1/chat/completions', { model: server.model,
      messages: [{ role: 'user', content: 'hello world' }], max_tokens: 2, prompt_cache_key: 'user-7',
      safety_identifier: 'h1', verbosity: 'low', cache_prompt: true, frobnicate: { x: 1 } });
    assert.equal(tolerant.status, 200, tolerant.text);
    await server.waitForLog("ignoring the unknown request field 'frobnicate'");
    const traced = await post(server.baseURL, '/v1/completions', { ...base, max_tokens: 1 }, { 'X-Request-Id': 'trace-42' });
    assert.equal(traced.headers.get('x-request-id'), 'trace-42');
    assert.equal((await client.completions.create({ ...base, request_id: 'r-1' })).choices[0].text, plain);

    // A stop string taken from the greedy output itself: cut before it, or after it when it is to be included.
    const stop = plain.slice(4, 7);
    const at = plain.indexOf(stop);
    const cut = (await client.completions.create({ ...base, stop: [stop] })).choices[0];
    assert.equal(cut.text, plain.slice(0, at));
    assert.equal(cut.finish_reason, 'stop');
    const kept = (await client.completions.create({ ...base, stop: [stop], include_stop_str_in_output: true }))
      .choices[0];
    assert.equal(kept.text, plain.slice(0, at + stop.length));

    const ids = (await client.completions.create({ ...base, max_tokens: 4, logprobs: 1,
      return_tokens_as_token_ids: true })).choices[0].logprobs;
    assert.equal(ids.tokens.length, 4);
    for (const token of ids.tokens) assert.match(token, /^token_id:\d+$/);

    // continue_final_message: the prompt stops inside the final assistant message (no end-of-turn), so the prompt is
    // the generation-prompt chat plus the partial answer, and the chat completion continues that text.
    const partial = 'The answer is';
    const chatBase = [{ role: 'user', content: 'hello world' }];
    const open = await post(server.baseURL, '/tokenize',
      { messages: [...chatBase, { role: 'assistant', content: partial }], continue_final_message: true });
    assert.equal(open.status, 200, open.text);
    const openText = (await post(server.baseURL, '/detokenize', { tokens: open.body.tokens })).body.prompt;
    assert.ok(openText.endsWith(`<|im_start|>assistant\n${partial}`), openText);
    const closed = await post(server.baseURL, '/tokenize',
      { messages: [...chatBase, { role: 'assistant', content: partial }], add_generation_prompt: false });
    assert.ok((await post(server.baseURL, '/detokenize', { tokens: closed.body.tokens })).body.prompt
      .endsWith(`${partial}<|im_end|>\n`));
    const continued = await client.chat.completions.create({ model: server.model, max_tokens: 4, temperature: 0,
      messages: [...chatBase, { role: 'assistant', content: partial }], continue_final_message: true });
    assert.equal(continued.usage.prompt_tokens, open.body.count);
    for (const [extra, param] of [[{ add_generation_prompt: true }, 'continue_final_message'],
      [{ messages: [...chatBase, { role: 'assistant', content: '' }] }, 'continue_final_message']]) {
      const bad = await post(server.baseURL, '/v1/chat/completions', { model: server.model, max_tokens: 2,
        messages: [...chatBase, { role: 'assistant', content: partial }], continue_final_message: true, ...extra });
      assert.equal(bad.status, 400, bad.text);
      assert.equal(bad.body.error.param, param);
    }

    // logit_bias: +100 on one token makes greedy decoding pick it every time; min_tokens: a stop token that would end
    // the answer at once (the greedy first token) is banned until min_tokens tokens exist.
    const first = (await client.completions.create({ ...base, max_tokens: 1, return_token_ids: true })).choices[0];
    const firstId = first.token_ids[0];
    const favourite = firstId === 7 ? 8 : 7;
    const biased = (await client.completions.create({ ...base, max_tokens: 5, return_token_ids: true,
      logit_bias: { [favourite]: 100 } })).choices[0];
    assert.deepEqual(biased.token_ids, Array(5).fill(favourite));
    const { ignore_eos: _ignore, ...stoppable } = base;
    const stopped = await client.completions.create({ ...stoppable, max_tokens: 8, stop_token_ids: [firstId] });
    assert.equal(stopped.choices[0].finish_reason, 'stop');
    assert.equal(stopped.choices[0].text, '');
    const atLeast = await client.completions.create({ ...stoppable, max_tokens: 8, stop_token_ids: [firstId],
      min_tokens: 5, return_token_ids: true });
    assert.ok(atLeast.usage.completion_tokens >= 5, JSON.stringify(atLeast));
    assert.ok(!atLeast.choices[0].token_ids.slice(0, 5).includes(firstId));
    for (const [extra, param] of [[{ logit_bias: { 1000000: 1 } }, 'logit_bias'],
      [{ min_tokens: 30 }, 'min_tokens']]) {
      const bad = await post(server.baseURL, '/v1/completions', { ...base, ...extra });
      assert.equal(bad.status, 400, bad.text);
      assert.equal(bad.body.error.param, param);
    }

    assert.equal((await post(server.baseURL, '/v1/completions', { ...base, priority: 0 })).status, 200);
    const priority = await post(server.baseURL, '/v1/completions', { ...base, priority: 5 });
    assert.equal(priority.status, 400);
    assert.equal(priority.body.error.param, 'priority');
  } finally {
    await server.stop();
  }
});

// What routers and gateways probe a replica with (issue 40): SGLang's model gateway routes, the load under vLLM's and
// SGLang's metric names, process_* metrics, and which of them need the API key (probes do not).
test('gateway routes, router metrics and liveness', async () => {
  const apiKey = 'gateway-key';
  const server = await startServer({ model: MODEL_DIR, args: DUMMY, apiKey });
  const auth = { Authorization: `Bearer ${apiKey}` };
  const getJson = async (route, headers = auth) => {
    const res = await fetch(`${server.baseURL}${route}`, { headers });
    return { status: res.status, body: await res.json() };
  };
  try {
    assert.deepEqual(await getJson('/live', {}), { status: 200, body: { status: 'alive' } });
    assert.equal((await getJson('/get_load', {})).status, 401);  // describes the server: needs the key
    const modelInfo = await getJson('/get_model_info');
    assert.equal(modelInfo.status, 200);
    assert.ok(modelInfo.body.model_path.endsWith('tiny-chat'), modelInfo.body.model_path);
    assert.equal(modelInfo.body.is_generation, true);
    assert.equal(modelInfo.body.served_model_name, server.model);
    for (const route of ['/get_server_info', '/server_info']) {
      const info = await getJson(route);
      assert.equal(info.status, 200);
      assert.ok(info.body.max_total_num_tokens > 0 && info.body.page_size > 0, JSON.stringify(info.body));
      assert.equal(info.body.internal_states.length, 1);
      assert.equal(typeof info.body.internal_states[0].token_usage, 'number');
    }
    const client = server.client();
    await client.completions.create({ model: server.model, prompt: 'a shared prefix for the cache', max_tokens: 2 });
    // The scheduler publishes its load after the step that answered the request: poll briefly for idle.
    let load = await getJson('/get_load');
    for (let i = 0; i < 50 && load.status === 200 && load.body[0].num_reqs !== 0; ++i) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      load = await getJson('/get_load');
    }
    assert.equal(load.status, 200);
    assert.deepEqual(Object.keys(load.body[0]).sort(),
      ['dp_rank', 'num_reqs', 'num_running_reqs', 'num_tokens', 'num_waiting_reqs', 'token_usage']);
    assert.equal(load.body[0].num_reqs, 0);  // idle again: the cached prefix counts as free, not as load
    assert.deepEqual(await getJson('/health_generate', {}), { status: 200, body: { status: 'ok' } });
    assert.equal((await fetch(`${server.baseURL}/flush_cache`, { headers: auth })).status, 200);  // GET works too

    const text = await (await fetch(`${server.baseURL}/metrics`)).text();
    for (const name of ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc',
      'vllm:gpu_cache_usage_perc', 'vllm:prefix_cache_queries_total', 'vllm:prefix_cache_hits_total',
      'vllm:lora_requests_info', 'sglang:num_running_reqs', 'sglang:num_queue_reqs', 'sglang:token_usage',
      'sglang:cache_hit_rate', 'process_cpu_seconds_total', 'process_resident_memory_bytes', 'process_open_fds',
      'process_start_time_seconds']) assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), name);
    const values = await metrics(server.baseURL);
    assert.ok(values['vllm:prefix_cache_queries_total'] > 0);
    assert.ok(values.process_resident_memory_bytes > 1e6);
    const started = values.process_start_time_seconds;
    assert.ok(Math.abs(started - Date.now() / 1000) < 600, `process start ${started}`);
  } finally {
    await server.stop();
  }
});
