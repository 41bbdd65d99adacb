// Greedy output of a request must not depend on how it is scheduled: alone, inside a batch of 16 requests of mixed
// lengths, with a small chunked-prefill size, or after a prefix-cache hit. Token-id prompts on the tiny golden models
// (llama, qwen3, and gpt-oss with its sliding-window layers, window 32). A last run gets so little full-attention KV
// that requests are preempted and recomputed, which must not change a token either.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fs from 'node:fs';
import path from 'node:path';

import { metrics, repoRoot, startServer } from './harness.mjs';

// Deterministic prompts of mixed lengths, some sharing long prefixes (ids below the tiny vocab of 512).
function prompts() {
  let state = 12345;
  const next = () => (state = (state * 1103515245 + 12345) % 2147483648) % 500 + 3;
  const stem = Array.from({ length: 70 }, next);
  const list = [];
  for (let i = 0; i < 16; ++i) {
    const length = 5 + ((i * 37) % 120);
    const own = Array.from({ length }, next);
    list.push(i % 3 === 0 ? [...stem, ...own.slice(0, 20)] : own);
  }
  return list;
}

async function complete(client, model, prompt, maxTokens) {
  const res = await client.completions.create({ model, prompt, max_tokens: maxTokens, temperature: 0,
    ignore_eos: true, return_token_ids: true });
  return { ids: res.choices[0].token_ids, cached: res.usage.prompt_tokens_details.cached_tokens };
}

for (const model of ['tests/data/models/llama', 'tests/data/models/qwen3', 'tests/data/models/gpt_oss']) {
  test(`greedy output is schedule-independent: ${model}`, async () => {
    const list = prompts();
    const maxTokens = (i) => 4 + (i % 5) * 3;
    // Reference: one request at a time, nothing cached (fresh server, distinct prompts flushed between calls).
    const solo = await startServer({ model, args: ['--skip-tokenizer-init', '--max-running-requests', '1'] });
    const reference = [];
    try {
      for (let i = 0; i < list.length; ++i) {
        await fetch(`${solo.baseURL}/flush_cache`, { method: 'POST' });
        reference.push((await complete(solo.client(), solo.model, list[i], maxTokens(i))).ids);
      }
    } finally {
      await solo.stop();
    }

    // All 16 at once, with chunked prefill of 8 tokens under a 24-token step budget.
    const batched = await startServer({ model, args: ['--skip-tokenizer-init', '--chunked-prefill-size', '8', '--max-prefill-tokens', '24',
      '--page-size', '4'] });
    try {
      const client = batched.client();
      const results = await Promise.all(list.map((prompt, i) => complete(client, batched.model, prompt, maxTokens(i))));
      results.forEach((result, i) => assert.deepEqual(result.ids, reference[i], `batched request ${i}`));
      // Again, now with every prompt cached: prefix hits must not change a token.
      const again = await Promise.all(list.map((prompt, i) => complete(client, batched.model, prompt, maxTokens(i))));
      again.forEach((result, i) => {
        assert.ok(result.cached > 0, `request ${i} reused its prefix`);
        assert.deepEqual(result.ids, reference[i], `cached request ${i}`);
      });
      // A new prompt sharing the long stem (longer than gpt-oss's window) reuses it.
      const sibling = [...list[0].slice(0, 70), 7, 8, 9, 10];
      const hit = await complete(client, batched.model, sibling, 3);
      assert.ok(hit.cached >= 64, `stem reused: ${hit.cached}`);
    } finally {
      await batched.stop();
    }

    const config = JSON.parse(fs.readFileSync(path.join(repoRoot, model, 'config.json')));
    // Full-attention KV for ~400 tokens (f32 K and V) against ~2000 tokens of demand. Window layers first get the
    // pool kv_pool.cpp plans for them (2 x (requests x (window/page + 1) + step pages)), so add exactly that.
    const headDim = config.head_dim ?? config.hidden_size / config.num_attention_heads;
    const bytesPerLayerToken = 2 * config.num_key_value_heads * headDim * 4;
    const windowLayers = (config.layer_types ?? []).filter((type) => type === 'sliding_attention').length;
    const pageSize = 4;
    const maxRunning = 16;
    const maxPrefill = 512;
    const windowPages = windowLayers === 0 ? 0 : 2 * (maxRunning * (Math.ceil(config.sliding_window / pageSize) + 1) +
      Math.ceil((maxPrefill + maxRunning) / pageSize));
    const bytes = (400 * (config.num_hidden_layers - windowLayers) + windowPages * pageSize * windowLayers) *
      bytesPerLayerToken;
    // --context-length: a pool this small cannot hold one request at the model's context, which serve refuses otherwise.
    const tight = await startServer({ model, args: ['--skip-tokenizer-init', '--kv-cache-gb', String(bytes / 2 ** 30),
      '--context-length', '400', '--page-size', String(pageSize), '--max-running-requests', String(maxRunning), '--max-prefill-tokens', String(maxPrefill)] });
    try {
      const client = tight.client();
      // Longer outputs than the reference run: decode growth is what outruns admission and forces preemption. Long
      // enough (16 x ~160 tokens against ~400 tokens of KV) that requests overlap even when a loaded machine
      // delivers them one by one.
      const results = await Promise.all(list.map((prompt) => complete(client, tight.model, prompt, 160)));
      results.forEach((result, i) =>
        assert.deepEqual(result.ids.slice(0, reference[i].length), reference[i], `preempted request ${i}`));
      assert.ok((await metrics(tight.baseURL)).radixserve_preemptions_total > 0, 'requests were preempted');
    } finally {
      await tight.stop();
    }
  });
}
