// flags.test.mjs: serve's own flags, as a user types them. The sampling flags are the defaults of
// requests that send no sampling fields (the others keep `strata run`'s, and a request's own
// fields win); --alias names the model; --no-webui leaves only the API; --timeout closes a
// connection that sends nothing; --log-format json writes one JSON line per request with its id,
// endpoint, status, token counts and times (refusals too); text is the default.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import OpenAI from 'openai';
import { startServer, post } from './server.mjs';

const quiet = { chat_template_kwargs: { enable_thinking: false } };

async function params(srv, extra = {}) {
  const c = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
  const r = await c.chat.completions.create({ model: 'echo', ...quiet, ...extra, messages: [{ role: 'user', content: '/params' }] });
  return r.choices[0].message.content;
}

test('with no sampling fields a request gets `strata run`\'s defaults, not temperature 1 over everything', async () => {
  const srv = await startServer();
  try {
    assert.match(await params(srv), /^temperature=0\.8 top_p=0\.95 top_k=40 min_p=0\.05 /);
    assert.match(await params(srv, { temperature: 0.2 }), /^temperature=0\.2 top_p=0\.95 top_k=40 min_p=0\.05 /);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

test('--temp, --top-k, --top-p, --min-p, --seed set those defaults; a request\'s fields still win', async () => {
  const srv = await startServer(['--temp', '0.3', '--top-k', '7', '--min-p', '0.1', '--seed', '5']);
  try {
    assert.match(await params(srv), /^temperature=0\.3 top_p=0\.95 top_k=7 min_p=0\.1 .* seed=5 /);
    assert.match(await params(srv, { top_k: 3, seed: 9 }), /^temperature=0\.3 top_p=0\.95 top_k=3 min_p=0\.1 .* seed=9 /);
    const a = await post(srv.base, '/v1/messages', { model: 'echo', max_tokens: 300, messages: [{ role: 'user', content: '/params' }] });
    assert.match(a.json.content.at(-1).text, /^temperature=0\.3 top_p=0\.95 top_k=7 min_p=0\.1 /);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

test('--alias names the model; --no-webui serves the API only', async () => {
  const srv = await startServer(['--alias', 'my-model', '--no-webui']);
  try {
    const m = await (await fetch(srv.base + '/v1/models')).json();
    assert.equal(m.data[0].id, 'my-model');
    const r = await post(srv.base, '/v1/chat/completions', { ...quiet, messages: [{ role: 'user', content: 'x' }] });
    assert.equal(r.json.model, 'my-model');
    assert.equal((await fetch(srv.base + '/')).status, 404);
    assert.equal((await fetch(srv.base + '/app.js')).status, 404);
    assert.equal((await fetch(srv.base + '/health')).status, 200);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
  const web = await startServer();
  try {
    assert.equal((await fetch(web.base + '/')).status, 200);
  } finally {
    assert.equal(await web.stop(), 0);
  }
});

test('--timeout closes a connection that sends nothing', async () => {
  const srv = await startServer(['--timeout', '1']);
  try {
    const sock = net.connect(srv.port, '127.0.0.1');
    sock.on('error', () => {});
    await new Promise((resolve) => sock.on('close', resolve)); // the server closes it, not the test
    assert.equal((await fetch(srv.base + '/health')).status, 200);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

test('--log-format json: one line per request with id, endpoint, status, tokens and times', async () => {
  const srv = await startServer(['--log-format', 'json']);
  try {
    const ok = await post(srv.base, '/v1/chat/completions', { ...quiet, messages: [{ role: 'user', content: 'hello' }] });
    const id = Number(ok.headers.get('x-request-id'));
    assert.ok(id > 0);
    const bad = await post(srv.base, '/v1/chat/completions', { ...quiet, temperature: 'hot', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(bad.status, 400);
    await post(srv.base, '/v1/messages', { model: 'echo', max_tokens: 50, messages: [{ role: 'user', content: 'again' }] });
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
  const lines = srv.stderr().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  assert.equal(lines.length, 3, srv.stderr());
  const [first, refused, third] = lines;
  assert.equal(first.endpoint, '/v1/chat/completions');
  assert.equal(first.status, 200);
  assert.equal(first.generated_tokens, 'Echo: hello'.length);
  assert.ok(first.prompt_tokens > 0 && first.cached_tokens === 0);
  assert.ok(first.ttft_ms > 0 && first.total_ms >= first.ttft_ms);
  assert.equal(refused.status, 400);
  assert.equal(refused.ttft_ms, null);
  assert.equal(third.endpoint, '/v1/messages');
  assert.ok(third.cached_tokens > 0, JSON.stringify(third)); // the held conversation's prefix
  assert.deepEqual(lines.map((l) => l.id), [lines[0].id, lines[0].id + 1, lines[0].id + 2]);
});

test('the default log is one text line per request', async () => {
  const srv = await startServer();
  await post(srv.base, '/v1/chat/completions', { ...quiet, messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(await srv.stop(), 0);
  assert.match(srv.stderr(), /strata serve: request \d+ \/v1\/chat\/completions 200 prompt=\d+ cached=\d+ generated=\d+ ttft=[0-9.]+s total=[0-9.]+s/);
});
