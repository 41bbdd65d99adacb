// The chat page at GET /, driven in headless Chromium (Debian's chromium package through puppeteer-core, both
// installed by scripts/setup; without them this test fails, it does not skip): the page names the served model,
// sends the settings and the conversation with stream: true, renders the answer as it streams (at least two text
// lengths are seen before the end), shows tok/s, stops on Stop, puts reasoning_content in its own box, and asks for
// the API key when the server has one. The screenshot of the demo chat is written to ARTIFACTS/web_chat.png (CTest passes
// BUILD_DIR/test-artifacts; see harness.mjs artifactsDir).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { artifactsDir, requireFromNpm, startServer } from './harness.mjs';

const CHROMIUM = '/usr/bin/chromium';  // Debian's chromium package
const TIMEOUT_MS = 60000;
let puppeteer;
let browser;

before(async () => {
  assert.ok(fs.existsSync(CHROMIUM), `no browser at ${CHROMIUM}: run scripts/setup (Debian's chromium package)`);
  puppeteer = requireFromNpm('puppeteer-core');
  browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
});
after(async () => {
  await browser?.close();
});

// Opens the page and records every chat request body (and its Authorization header) it sends, and every length the
// assistant's answer text takes (each DOM change is a record, so lengths set within one task are all seen).
async function openChat(server) {
  const page = await browser.newPage();
  page.setDefaultTimeout(TIMEOUT_MS);
  const requests = [];
  page.on('request', (request) => {
    if (request.method() === 'POST' && request.url().endsWith('/v1/chat/completions'))
      requests.push({ body: JSON.parse(request.postData()), authorization: request.headers().authorization });
  });
  const response = await page.goto(`${server.baseURL}/`);
  assert.equal(response.status(), 200);
  assert.equal(response.headers()['content-type'], 'text/html; charset=utf-8');
  await page.evaluate(() => {
    window.answerLengths = [];
    new MutationObserver((records) => {
      for (const record of records) {
        if (!record.target.matches?.('.assistant .content')) continue;
        for (const node of record.addedNodes) window.answerLengths.push(node.textContent.length);
      }
    }).observe(document.getElementById('messages'), { childList: true, subtree: true });
  });
  return { page, requests };
}

async function setField(page, selector, value) {
  await page.$eval(selector, (element, text) => {
    element.value = text;
    element.dispatchEvent(new Event('change'));
  }, value);
}

// Types a message, sends it with Enter, and waits until the answer has finished (its stats line is shown).
async function sendMessage(page, text) {
  const answers = await page.$$eval('.assistant', (elements) => elements.length);
  await page.type('#input', text);
  await page.keyboard.press('Enter');
  await page.waitForFunction((count) => document.body.dataset.busy === 'false' &&
    document.querySelectorAll('.assistant .stats, .assistant .error').length > count, {}, answers);
  return page.$$eval('.assistant', (elements) => {
    const last = elements[elements.length - 1];
    const text = (selector) => last.querySelector(selector)?.textContent ?? null;
    return { content: text('.content'), reasoning: text('.reasoning-text'), stats: text('.stats'),
      error: text('.error') };
  });
}

test('the demo model streams into the page, with settings, history, tok/s and Stop', async () => {
  const server = await startServer({ model: 'models/radixserve-demo' });
  try {
    const { page, requests } = await openChat(server);
    await page.waitForFunction((name) => document.getElementById('model').textContent === name, {}, server.model);
    await page.click('#settings summary');
    await setField(page, '#system', 'You are a helpful assistant.');
    await setField(page, '#temperature', '0');
    await setField(page, '#max-tokens', '32');

    const answer = await sendMessage(page, 'Tell me a fortune.');
    assert.equal(answer.error, null);
    assert.ok(answer.content.length > 0, 'the answer is not empty');
    const lengths = new Set(await page.evaluate(() => window.answerLengths));
    assert.ok(lengths.size >= 2, `the answer streams in pieces (lengths seen: ${[...lengths]})`);

    assert.equal(requests.length, 1);
    const sent = requests[0].body;
    assert.equal(sent.stream, true);
    assert.deepEqual(sent.stream_options, { include_usage: true });
    assert.equal(sent.model, server.model);
    assert.equal(sent.temperature, 0);
    assert.equal(sent.max_tokens, 32);
    const messages = [{ role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'Tell me a fortune.' }];
    assert.deepEqual(sent.messages, messages);
    // The streamed text, as the page put it together, is the server's whole answer to the same request, and the
    // stats count its tokens (from the usage chunk).
    const whole = await server.client().chat.completions.create({ model: server.model, messages, temperature: 0,
      max_tokens: 32 });
    assert.equal(answer.content, whole.choices[0].message.content);
    assert.ok(answer.stats.startsWith(`${whole.usage.completion_tokens} tokens · `), answer.stats);
    assert.ok(Number(/([\d.]+) tok\/s/.exec(answer.stats)[1]) > 0, answer.stats);

    const second = await sendMessage(page, 'And another one?');
    assert.ok(second.content.length > 0);
    assert.deepEqual(requests[1].body.messages, [...messages, { role: 'assistant', content: answer.content },
      { role: 'user', content: 'And another one?' }], 'the conversation so far is sent');

    // Stop: with the download throttled the answer trickles in, and the button ends it part way.
    await page.emulateNetworkConditions({ download: 1500, upload: 1e6, latency: 0 });
    await page.type('#input', 'Tell me more.');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelectorAll('.assistant .content')[2]?.textContent.length > 0);
    await page.click('#stop');
    await page.waitForFunction(() => document.body.dataset.busy === 'false');
    const stopped = await page.$$eval('.assistant', (elements) => elements[2].querySelector('.stats')?.textContent);
    assert.match(stopped ?? '', /stopped$/);
    await page.emulateNetworkConditions(null);

    await page.click('#settings summary');  // closed, so the conversation fills the shot
    await page.setViewport({ width: 1000, height: 900 });
    const screenshot = path.join(artifactsDir(), 'web_chat.png');
    await page.screenshot({ path: screenshot, fullPage: true });
    assert.ok(fs.statSync(screenshot).size > 1000, `screenshot written to ${screenshot}`);
    await page.close();
  } finally {
    await server.stop();
  }
});

test('the page asks for the API key, and shows reasoning apart from the answer', async () => {
  const server = await startServer({ model: 'tests/e2e/fixtures/tiny-think', apiKey: 'sk-web',
    args: ['--load-format', 'dummy', '--reasoning-parser', 'qwen3'] });
  try {
    const { page, requests } = await openChat(server);  // GET / itself needs no key
    await page.waitForFunction(() => /API key/.test(document.getElementById('status').textContent));
    assert.equal(await page.$eval('#settings', (element) => element.open), true, 'settings open for the key');
    await setField(page, '#api-key', 'sk-web');
    await page.waitForFunction((name) => document.getElementById('model').textContent === name, {}, server.model);
    await setField(page, '#temperature', '0');
    await setField(page, '#max-tokens', '24');

    const answer = await sendMessage(page, 'What is 2 + 2?');
    assert.equal(answer.error, null);
    assert.equal(requests[0].authorization, 'Bearer sk-web');
    // tiny-think's template opens <think>: the answer begins as reasoning, shown in its own box.
    assert.ok(answer.reasoning?.length > 0, 'reasoning_content is shown in the reasoning box');
    assert.match(answer.stats, /tok\/s/);
    const whole = await server.client().chat.completions.create({ model: server.model,
      messages: [{ role: 'user', content: 'What is 2 + 2?' }], temperature: 0, max_tokens: 24 });
    assert.equal(answer.reasoning, whole.choices[0].message.reasoning_content);
    assert.equal(answer.content, whole.choices[0].message.content);
    await page.close();
  } finally {
    await server.stop();
  }
});
