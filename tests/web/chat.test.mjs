// chat.test.mjs: the web app in a real browser (Debian's chromium driven by playwright-core) on the
// echo engine, for what only a deterministic engine makes exact: loads /, sends a message and gets
// the known reply with its thinking folded, watches a never-ending reply grow on screen while it
// streams and stops it with the Stop button, shows the Monitor and About views. model.test.mjs
// runs the page on the demo model. Run through tests/api/run.sh web (it sets STRATA_CHROMIUM).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, status } from '../api/server.mjs';
import { openPage } from './browser.mjs';


let srv, browser, page;
before(async () => {
  srv = await startServer(['--ctx', '16777216']);
  ({ browser, page } = await openPage());
});
after(async () => {
  await browser?.close();
  assert.equal(await srv.stop(), 0, srv.stderr());
});

test('the page loads and finds the model', async () => {
  await page.goto(srv.base + '/');
  assert.equal(await page.title(), 'Strata');
  await page.waitForFunction(() => document.getElementById('model-name').textContent.includes('echo'));
});

test('a message gets its reply, thinking folded', async () => {
  await page.fill('#prompt', 'Hello from the browser');
  await page.click('#send');
  const reply = page.locator('.msg.assistant').last();
  await reply.locator('.content').filter({ hasText: 'Echo: Hello from the browser' }).waitFor();
  await page.waitForFunction(() => !document.querySelector('.msg.assistant.streaming'));
  assert.equal(await reply.locator('.content').textContent(), 'Echo: Hello from the browser');
  const thinking = reply.locator('details.thinking');
  assert.equal(await thinking.isVisible(), true);
  assert.equal(await thinking.getAttribute('open'), null, 'thinking is folded');
  assert.equal(await thinking.locator('summary').textContent(), 'Thought');
  assert.equal(await thinking.locator('.think-text').textContent(), 'The user wrote 22 bytes.');
  assert.match(await reply.locator('.stats').textContent(), /generated/);
});

test('tokens show while the reply streams; Stop cancels it; the next message works', async () => {
  const before = (await status(srv.base)).totals.cancelled;
  await page.fill('#max_tokens', ''); // no limit but the context: this reply ends only when stopped
  await page.fill('#prompt', '/forever');
  await page.click('#send');
  // The reply is on screen and still growing while the response is open: streamed, not buffered.
  const seen = await page.waitForFunction(() => {
    const m = document.querySelector('.msg.assistant.streaming .content');
    return m && m.textContent.startsWith('tick tick tick') && m.textContent.length;
  });
  const first = await seen.jsonValue();
  await page.waitForFunction((n) => {
    const m = document.querySelector('.msg.assistant.streaming .content');
    return m && m.textContent.length > n + 100;
  }, first);
  await page.click('#stop');
  await page.locator('#chat-status').filter({ hasText: 'Stopped.' }).waitFor();
  assert.equal(await page.locator('.msg.assistant.streaming').count(), 0);
  await page.fill('#max_tokens', '2048');
  await page.fill('#prompt', 'still here?');
  await page.click('#send');
  await page.locator('.msg.assistant').last().locator('.content').filter({ hasText: 'Echo: still here?' }).waitFor();
  assert.equal((await status(srv.base)).totals.cancelled, before + 1);
});

test('Monitor and About show the server', async () => {
  await page.click('.tab[data-view=monitor]');
  await page.locator('#mon-requests').filter({ hasText: /^[1-9]/ }).waitFor();
  assert.match(await page.locator('#mon-decode-tps').textContent(), /^[0-9.]+$/);
  assert.match(await page.locator('#mon-memory').textContent(), /iB$/);
  await page.click('.tab[data-view=about]');
  await page.locator('#about-addresses').filter({ hasText: '/v1' }).waitFor();
  assert.match(await page.locator('#about-model').textContent(), /echo/);
});
