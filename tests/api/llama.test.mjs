// llama.test.mjs: llama-server's utility endpoints in its shapes, so its clients work unchanged:
// /tokenize ({content, with_pieces} to {tokens}), /detokenize ({tokens} to {content}, a split
// character as U+FFFD), /apply-template ({messages} to {prompt}), /props (the request defaults, the
// context, the template, one slot) and /slots (busy while a request runs), on the echo engine and
// on the real one with the demo model.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, post, until } from './server.mjs';

const model = path.join(process.env.STRATA_SOURCE_DIR ?? path.resolve('../..'), 'models/strata-demo-q8_0.gguf');

test('echo engine: tokenize, detokenize, apply-template, props, slots', async () => {
  const srv = await startServer(['--ctx', '16777216', '--temp', '0.6']);
  try {
    const t = await post(srv.base, '/tokenize', { content: 'ab<|im_start|>' });
    assert.deepEqual(t.json, { tokens: [97, 98, 256] });
    const p = await post(srv.base, '/tokenize', { content: 'a<|im_end|>', with_pieces: true });
    assert.deepEqual(p.json.tokens, [{ id: 97, piece: 'a' }, { id: 257, piece: '<|im_end|>' }]);
    const plain = await post(srv.base, '/tokenize', { content: '<|im_end|>', parse_special: false });
    assert.equal(plain.json.tokens.length, 10);
    assert.deepEqual((await post(srv.base, '/detokenize', { tokens: [104, 105, 257] })).json, { content: 'hi<|im_end|>' });
    const bad = await post(srv.base, '/detokenize', { tokens: [104, 999] });
    assert.equal(bad.status, 400);
    assert.equal((await post(srv.base, '/detokenize', { tokens: 'hi' })).json.error.param, 'tokens');
    assert.equal((await post(srv.base, '/tokenize', {})).json.error.param, 'content');
    const a = await post(srv.base, '/apply-template', { messages: [{ role: 'system', content: 'S' }, { role: 'user', content: 'hi' }] });
    assert.equal(a.json.prompt, '<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n');
    const props = await (await fetch(srv.base + '/props')).json();
    assert.equal(props.default_generation_settings.n_ctx, 16777216);
    assert.equal(props.default_generation_settings.params.temperature.toFixed(2), '0.60');
    assert.equal(props.default_generation_settings.params.top_k, 40);
    assert.equal(props.total_slots, 1);
    assert.match(props.chat_template, /im_start/);
    let slots = await (await fetch(srv.base + '/slots')).json();
    assert.equal(slots.length, 1);
    assert.equal(slots[0].is_processing, false);
    const c = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
    const stream = await c.chat.completions.create({ model: 'echo', stream: true, chat_template_kwargs: { enable_thinking: false }, messages: [{ role: 'user', content: '/forever' }] });
    const it = stream[Symbol.asyncIterator]();
    await it.next();
    slots = await (await fetch(srv.base + '/slots')).json();
    assert.equal(slots[0].is_processing, true);
    await it.return();
    await until(srv.base, (s) => !s.busy);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

test('demo model: tokenize and detokenize round trip, a split character, the template', async () => {
  const srv = await startServer(['--ctx', '1024', '-m', model, '-np', '3']);
  try {
    // the slots the engine runs at once (--parallel)
    assert.equal((await (await fetch(srv.base + '/props')).json()).total_slots, 3);
    const text = 'Grüße, 日本 — ok?';
    const t = await post(srv.base, '/tokenize', { content: text, with_pieces: true });
    const ids = t.json.tokens.map((x) => x.id);
    assert.ok(ids.length > 3);
    assert.equal((await post(srv.base, '/detokenize', { tokens: ids })).json.content, text);
    // the bytes of the pieces are the text's bytes
    const bytes = Buffer.concat(t.json.tokens.map((x) => (typeof x.piece === 'string' ? Buffer.from(x.piece) : Buffer.from(x.piece))));
    assert.equal(bytes.toString(), text);
    // a prefix that ends inside a character: U+FFFD for what is cut
    const cut = t.json.tokens.findIndex((x) => Array.isArray(x.piece));
    assert.ok(cut >= 0, "a character split between tokens");
    assert.match((await post(srv.base, '/detokenize', { tokens: ids.slice(0, cut + 1) })).json.content, /\uFFFD$/);
    const a = await post(srv.base, '/apply-template', { messages: [{ role: 'user', content: 'hi' }], chat_template_kwargs: { enable_thinking: false } });
    assert.match(a.json.prompt, /<\|im_start\|>user\nhi<\|im_end\|>\n<\|im_start\|>assistant\n/);
    const props = await (await fetch(srv.base + '/props')).json();
    assert.equal(props.default_generation_settings.n_ctx, 1024);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});
