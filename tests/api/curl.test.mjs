// curl.test.mjs: the hardening cases as curl sends them (the curl binary; skipped without it):
// curl's default form POST (`-d`, application/x-www-form-urlencoded) and a text/plain POST with a
// foreign Origin are refused 403 by a keyless server while `-H 'Content-Type: application/json'`
// is served; `curl -I` on /health; a 429's Retry-After header in `curl -i`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import OpenAI from 'openai';
import { startServer, until } from './server.mjs';

let hasCurl = true;
try { execFileSync('curl', ['--version'], { stdio: 'ignore' }); } catch { hasCurl = false; }
const skip = hasCurl ? false : 'curl is not installed';

let srv;
before(async () => { if (hasCurl) srv = await startServer(['--queue', '1', '--ctx', '16777216']); });
after(async () => { if (srv) assert.equal(await srv.stop(), 0, srv.stderr()); });

// curl ARGS...; resolves with {code, out} (stdout with -i headers when asked).
function curl(args) {
  return new Promise((resolve) => execFile('curl', ['-sS', ...args], (err, out) => resolve({ code: err ? err.code : 0, out })));
}
const status = (out) => Number(out.match(/^HTTP\/[\d.]+ (\d+)/m)?.[1]);
const chat = JSON.stringify({ model: 'echo', chat_template_kwargs: { enable_thinking: false }, messages: [{ role: 'user', content: 'hi' }] });

test('curl: a form POST and a cross-origin text/plain POST get 403, a JSON one is served', { skip }, async () => {
  const url = srv.base + '/v1/chat/completions';
  const form = await curl(['-i', '-d', chat, url]);
  assert.equal(status(form.out), 403, form.out);
  assert.match(form.out, /cross_site_refused/);
  const plain = await curl(['-i', '-H', 'Content-Type: text/plain', '-H', 'Origin: http://evil.example', '-d', chat, url]);
  assert.equal(status(plain.out), 403, plain.out);
  const json = await curl(['-i', '-H', 'Content-Type: application/json', '-d', chat, url]);
  assert.equal(status(json.out), 200, json.out);
  assert.match(json.out, /Echo: hi/);
  const head = await curl(['-I', srv.base + '/health']);
  assert.equal(status(head.out), 200, head.out);
});

test('curl: a full queue answers 429 with Retry-After', { skip }, async () => {
  const c = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
  const quiet = { chat_template_kwargs: { enable_thinking: false } };
  const running = await c.chat.completions.create({ model: 'echo', stream: true, ...quiet, messages: [{ role: 'user', content: '/forever' }] });
  const it = running[Symbol.asyncIterator]();
  await it.next();
  const queued = c.chat.completions.create({ model: 'echo', ...quiet, messages: [{ role: 'user', content: 'queued' }] });
  await until(srv.base, (x) => x.queue.waiting === 1);
  const full = await curl(['-i', '-H', 'Content-Type: application/json', '-d', chat, srv.base + '/v1/chat/completions']);
  assert.equal(status(full.out), 429, full.out);
  assert.match(full.out, /^Retry-After: [1-9][0-9]*\r?$/im);
  await it.return();
  assert.equal((await queued).choices[0].message.content, 'Echo: queued');
});
