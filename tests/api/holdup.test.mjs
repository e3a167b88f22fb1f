// holdup.test.mjs: no client can stall the others or drive a keyless server from a web page.
// A client that stops reading loses only its own request; idle and half-open connections cannot
// lock new clients out; a keyless server refuses cross-site POSTs (not application/json, or an
// Origin it does not allow) with 403; the CORS preflight allows what the openai and Anthropic SDKs
// send (x-stainless-*); SIGTERM drains, ending a running stream with a final error event and
// answering queued requests 503; a 429 carries Retry-After. Raw sockets and curl-like requests
// where a client must misbehave; the real SDKs where they are what a user runs. No sleeps: every
// wait is on the server (a response, a closed socket, or /v1/status polled).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, post, status, until } from './server.mjs';

const quiet = { chat_template_kwargs: { enable_thinking: false } };
const servers = [];
async function server(args = []) {
  const s = await startServer(args);
  servers.push(s);
  return s;
}
after(async () => { for (const s of servers) await s.stop(); });

// A raw request on its own socket; resolves with the socket once it is connected and written.
function rawRequest(port, text) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1', () => { sock.write(text); resolve(sock); });
    sock.on('error', reject);
  });
}

function chatRequest(port, body, headers = '') {
  const json = JSON.stringify(body);
  return `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n${headers}` +
    `Content-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`;
}

test('a client that stops reading loses only its own request', async () => {
  const srv = await server(['--ctx', '16777216']);
  const before = (await status(srv.base)).totals;
  // A stream of about 10 MB that this client never reads: the socket buffers fill, then the
  // channel, and the engine must give up on it rather than wait for it.
  const sock = await rawRequest(srv.port, chatRequest(srv.port, {
    model: 'echo', stream: true, ...quiet, messages: [{ role: 'user', content: `/repeat 100000 ${'w'.repeat(100)}` }],
  }));
  sock.pause();
  const closed = new Promise((resolve) => sock.on('close', resolve));
  await until(srv.base, (s) => s.busy && s.totals.requests > before.requests);
  const client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
  const r = await client.chat.completions.create({ model: 'echo', ...quiet, messages: [{ role: 'user', content: 'still served' }] });
  assert.equal(r.choices[0].message.content, 'Echo: still served');
  const s = await status(srv.base);
  assert.equal(s.totals.cancelled - before.cancelled, 1, 'the stalled request was cancelled');
  assert.equal(s.totals.stalled - before.stalled, 1);
  sock.resume(); // its socket was shut by the server: reading drains what was buffered, then ends
  await closed;
});

test('idle and half-open connections cannot lock new clients out', async () => {
  const srv = await server();
  const socks = [];
  // 300 connections (more than the 256 allowed): idle ones, and half-open ones that sent half a
  // request line and nothing more.
  for (let i = 0; i < 300; i++) {
    const sock = await rawRequest(srv.port, i % 2 ? 'GET /v1/mod' : '');
    sock.on('error', () => {});
    socks.push(sock);
  }
  const r = await fetch(srv.base + '/v1/models');
  assert.equal(r.status, 200);
  assert.equal((await r.json()).data[0].id, 'echo');
  const s = await status(srv.base);
  assert.ok(s.connections.evicted >= 300 - 256, JSON.stringify(s.connections));
  assert.ok(s.connections.open <= 256, JSON.stringify(s.connections));
  for (const sock of socks) sock.destroy();
});

test('a keyless server refuses cross-site POSTs with 403', async () => {
  const srv = await server(['--cors', 'http://app.example']);
  const body = JSON.stringify({ model: 'echo', ...quiet, messages: [{ role: 'user', content: 'x' }] });
  for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', null]) {
    const headers = type ? { 'content-type': type } : {};
    const r = await fetch(srv.base + '/v1/chat/completions', { method: 'POST', headers, body: type ? body : Buffer.from(body) });
    assert.equal(r.status, 403, `Content-Type ${type}`);
    assert.equal((await r.json()).error.code, 'cross_site_refused');
  }
  // A saved session cannot be overwritten from a page either.
  assert.equal((await fetch(srv.base + '/v1/sessions/save', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{"name":"x"}' })).status, 403);
  const evil = await post(srv.base, '/v1/chat/completions', body, { origin: 'http://evil.example' });
  assert.equal(evil.status, 403);
  assert.equal(evil.json.error.code, 'origin_not_allowed');
  assert.equal((await post(srv.base, '/v1/chat/completions', body, { origin: 'null' })).status, 403);
  // The server's own page, the --cors origin, and a client that sends no Origin are served.
  assert.equal((await post(srv.base, '/v1/chat/completions', body, { origin: srv.base })).status, 200);
  assert.equal((await post(srv.base, '/v1/chat/completions', body, { origin: 'http://app.example' })).status, 200);
  assert.equal((await post(srv.base, '/v1/chat/completions', body, { 'content-type': 'application/json; charset=utf-8' })).status, 200);
  const m = await post(srv.base, '/v1/messages', { model: 'echo', max_tokens: 9, messages: [{ role: 'user', content: 'x' }] }, { origin: 'http://evil.example' });
  assert.equal(m.status, 403);
  assert.equal(m.json.error.type, 'permission_error');
});

test('with a key, the key is the proof: any content type and origin', async () => {
  const srv = await server(['--api-key', 'k1']);
  const body = JSON.stringify({ model: 'echo', ...quiet, messages: [{ role: 'user', content: 'x' }] });
  const r = await fetch(srv.base + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'text/plain', authorization: 'Bearer k1', origin: 'http://evil.example' }, body });
  assert.equal(r.status, 200);
});

// The headers an SDK sends, recorded by a fetch that answers without a server.
async function sdkHeaders(make) {
  let seen;
  const fetchSpy = async (url, init) => {
    seen = new Headers(init.headers);
    return new Response('{}', { status: 200, headers: { 'content-type': 'application/json' } });
  };
  await make(fetchSpy).catch(() => {});
  return [...seen.keys()];
}

test('the CORS preflight allows every header the openai and Anthropic SDKs send', async () => {
  const srv = await server(['--cors', 'http://app.example']);
  const openaiNames = await sdkHeaders((f) => new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'k', fetch: f, maxRetries: 0, dangerouslyAllowBrowser: true })
    .chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'x' }] }));
  const anthropicNames = await sdkHeaders((f) => new Anthropic({ baseURL: srv.base, apiKey: 'k', fetch: f, maxRetries: 0, dangerouslyAllowBrowser: true })
    .messages.create({ model: 'echo', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }));
  assert.ok(openaiNames.some((n) => n.startsWith('x-stainless-')), openaiNames.join());
  for (const names of [openaiNames, anthropicNames]) {
    // A browser asks only for the headers that are not CORS-safelisted.
    const asked = names.filter((n) => !['accept', 'accept-language', 'content-language', 'user-agent'].includes(n));
    const r = await fetch(srv.base + '/v1/chat/completions', {
      method: 'OPTIONS',
      headers: { origin: 'http://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': asked.join(',') },
    });
    assert.equal(r.status, 204);
    assert.equal(r.headers.get('access-control-allow-origin'), 'http://app.example');
    const allowed = r.headers.get('access-control-allow-headers').toLowerCase().split(/\s*,\s*/);
    for (const n of asked) assert.ok(allowed.includes(n), `${n} not in ${allowed}`);
  }
  // Headers no client of the API sends are not allowed.
  const r = await fetch(srv.base + '/v1/chat/completions', {
    method: 'OPTIONS', headers: { origin: 'http://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-evil' },
  });
  assert.ok(!r.headers.get('access-control-allow-headers').toLowerCase().includes('x-evil'));
});

test('HEAD /health answers 200 with no body', async () => {
  const srv = await server();
  const r = await fetch(srv.base + '/health', { method: 'HEAD' });
  assert.equal(r.status, 200);
  assert.equal(await r.text(), '');
});

test('a 429 carries Retry-After', async () => {
  const srv = await server(['--queue', '1', '--ctx', '16777216']);
  const c = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
  const running = await c.chat.completions.create({ model: 'echo', stream: true, ...quiet, messages: [{ role: 'user', content: '/forever' }] });
  const it = running[Symbol.asyncIterator]();
  await it.next();
  const queued = c.chat.completions.create({ model: 'echo', ...quiet, messages: [{ role: 'user', content: 'queued' }] });
  await until(srv.base, (x) => x.queue.waiting === 1);
  const r = await post(srv.base, '/v1/chat/completions', { model: 'echo', ...quiet, messages: [{ role: 'user', content: 'no room' }] });
  assert.equal(r.status, 429);
  assert.match(r.headers.get('retry-after'), /^[1-9][0-9]*$/);
  const a = await post(srv.base, '/v1/messages', { model: 'echo', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
  assert.equal(a.status, 429);
  assert.match(a.headers.get('retry-after'), /^[1-9][0-9]*$/);
  await it.return();
  assert.equal((await queued).choices[0].message.content, 'Echo: queued');
});

test('SIGTERM drains: the running stream ends with a final event, the queued request gets 503', async () => {
  const srv = await startServer(['--ctx', '16777216']);
  const c = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
  const a = new Anthropic({ baseURL: srv.base, apiKey: 'unused', maxRetries: 0 });
  const stream = await c.chat.completions.create({ model: 'echo', stream: true, ...quiet, messages: [{ role: 'user', content: '/forever' }] });
  const it = stream[Symbol.asyncIterator]();
  assert.equal((await it.next()).done, false);
  const queued = post(srv.base, '/v1/chat/completions', { model: 'echo', ...quiet, messages: [{ role: 'user', content: 'queued' }] });
  const queuedStream = a.messages.create({ model: 'echo', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'queued too' }] });
  await until(srv.base, (x) => x.queue.waiting === 2);
  const exited = srv.stop();
  let text = '';
  await assert.rejects((async () => { for (let x = await it.next(); !x.done; x = await it.next()) text += x.value.choices[0]?.delta?.content ?? ''; })(),
    (e) => /shutting down/.test(e.message));
  assert.ok(text.startsWith('tick'), text.slice(0, 40));
  const q = await queued;
  assert.equal(q.status, 503);
  assert.equal(q.json.error.code, 'shutting_down');
  await assert.rejects((async () => { for await (const ev of await queuedStream) void ev; })(), (e) => /shutting down/.test(e.message));
  assert.equal(await exited, 0, srv.stderr());
});
