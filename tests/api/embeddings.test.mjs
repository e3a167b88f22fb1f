// embeddings.test.mjs: POST /v1/embeddings behind --embeddings, through the openai SDK (which asks
// for base64 and decodes it) and raw (float): one unit-length vector per input (a string, strings,
// token ids, arrays of ids), in order, with the token count; off without the flag (501). On the
// demo model: its hidden width, the same text twice the same vector, different texts different
// ones, and a chat after an embedding still answers (the session is read afresh).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, post } from './server.mjs';

const model = path.join(process.env.STRATA_SOURCE_DIR ?? path.resolve('../..'), 'models/strata-demo-q8_0.gguf');
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

test('without --embeddings the endpoint says how to turn it on', async () => {
  const srv = await startServer();
  try {
    const r = await post(srv.base, '/v1/embeddings', { model: 'echo', input: 'x' });
    assert.equal(r.status, 501);
    assert.match(r.json.error.message, /--embeddings/);
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});

test('echo engine: every input form, both encodings, the SDK', async () => {
  const srv = await startServer(['--embeddings']);
  try {
    const c = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
    const r = await c.embeddings.create({ model: 'echo', input: ['one', 'two words'] });
    assert.equal(r.object, 'list');
    assert.deepEqual(r.data.map((d) => d.index), [0, 1]);
    for (const d of r.data) { assert.equal(d.embedding.length, 16); assert.ok(Math.abs(norm(d.embedding) - 1) < 1e-5); }
    assert.equal(r.usage.prompt_tokens, 3 + 9);
    const f = await post(srv.base, '/v1/embeddings', { model: 'echo', input: 'one', encoding_format: 'float' });
    assert.deepEqual(f.json.data[0].embedding.map((x) => x.toFixed(5)), r.data[0].embedding.map((x) => x.toFixed(5)));
    const ids = await post(srv.base, '/v1/embeddings', { input: [[111, 110, 101], [116]], encoding_format: 'float' });
    assert.deepEqual(ids.json.data[0].embedding, f.json.data[0].embedding); // "one" as ids
    assert.equal(ids.json.data.length, 2);
    assert.equal((await post(srv.base, '/v1/embeddings', { input: [] })).json.error.param, 'input');
    assert.equal((await post(srv.base, '/v1/embeddings', { input: 'x', dimensions: 8 })).json.error.param, 'dimensions');
    assert.equal((await post(srv.base, '/v1/embeddings', { input: 'x', encoding_format: 'hex' })).json.error.param, 'encoding_format');
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

test('demo model: its hidden width, stable, telling texts apart; chat still answers after', async () => {
  const srv = await startServer(['--embeddings', '--ctx', '1024', '-m', model]);
  try {
    const c = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
    const r = await c.embeddings.create({ model: 'demo', input: ['The ocean is deep.', 'The ocean is deep.', 'I like trains.'] });
    const [a, b, d] = r.data.map((x) => x.embedding);
    assert.equal(a.length, 512);
    assert.ok(Math.abs(norm(a) - 1) < 1e-4);
    assert.deepEqual(a, b);
    assert.notDeepEqual(a, d);
    const chat = await c.chat.completions.create({ model: 'demo', max_tokens: 8, temperature: 0, chat_template_kwargs: { enable_thinking: false },
      messages: [{ role: 'user', content: 'hello' }] });
    assert.equal(chat.usage.prompt_tokens_details.cached_tokens, 0);
    assert.ok(chat.usage.completion_tokens > 0);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});
