// auth.test.mjs: with a key (--api-key or STRATA_API_KEY) every endpoint but /health (and the web
// app's static files) needs it, as 'Authorization: Bearer KEY' or 'x-api-key: KEY'; both official
// clients pass it unchanged. With a key, any Host is served.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, post, getWithHost } from './server.mjs';

const KEY = 'sk-test-0123456789';
let srv;
before(async () => { srv = await startServer(['--api-key', KEY]); });
after(async () => { assert.equal(await srv.stop(), 0, srv.stderr()); });

test('/health never needs the key', async () => {
  const r = await fetch(srv.base + '/health');
  assert.equal(r.status, 200);
  assert.deepEqual(await r.json(), { status: 'ok' });
});

test('every other endpoint refuses a missing or wrong key with 401', async () => {
  for (const path of ['/v1/models', '/v1/status', '/metrics']) {
    assert.equal((await fetch(srv.base + path)).status, 401, path);
    assert.equal((await fetch(srv.base + path, { headers: { Authorization: 'Bearer nope' } })).status, 401, path);
    assert.equal((await fetch(srv.base + path, { headers: { 'x-api-key': KEY + 'x' } })).status, 401, path);
    assert.equal((await fetch(srv.base + path, { headers: { 'x-api-key': KEY.slice(0, -1) } })).status, 401, path);
  }
  const body = { model: 'echo', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] };
  for (const path of ['/v1/chat/completions', '/v1/completions', '/v1/messages', '/v1/messages/count_tokens'])
    assert.equal((await post(srv.base, path, body)).status, 401, path);
  const a = await post(srv.base, '/v1/messages', body);
  assert.equal(a.json.error.type, 'authentication_error');
  const o = await post(srv.base, '/v1/chat/completions', body);
  assert.equal(o.json.error.code, 'invalid_api_key');
});

test('Bearer and x-api-key both pass', async () => {
  assert.equal((await fetch(srv.base + '/v1/models', { headers: { Authorization: `Bearer ${KEY}` } })).status, 200);
  assert.equal((await fetch(srv.base + '/v1/models', { headers: { 'x-api-key': KEY } })).status, 200);
});

test('the official clients work with the key and fail without it', async () => {
  const o = new OpenAI({ baseURL: srv.base + '/v1', apiKey: KEY, maxRetries: 0 });
  const r = await o.chat.completions.create({ model: 'echo', reasoning_effort: 'none', messages: [{ role: 'user', content: 'k' }] });
  assert.equal(r.choices[0].message.content, 'Echo: k');
  const a = new Anthropic({ baseURL: srv.base, apiKey: KEY, maxRetries: 0 });
  const m = await a.messages.create({ model: 'echo', max_tokens: 50, messages: [{ role: 'user', content: 'k' }] });
  assert.equal(m.content[0].text, 'Echo: k');
  const bad = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e.status === 401);
  const badA = new Anthropic({ baseURL: srv.base, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(badA.messages.create({ model: 'echo', max_tokens: 5, messages: [{ role: 'user', content: 'k' }] }), (e) => e.status === 401);
});

test('with a key, a non-loopback Host is served', async () => {
  const r = await getWithHost(srv.port, '/v1/models', 'strata.example', { Authorization: `Bearer ${KEY}` });
  assert.equal(r.status, 200);
});

test('the key can come from STRATA_API_KEY', async () => {
  const s2 = await startServer([], { STRATA_API_KEY: 'from-env' });
  try {
    assert.equal((await fetch(s2.base + '/v1/models')).status, 401);
    assert.equal((await fetch(s2.base + '/v1/models', { headers: { Authorization: 'Bearer from-env' } })).status, 200);
  } finally {
    assert.equal(await s2.stop(), 0);
  }
});
