// spec.test.mjs: speculative decoding in `strata serve` on the demo model and its MTP head
// (models/strata-demo-q8_0.gguf): per request ("speculative.type": mtp | ngram | none,
// "speculative.n_max"), the reply is the same token for token as without drafts, greedy and at
// temperature 0.8 with a seed, on both APIs and streaming; usage.completion_tokens_details counts
// the drafts accepted and rejected, "timings" has llama.cpp's draft_n / draft_n_accepted, and
// /metrics sums them; a bad "speculative.type" is a 400 naming the field. Speculative decoding
// runs with one slot (--parallel 1; several slots decode together without drafts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, post } from './server.mjs';

const model = path.join(process.env.STRATA_SOURCE_DIR ?? path.resolve('../..'), 'models/strata-demo-q8_0.gguf');
const question = [{ role: 'user', content: 'What does ocean mean?' }];

function metric(text, name) {
  const m = text.match(new RegExp(`^${name} (\\d+)`, 'm'));
  return m ? Number(m[1]) : NaN;
}

test('speculative decoding per request: the same text, drafts counted', async () => {
  const srv = await startServer(['-m', model, '--ctx', '1024', '--parallel', '1']);
  const client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
  const anthropic = new Anthropic({ baseURL: srv.base, apiKey: 'unused', maxRetries: 0 });
  try {
    let drafted = 0, accepted = 0;
    for (const sampling of [{ temperature: 0 }, { temperature: 0.8, seed: 11 }]) {
      const base = { model: 'demo', messages: question, max_tokens: 40, ...sampling };
      const plain = await client.chat.completions.create({ ...base, 'speculative.type': 'none' });
      assert.equal(plain.usage.completion_tokens_details.accepted_prediction_tokens, 0);
      assert.equal(plain.timings.draft_n, 0);
      for (const [type, n_max] of [['mtp', 3], ['mtp', 1], ['ngram', 4]]) {
        const r = await client.chat.completions.create({ ...base, 'speculative.type': type, 'speculative.n_max': n_max });
        assert.equal(r.choices[0].message.content, plain.choices[0].message.content, `${type} ${JSON.stringify(sampling)}`);
        assert.equal(r.usage.completion_tokens, plain.usage.completion_tokens);
        const d = r.usage.completion_tokens_details;
        assert.equal(d.accepted_prediction_tokens, r.timings.draft_n_accepted);
        assert.equal(d.accepted_prediction_tokens + d.rejected_prediction_tokens, r.timings.draft_n);
        assert.ok(r.timings.draft_n_accepted <= r.timings.draft_n);
        drafted += r.timings.draft_n;
        accepted += r.timings.draft_n_accepted;
      }
      // streaming, default mode (the file has a head: mtp), with the usage chunk
      const stream = await client.chat.completions.create({ ...base, stream: true, stream_options: { include_usage: true } });
      let text = '', usage = null, timings = null;
      for await (const c of stream) {
        if (c.choices[0]?.delta?.content) text += c.choices[0].delta.content;
        if (c.usage) { usage = c.usage; timings = c.timings; }
      }
      assert.equal(text, plain.choices[0].message.content);
      assert.ok(timings.draft_n > 0, JSON.stringify(timings));
      drafted += timings.draft_n;
      accepted += timings.draft_n_accepted;
      assert.equal(usage.completion_tokens_details.accepted_prediction_tokens, timings.draft_n_accepted);
    }
    assert.ok(accepted > 0, `no draft accepted of ${drafted}`);
    const m = await (await fetch(srv.base + '/metrics')).text();
    assert.equal(metric(m, 'strata_draft_tokens_total'), drafted);
    assert.equal(metric(m, 'strata_draft_accepted_total'), accepted);
    // the Anthropic endpoint takes the same fields (it has no seed: greedy only)
    const a0 = await anthropic.messages.create({ model: 'demo', max_tokens: 40, messages: question, temperature: 0,
                                                 'speculative.type': 'none' });
    const a1 = await anthropic.messages.create({ model: 'demo', max_tokens: 40, messages: question, temperature: 0,
                                                 'speculative.type': 'mtp' });
    assert.deepEqual(a1.content, a0.content);
    const bad = await post(srv.base, '/v1/chat/completions', { model: 'demo', messages: question, 'speculative.type': 'eagle' });
    assert.equal(bad.status, 400);
    assert.match(bad.text, /speculative\.type/);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});
