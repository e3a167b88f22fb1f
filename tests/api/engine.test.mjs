// engine.test.mjs: `strata serve -m MODEL` on the real engine (src/server/engine_strata.c), with
// tiny random-weight models written by `strata synth` (an attention-only qwen3, a hybrid qwen35
// and qwen4exp, whose state adds the QSA indexer keys, the PLE history and the token ids the PLE
// hash reads): both clients get answers, and a greedy answer on reused or restored state equals
// the answer of a server that read the same conversation straight through, token for token, with
// the reused count reported. (The next turn holds the previous reply as the model wrote it, not as
// the template renders it again, so the comparison is with a server that holds it too;
// tests/unit/test_prompt.c proves that form bit-equal to a fresh session fed it.)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, synthModels } from './server.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'strata-serve-'));
const synth = synthModels(['qwen3', 'qwen35', 'qwen4exp']);
const models = synth.models;
before(() => synth.made());
after(() => {
  synth.gone();
  fs.rmSync(dir, { recursive: true, force: true });
});

// --engine strata is the default: only the model is named.
async function serve(model, extra = []) {
  const srv = await startServer(['--ctx', '1024', '-m', model, ...extra], {});
  srv.client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
  return srv;
}

const greedy = { temperature: 0, max_tokens: 8, chat_template_kwargs: { enable_thinking: false } };

for (const arch of ['qwen3', 'qwen35', 'qwen4exp']) {
  test(`${arch}: reused state answers as a server that read the turns straight does`, async () => {
    const a = await serve(models[arch]);
    const b = await serve(models[arch]);
    try {
      const m1 = [{ role: 'user', content: 'hello there' }];
      const r1 = await a.client.chat.completions.create({ model: 'm', ...greedy, messages: m1 });
      assert.equal(r1.usage.completion_tokens, 8);
      assert.equal(r1.usage.prompt_tokens_details.cached_tokens, 0);
      // The same prompt again, then the next turn: on the held state (cut back or extended, or
      // reset where it cannot return exactly), and on a server that reads the two turns straight.
      const again = await a.client.chat.completions.create({ model: 'm', ...greedy, messages: m1 });
      assert.equal(again.choices[0].message.content, r1.choices[0].message.content);
      // top_p 0 is greedy too (it was a 500: the sampler refuses a nucleus of nothing).
      const nucleus0 = await a.client.chat.completions.create({ model: 'm', ...greedy, temperature: 1, top_p: 0, messages: m1 });
      assert.equal(nucleus0.choices[0].message.content, r1.choices[0].message.content);
      if (arch === 'qwen3') assert.equal(again.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens - 1);
      const m2 = [...m1, { role: 'assistant', content: r1.choices[0].message.content }, { role: 'user', content: 'and then?' }];
      const reused = await a.client.chat.completions.create({ model: 'm', ...greedy, messages: m2 });
      const b1 = await b.client.chat.completions.create({ model: 'm', ...greedy, messages: m1 });
      assert.equal(b1.usage.prompt_tokens_details.cached_tokens, 0);
      const straight = await b.client.chat.completions.create({ model: 'm', ...greedy, messages: m2 });
      assert.equal(reused.choices[0].message.content, straight.choices[0].message.content);
      assert.equal(reused.usage.completion_tokens, straight.usage.completion_tokens);
      assert.equal(reused.usage.prompt_tokens, straight.usage.prompt_tokens);
      // All of turn 1 (its prompt and reply) is reused: qwen3 cuts its KV cache back after the
      // repeated prompt; qwen35 and qwen4exp return to the checkpoint where the reply ended.
      const turn1 = r1.usage.prompt_tokens + r1.usage.completion_tokens;
      assert.equal(reused.usage.prompt_tokens_details.cached_tokens, turn1, JSON.stringify([r1.usage, reused.usage]));
      assert.equal(straight.usage.prompt_tokens_details.cached_tokens, turn1);
    } finally {
      assert.equal(await a.stop(), 0, a.stderr());
      assert.equal(await b.stop(), 0, b.stderr());
    }
  });
}

test('the real engine streams to both clients and honours max_tokens', async () => {
  const srv = await serve(models.qwen35);
  try {
    const stream = await srv.client.chat.completions.create({ model: 'm', ...greedy, stream: true, messages: [{ role: 'user', content: 'hi' }] });
    let finish = null;
    for await (const c of stream) if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
    assert.ok(finish === 'length' || finish === 'stop');
    const an = new Anthropic({ baseURL: srv.base, apiKey: 'unused', maxRetries: 0 });
    const m = await an.messages.create({ model: 'm', max_tokens: 5, temperature: 0, messages: [{ role: 'user', content: 'hi' }] });
    assert.ok(m.usage.output_tokens <= 5);
    assert.ok(['max_tokens', 'end_turn'].includes(m.stop_reason));
    const c = await an.messages.countTokens({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(c.input_tokens, m.usage.input_tokens + m.usage.cache_read_input_tokens);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

for (const arch of ['qwen3', 'qwen35', 'qwen4exp']) {
  test(`${arch}: a saved session restores exactly (KV and recurrent state)`, async () => {
    const a = await serve(models[arch], ['--state-dir', path.join(dir, 'state')]);
    const b = await serve(models[arch]);
    try {
      const m1 = [{ role: 'user', content: 'remember this' }];
      const r1 = await a.client.chat.completions.create({ model: 'm', ...greedy, messages: m1 });
      const saved = await fetch(a.base + '/v1/sessions/save', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: arch }) });
      assert.equal(saved.status, 200, await saved.text());
      await a.client.chat.completions.create({ model: 'm', ...greedy, messages: [{ role: 'user', content: 'a different talk' }] });
      const restored = await fetch(a.base + '/v1/sessions/restore', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: arch }) });
      assert.equal(restored.status, 200, await restored.text());
      const m2 = [...m1, { role: 'assistant', content: r1.choices[0].message.content }, { role: 'user', content: 'go on' }];
      const reused = await a.client.chat.completions.create({ model: 'm', ...greedy, messages: m2 });
      await b.client.chat.completions.create({ model: 'm', ...greedy, messages: m1 });
      const straight = await b.client.chat.completions.create({ model: 'm', ...greedy, messages: m2 });
      assert.ok(reused.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(reused.usage));
      assert.equal(reused.choices[0].message.content, straight.choices[0].message.content);
    } finally {
      assert.equal(await a.stop(), 0, a.stderr());
      assert.equal(await b.stop(), 0, b.stderr());
    }
  });
}

test('--chat-template-file: a Qwen template is used in place of the model\'s, another is refused at start', async () => {
  const good = path.join(dir, 'qwen.jinja'), bad = path.join(dir, 'other.jinja');
  fs.writeFileSync(good, "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}");
  fs.writeFileSync(bad, '{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}');
  const srv = await serve(models.qwen3, ['--chat-template-file', good]);
  try {
    const r = await srv.client.chat.completions.create({ model: 'm', ...greedy, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(r.usage.completion_tokens, 8);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
  await assert.rejects(serve(models.qwen3, ['--chat-template-file', bad]), /not one Strata renders/);
  await assert.rejects(serve(models.qwen3, ['--chat-template-file', path.join(dir, 'missing.jinja')]), /cannot read it/);
});
