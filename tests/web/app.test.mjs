// app.test.mjs: the web app's own features in a real browser on the echo engine (whose reply is
// "Echo: " and the message, so a message is the Markdown to render): Markdown and code rendered as
// elements, with no HTML or script let through; conversations kept in the browser across a reload,
// a new one and a deleted one; Regenerate asks again and replaces the last reply; Edit sends a
// message anew and the conversation goes on from it; the Monitor's charts fill with samples.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, status } from '../api/server.mjs';
import { openPage } from './browser.mjs';

let srv, browser, page;
before(async () => {
  srv = await startServer(['--ctx', '65536']);
  ({ browser, page } = await openPage());
  await page.goto(srv.base + '/');
  await page.evaluate(() => localStorage.clear());
  await page.reload();
  await page.uncheck('#thinking');
});
after(async () => {
  await browser?.close();
  assert.equal(await srv.stop(), 0, srv.stderr());
});

async function say(text) {
  const n = await page.locator('.msg.assistant').count();
  await page.fill('#prompt', text);
  await page.click('#send');
  await page.waitForFunction((k) => document.querySelectorAll('.msg.assistant').length > k && !document.querySelector('.msg.assistant.streaming'), n);
  return page.locator('.msg.assistant').last();
}

test('Markdown and code are rendered as elements', async () => {
  const md = '**bold** and `x < y` and [a link](https://example.com/a) and [bad](javascript:alert(1))\n\n' +
    '```js\nlet x = 1;\n```\n\n- one\n- two\n  - nested\n\n1. first\n2. second\n\n> quoted\n\n| h | i |\n|---|---|\n| 1 | 2 |';
  const reply = await say(md);
  const c = reply.locator('.content');
  assert.equal(await c.locator('strong').first().textContent(), 'bold');
  assert.equal(await c.locator('p code').first().textContent(), 'x < y');
  assert.equal(await c.locator('a').count(), 1);
  assert.equal(await c.locator('a').getAttribute('href'), 'https://example.com/a');
  assert.equal(await c.locator('pre code.lang-js').textContent(), 'let x = 1;');
  assert.equal(await c.locator('pre .code-lang').textContent(), 'js');
  assert.equal(await c.locator(':scope > ul > li').count(), 2);
  assert.equal(await c.locator('ul ul > li').textContent(), 'nested');
  assert.equal(await c.locator('ol > li').count(), 2);
  assert.equal(await c.locator('blockquote').textContent(), 'quoted');
  assert.deepEqual(await c.locator('td').allTextContents(), ['1', '2']);
});

test('no HTML or script gets through', async () => {
  const reply = await say('<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> **<b>x</b>**');
  assert.equal(await reply.locator('img, script, b').count(), 0);
  assert.match(await reply.locator('.content').textContent(), /<img src=x/);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
});

test('conversations are kept in the browser: a reload, a new one, a deleted one', async () => {
  await page.reload();
  await page.locator('.msg.assistant').nth(1).waitFor();
  assert.equal(await page.locator('.msg.user').count(), 2);
  assert.equal(await page.locator('#conv-list li').count(), 1);
  assert.match(await page.locator('#conv-list li .conv-title').textContent(), /^\*\*bold\*\*/);
  await page.click('#new-chat');
  assert.equal(await page.locator('.msg').count(), 0);
  await say('a second talk');
  assert.equal(await page.locator('#conv-list li').count(), 2);
  assert.equal(await page.locator('#conv-list li.active .conv-title').textContent(), 'a second talk');
  await page.locator('#conv-list li').nth(1).locator('.conv-title').click(); // the first one again
  assert.equal(await page.locator('.msg.user').count(), 2);
  await page.locator('#conv-list li.active .conv-delete').click();
  assert.equal(await page.locator('#conv-list li').count(), 1);
  assert.equal(await page.locator('.msg.user .content').textContent(), 'a second talk');
  await page.reload();
  await page.locator('.msg.assistant').first().waitFor();
  assert.equal(await page.locator('#conv-list li').count(), 1);
});

test('Regenerate asks again and replaces the last reply', async () => {
  const before = (await status(srv.base)).totals.requests;
  const n = await page.locator('.msg.assistant').count();
  await page.click('.msg.assistant >> nth=-1 >> button.regenerate');
  await page.waitForFunction(() => !document.querySelector('.msg.assistant.streaming') && document.querySelector('button.regenerate'));
  assert.equal(await page.locator('.msg.assistant').count(), n);
  assert.equal(await page.locator('.msg.assistant').last().locator('.content').textContent(), 'Echo: a second talk');
  assert.equal((await status(srv.base)).totals.requests, before + 1);
  assert.equal(await page.locator('button.regenerate').count(), 1, 'only on the last reply');
});

test('Edit sends a message anew; the conversation goes on from it', async () => {
  await say('a third message');
  assert.equal(await page.locator('.msg.user').count(), 2);
  await page.locator('.msg.user').first().locator('button.edit').click();
  await page.fill('.msg.user textarea.edit-text', 'edited first');
  await page.click('.msg.user button.save');
  await page.waitForFunction(() => !document.querySelector('.msg.assistant.streaming') && document.querySelectorAll('.msg.user').length === 1);
  assert.equal(await page.locator('.msg.user .content').textContent(), 'edited first');
  await page.locator('.msg.assistant .content').filter({ hasText: 'Echo: edited first' }).waitFor();
  assert.equal(await page.locator('.msg.assistant').count(), 1);
  await page.reload();
  await page.locator('.msg.assistant').first().waitFor();
  assert.equal(await page.locator('.msg.user .content').textContent(), 'edited first');
});

test('the Monitor plots the last minutes: speed, queue and slot', async () => {
  await page.click('.tab[data-view=monitor]');
  await page.waitForFunction(() => Number(document.getElementById('chart-speed').dataset.samples) >= 3);
  assert.ok(Number(await page.locator('#chart-speed').getAttribute('data-max')) > 1, 'a decode speed was plotted');
  assert.ok(Number(await page.locator('#chart-queue').getAttribute('data-samples')) >= 3);
  await page.click('.tab[data-view=chat]');
});
