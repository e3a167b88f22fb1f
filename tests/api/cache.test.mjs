// cache.test.mjs: the prompt cache across conversations (`strata serve --cache-ram`, strata.h's
// st_prompt_cache) with the openai client, on tiny synth models of the three state kinds (qwen3:
// attention only; qwen35: recurrent with checkpoints; qwen4exp: indexer keys, PLE history) and the
// demo model: each turn of a conversation reuses all of its previous turn (prompt and reply, as
// `cached_tokens` reports) when an unrelated request comes in between, when two clients alternate
// two conversations, and when four agents interleave theirs; with --cache-ram 0 the alternation
// loses it (the cache is what keeps it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serveModel, testModels } from './server.mjs';

const models = testModels(['qwen3', 'qwen35', 'qwen4exp']);

const serve = (model, extra = []) => serveModel(model, ['--ctx', '2048', '-t', '1', ...extra]);

const greedy = { model: 'm', temperature: 0, max_tokens: 8, chat_template_kwargs: { enable_thinking: false } };

// A conversation: each turn sends the history with the last reply's content, then one more question.
function conversation(client, first) {
  const msgs = [{ role: 'user', content: first }];
  let held = 0; // prompt + reply tokens of the previous turn
  return {
    async turn(next) {
      if (next) msgs.push({ role: 'user', content: next });
      const r = await client.chat.completions.create({ ...greedy, messages: msgs });
      msgs.push({ role: 'assistant', content: r.choices[0].message.content ?? '' });
      const out = { cached: r.usage.prompt_tokens_details.cached_tokens, held, prompt: r.usage.prompt_tokens };
      held = r.usage.prompt_tokens + r.usage.completion_tokens;
      return out;
    },
  };
}

function keepsAll(t, what) {
  assert.equal(t.cached, t.held, `${what}: reused ${t.cached} of the previous turn's ${t.held} (prompt ${t.prompt})`);
}

for (const arch of ['qwen3', 'qwen35', 'qwen4exp', 'demo']) {
  test(`${arch}: an unrelated request, two alternating conversations and four agents keep their reuse`, async () => {
    const srv = await serve(models[arch]);
    try {
      const c = srv.client;
      const a = conversation(c, 'hello there');
      await a.turn();
      await c.chat.completions.create({ ...greedy, messages: [{ role: 'user', content: 'a title for this chat' }] });
      keepsAll(await a.turn('and then?'), 'after an unrelated request');

      const x = conversation(c, 'first talk'), y = conversation(c, 'second talk');
      await x.turn();
      await y.turn();
      for (const q of ['more', 'why']) {
        keepsAll(await x.turn(q), `x: ${q}`);
        keepsAll(await y.turn(q), `y: ${q}`);
      }

      const agents = ['plan', 'search', 'write', 'check'].map((w) => conversation(c, `agent ${w}`));
      for (const g of agents) await g.turn();
      for (const [i, g] of agents.entries()) keepsAll(await g.turn(`step ${i}`), `agent ${i}`);
    } finally {
      assert.equal(await srv.stop(), 0, srv.stderr());
    }
  });
}

test('--cache-ram 0: alternating conversations lose their reuse', async () => {
  const srv = await serve(models.qwen3, ['--cache-ram', '0']);
  try {
    const x = conversation(srv.client, 'first talk'), y = conversation(srv.client, 'second talk');
    await x.turn();
    await y.turn();
    const t = await x.turn('more');
    assert.ok(t.cached < t.held, JSON.stringify(t));
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});
