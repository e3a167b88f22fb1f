// queue.test.mjs: the one engine thread and its FIFO queue: a client that disconnects cancels its
// request and the next one runs normally; 16 concurrent clients are all answered, each with its
// own reply, served in the order admitted; a full queue answers 429; SSE comments report prompt
// progress before the reply; /v1/status and /metrics count it all. No sleeps: every wait is on a
// server event (a response, or /v1/status polled a bounded number of times).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, status, until } from './server.mjs';

let srv, client;
before(async () => {
  srv = await startServer(['--ctx', '16777216']);
  client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
});
after(async () => { assert.equal(await srv.stop(), 0, srv.stderr()); });

const quiet = { chat_template_kwargs: { enable_thinking: false } };

test('a client that disconnects cancels its request; the next one runs normally', async () => {
  const before = (await status(srv.base)).totals;
  // Without a cancel this reply would never end (the context allows 16M tokens and the engine
  // waits for a reader once 1 MiB is buffered), so the next request could not run.
  const stream = await client.chat.completions.create({ model: 'echo', stream: true, ...quiet, messages: [{ role: 'user', content: '/forever' }] });
  let chunks = 0;
  for await (const c of stream) { if (c.choices[0]?.delta?.content && ++chunks >= 5) break; }
  assert.equal(chunks, 5);
  const r = await client.chat.completions.create({ model: 'echo', ...quiet, messages: [{ role: 'user', content: 'after the cancel' }] });
  assert.equal(r.choices[0].message.content, 'Echo: after the cancel');
  const after = (await status(srv.base)).totals;
  assert.equal(after.cancelled - before.cancelled, 1);
  assert.equal(after.ok - before.ok, 2);
  const metrics = await (await fetch(srv.base + '/metrics')).text();
  assert.match(metrics, /^strata_cancelled_total 1$/m);
});

test('a non-streaming client that disconnects cancels too', async () => {
  const before = (await status(srv.base)).totals;
  const ac = new AbortController();
  const pending = fetch(srv.base + '/v1/chat/completions', {
    method: 'POST', signal: ac.signal, headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'echo', ...quiet, messages: [{ role: 'user', content: '/forever' }] }),
  }).catch((e) => e.name);
  const s = await until(srv.base, (st) => st.busy && st.totals.requests > before.requests);
  assert.ok(s.busy);
  ac.abort();
  assert.equal(await pending, 'AbortError');
  const r = await client.chat.completions.create({ model: 'echo', ...quiet, messages: [{ role: 'user', content: 'next' }] });
  assert.equal(r.choices[0].message.content, 'Echo: next');
  assert.equal((await status(srv.base)).totals.cancelled - before.cancelled, 1);
});

test('16 concurrent clients: all answered, each its own reply, in admission order', async () => {
  const N = 16;
  const replies = await Promise.all(Array.from({ length: N }, (_, i) =>
    client.chat.completions.create({ model: 'echo', ...quiet, messages: [{ role: 'user', content: `/repeat 20 client${i}` }] }).withResponse()));
  const seen = replies.map(({ data, response }, i) => {
    assert.equal(data.choices[0].message.content, `client${i} `.repeat(20));
    assert.equal(data.choices[0].finish_reason, 'stop');
    return { seq: Number(response.headers.get('x-strata-seq')), served: Number(response.headers.get('x-strata-served')) };
  });
  const seqs = new Set(seen.map((x) => x.seq));
  assert.equal(seqs.size, N, 'every request admitted once');
  seen.sort((a, b) => a.seq - b.seq);
  // FIFO: the engine took them in the order they were admitted, with no gaps.
  for (let i = 1; i < N; i++) {
    assert.equal(seen[i].seq - seen[0].seq, i);
    assert.equal(seen[i].served - seen[0].served, i);
  }
  const s = await status(srv.base);
  assert.equal(s.queue.waiting, 0);
  assert.equal(s.totals.rejected, 0);
});

test('16 concurrent streams are all answered in full', async () => {
  const texts = await Promise.all(Array.from({ length: 16 }, async (_, i) => {
    const stream = await client.chat.completions.create({ model: 'echo', stream: true, ...quiet, messages: [{ role: 'user', content: `stream${i}` }] });
    let t = '';
    for await (const c of stream) t += c.choices[0]?.delta?.content ?? '';
    return t;
  }));
  texts.forEach((t, i) => assert.equal(t, `Echo: stream${i}`));
});

test('SSE comments report prompt progress before the reply', async () => {
  const r = await fetch(srv.base + '/v1/chat/completions', {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'echo', stream: true, ...quiet, messages: [{ role: 'user', content: 'p'.repeat(3000) }] }),
  });
  assert.equal(r.headers.get('content-type'), 'text/event-stream');
  const text = await r.text();
  const first = text.indexOf('data:');
  assert.match(text.slice(0, first), /^: prompt \d+\/\d+$/m);
  assert.ok(text.trimEnd().endsWith('data: [DONE]'));
});

test('/metrics is Prometheus text with the counters', async () => {
  const r = await fetch(srv.base + '/metrics');
  assert.match(r.headers.get('content-type'), /^text\/plain/);
  const t = await r.text();
  for (const name of ['strata_requests_total', 'strata_prompt_tokens_total', 'strata_completion_tokens_total', 'strata_reused_tokens_total',
    'strata_decode_tokens_per_second', 'strata_prompt_tokens_per_second', 'strata_queue_depth', 'strata_resident_memory_bytes'])
    assert.match(t, new RegExp(`^# TYPE ${name} (counter|gauge)$[\\s\\S]*^${name}(\\{[^}]*\\})? [0-9.]+$`, 'm'), name);
  const s = await status(srv.base);
  assert.equal(s.model, 'echo');
  assert.equal(s.context_length, 16777216);
  assert.ok(s.totals.completion_tokens > 0 && s.memory.rss_bytes > 0);
});

test('a full queue answers 429 and loses nothing it accepted', async () => {
  const s2 = await startServer(['--queue', '1', '--ctx', '16777216']);
  try {
    const c2 = new OpenAI({ baseURL: s2.base + '/v1', apiKey: 'unused', maxRetries: 0 });
    const running = await c2.chat.completions.create({ model: 'echo', stream: true, ...quiet, messages: [{ role: 'user', content: '/forever' }] });
    const it = running[Symbol.asyncIterator]();
    await it.next(); // the engine is now busy with it
    const queued = c2.chat.completions.create({ model: 'echo', ...quiet, messages: [{ role: 'user', content: 'queued' }] });
    const st = await until(s2.base, (x) => x.queue.waiting === 1);
    assert.equal(st.queue.waiting, 1);
    await assert.rejects(c2.chat.completions.create({ model: 'echo', ...quiet, messages: [{ role: 'user', content: 'one too many' }] }),
      (e) => e.status === 429);
    const a = await fetch(s2.base + '/v1/messages', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'echo', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }) });
    assert.equal(a.status, 429);
    assert.equal((await a.json()).error.type, 'rate_limit_error');
    await it.return(); // disconnect: the queued request runs next
    assert.equal((await queued).choices[0].message.content, 'Echo: queued');
    assert.equal((await status(s2.base)).totals.rejected, 2);
  } finally {
    assert.equal(await s2.stop(), 0);
  }
});

test('SIGTERM the moment the server says it listens: it stops cleanly, every time', async () => {
  // The stop signal once could land before its handler was set (the process died of it) or
  // between the check of a flag and pause() (the process never stopped): cmd_serve.c's stop pipe.
  for (let i = 0; i < 40; i++) {
    const s = await startServer([]);
    assert.equal(await s.stop(), 0, `start ${i}: ${s.stderr()}`);
  }
});
