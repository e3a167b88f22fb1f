// model.test.mjs: the web app on the real engine with the demo model (models/strata-demo-q8_0.gguf)
// in Debian's chromium (playwright-core): the page loads and names the model, a message is sent and
// its reply is seen growing on screen token by token while the response is still open (a
// MutationObserver records every change of the streaming message), then ends with its token
// statistics; a second turn reuses the conversation the engine holds. It takes the screenshot of
// docs/server.md: into the build directory, or into docs/ with STRATA_UPDATE_SCREENSHOT=1.
// chat.test.mjs keeps what only the echo engine can make exact: known text, a thinking block, a
// reply that never ends (for Stop). Run through tests/api/run.sh web (it sets STRATA_CHROMIUM).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, screenshotPath } from '../api/server.mjs';
import { openPage } from './browser.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const model = path.join(root, 'models/strata-demo-q8_0.gguf');

let srv, browser, page;
before(async () => {
  assert.ok(fs.existsSync(model), `${model} is missing`);
  srv = await startServer(['--ctx', '4096', '-m', model]);
  ({ browser, page } = await openPage());
});
after(async () => {
  await browser?.close();
  assert.equal(await srv.stop(), 0, srv.stderr());
});

// Records the text of the streaming reply at every change while it streams.
async function watchStreaming() {
  await page.evaluate(() => {
    window.__seen = [];
    const obs = new MutationObserver(() => {
      const c = document.querySelector('.msg.assistant.streaming .content');
      if (c && c.textContent && c.textContent !== window.__seen.at(-1)) window.__seen.push(c.textContent);
    });
    obs.observe(document.getElementById('messages'), { childList: true, subtree: true, characterData: true });
  });
}

async function sendAndWait(text) {
  const before = await page.locator('.msg.assistant').count();
  await watchStreaming();
  await page.fill('#prompt', text);
  await page.click('#send');
  await page.waitForFunction((n) => document.querySelectorAll('.msg.assistant').length > n
    && !document.querySelector('.msg.assistant.streaming'), before);
  return page.locator('.msg.assistant').last();
}

test('the page loads and names the demo model', async () => {
  await page.goto(srv.base + '/');
  assert.equal(await page.title(), 'Strata');
  await page.waitForFunction(() => /strata-demo/.test(document.getElementById('model-name').textContent));
});

test('a message gets a reply that streams token by token', async () => {
  // greedy, and a prompt the demo model answers at length (about 150 tokens): the reply streams
  // for a second or more, many frames, even on a busy machine
  await page.$eval('#temperature', (e) => { e.value = '0'; e.dispatchEvent(new Event('input', { bubbles: true })); });
  await page.fill('#max_tokens', '160');
  const reply = await sendAndWait('Write about the Bible.');
  const seen = await page.evaluate(() => window.__seen);
  const final = await reply.locator('.content').textContent();
  assert.ok(final.length > 0, 'the reply has content');
  // Several states of the text were on screen before the response ended, each a prefix of the next.
  assert.ok(seen.length >= 3, `only ${seen.length} updates were seen while streaming`);
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i].startsWith(seen[i - 1]), `update ${i} does not extend the one before`);
  assert.ok(final.startsWith(seen.at(-1)));
  const stats = await reply.locator('.stats').textContent();
  const m = stats.match(/(\d+) generated/);
  assert.ok(m && Number(m[1]) > 0 && Number(m[1]) <= 160, stats);
  assert.equal(await page.locator('.msg.assistant.error').count(), 0);
  await page.screenshot({ path: screenshotPath('screenshot-chat.png') });
});

test('the next turn reuses the conversation the engine holds', async () => {
  const reply = await sendAndWait('And the sea?');
  assert.ok((await reply.locator('.content').textContent()).length > 0);
  const stats = await reply.locator('.stats').textContent();
  const m = stats.match(/\((\d+) reused\)/);
  assert.ok(m && Number(m[1]) > 0, stats);
});
