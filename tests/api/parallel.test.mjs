// parallel.test.mjs: parallel slots (`strata serve --parallel N`, engine_strata.c) with the openai
// client. On tiny synth models of the three state kinds (qwen3, qwen35, qwen4exp) and the demo
// model (qwen35moe): four requests at once, greedy and seeded, get exactly the replies they get one
// after the other on another server (batch invariance: a reply does not depend on what runs beside
// it; tests/unit/test_batch.c proves the rows of a step bit-equal); on the demo model, four concurrent streams with
// their own speculative decoding (MTP, n-gram, none: verify chunks in the shared step) write what
// they write alone without drafts; eight concurrent streams on the demo model are all
// answered (the time to the first token and to the end of each is printed); a client that
// disconnects mid-stream frees its slot at once: with one slot, the next request is answered while
// the abandoned one would still have thousands of tokens to go; ignore_eos (llama.cpp's) runs a
// reply to max_tokens (bench/parallel.sh's fixed-length streams).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serveModel, status, testModels } from './server.mjs';

const models = testModels(['qwen3', 'qwen35', 'qwen4exp']);

const serve = (model, extra = []) => serveModel(model, ['--ctx', '1024', '-t', '2', ...extra]);

const quiet = { model: 'm', max_tokens: 12, chat_template_kwargs: { enable_thinking: false } };
const asks = [
  { ...quiet, temperature: 0, messages: [{ role: 'user', content: 'What does ocean mean?' }] },
  { ...quiet, temperature: 0, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Who are you?' }] },
  { ...quiet, temperature: 0.9, seed: 7, messages: [{ role: 'user', content: 'Tell me a story about a river and a lake.' }] },
  { ...quiet, temperature: 0.7, seed: 11, top_p: 0.9, messages: [{ role: 'user', content: 'hello' }] },
];

const answer = (r) => ({ text: r.choices[0].message.content, n: r.usage.completion_tokens, finish: r.choices[0].finish_reason });

for (const arch of ['qwen3', 'qwen35', 'qwen4exp', 'demo']) {
  test(`${arch}: four requests at once answer as each does alone`, async () => {
    const alone = await serve(models[arch], ['--parallel', '1']);
    const together = await serve(models[arch], ['--parallel', '4']);
    try {
      const want = [];
      for (const a of asks) want.push(answer(await alone.client.chat.completions.create(a)));
      const got = (await Promise.all(asks.map((a) => together.client.chat.completions.create(a)))).map(answer);
      assert.deepEqual(got, want);
      // The first one again, now beside three others: the same tokens.
      const again = await Promise.all([asks[0], asks[1], asks[2], asks[3]].reverse().map((a) => together.client.chat.completions.create(a)));
      assert.deepEqual(again.reverse().map(answer), want);
    } finally {
      assert.equal(await alone.stop(), 0, alone.stderr());
      assert.equal(await together.stop(), 0, together.stderr());
    }
  });
}

test('demo: drafts beside other streams (speculative verify chunks in the shared step) change no text', async () => {
  const alone = await serve(models.demo, ['--parallel', '1', '--spec', 'none']);
  const together = await serve(models.demo, ['--parallel', '4']);
  const kinds = [{ 'speculative.type': 'mtp' }, { 'speculative.type': 'ngram', 'speculative.n_max': 4 }, { 'speculative.type': 'mtp', 'speculative.n_max': 1 }, {}];
  const spec = asks.map((a, i) => ({ ...a, ...kinds[i], max_tokens: 48 }));
  const streamed = async (client, a) => {
    const stream = await client.chat.completions.create({ ...a, stream: true, stream_options: { include_usage: true } });
    let text = '', usage = null;
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? '';
      if (c.usage) usage = c.usage;
    }
    return { text, n: usage.completion_tokens, accepted: usage.completion_tokens_details?.accepted_prediction_tokens ?? 0 };
  };
  try {
    const want = [];
    for (const a of spec) want.push(await streamed(alone.client, { ...a, 'speculative.type': 'none' }));
    const got = await Promise.all(spec.map((a) => streamed(together.client, a)));
    assert.deepEqual(got.map((g) => [g.text, g.n]), want.map((w) => [w.text, w.n]));
    assert.ok(want.every((w) => w.accepted === 0), 'the reference ran without drafts');
    assert.ok(got.slice(0, 3).some((g) => g.accepted > 0), `drafts were accepted beside the others: ${JSON.stringify(got)}`);
  } finally {
    assert.equal(await alone.stop(), 0, alone.stderr());
    assert.equal(await together.stop(), 0, together.stderr());
  }
});

test('demo: ignore_eos runs the reply to max_tokens, the same text up to where it would have ended', async () => {
  const srv = await serve(models.demo, ['--parallel', '2']);
  try {
    const a = { ...quiet, temperature: 0, max_tokens: 96, messages: [{ role: 'user', content: 'hello' }] };
    const plain = await srv.client.chat.completions.create(a);
    assert.equal(plain.choices[0].finish_reason, 'stop', 'the demo model ends this reply itself');
    const long = await srv.client.chat.completions.create({ ...a, ignore_eos: true });
    assert.equal(long.choices[0].finish_reason, 'length');
    assert.equal(long.usage.completion_tokens, 96);
    assert.ok(long.choices[0].message.content.startsWith(plain.choices[0].message.content));
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

test('demo: eight concurrent streams are all answered', async () => {
  const srv = await serve(models.demo, ['--parallel', '8']);
  try {
    const t0 = performance.now();
    const times = await Promise.all(Array.from({ length: 8 }, async (_, i) => {
      const stream = await srv.client.chat.completions.create({
        ...quiet, max_tokens: 32, temperature: 0, stream: true,
        messages: [{ role: 'user', content: `What does word number ${i} mean?` }],
      });
      let first = null, text = '', finish = null;
      for await (const c of stream) {
        const d = c.choices[0]?.delta?.content;
        if (d) { text += d; first ??= performance.now() - t0; }
        if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
      }
      return { i, first, end: performance.now() - t0, chars: text.length, finish };
    }));
    for (const t of times) console.log(`stream ${t.i}: first token ${t.first?.toFixed(0)} ms, done ${t.end.toFixed(0)} ms, ${t.chars} chars, ${t.finish}`);
    for (const t of times) {
      assert.ok(t.chars > 0 && ['stop', 'length'].includes(t.finish), JSON.stringify(t));
    }
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

test('a client that disconnects mid-stream frees its slot at once', async () => {
  const srv = await serve(models.demo, ['--parallel', '1', '--ctx', '4096']);
  try {
    const before = (await status(srv.base)).totals;
    // A reply that would run to the end of the context (4096 tokens) unless cancelled.
    const stream = await srv.client.chat.completions.create({
      ...quiet, max_tokens: 4000, temperature: 1, seed: 3, stream: true, messages: [{ role: 'user', content: 'Say everything you know.' }],
    });
    let chunks = 0;
    for await (const c of stream) { if (c.choices[0]?.delta?.content && ++chunks >= 3) break; }
    const r = await srv.client.chat.completions.create({ ...quiet, temperature: 0, messages: [{ role: 'user', content: 'hello' }] });
    assert.ok(r.choices[0].message.content.length > 0);
    const after = (await status(srv.base)).totals;
    assert.equal(after.cancelled - before.cancelled, 1);
    // The one slot served the second request long before the first could have ended.
    const metrics = await (await fetch(srv.base + '/metrics')).text();
    const generated = Number(metrics.match(/^strata_completion_tokens_total (\d+)$/m)?.[1] ?? 'NaN');
    assert.ok(generated < 1000, `generated ${generated} tokens in all`);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});
