// json.test.mjs: response_format json_object on the real engine with the demo model
// (models/strata-demo-q8_0.gguf). The model was never taught JSON; the sampler's constraint
// (src/engine/json_grammar.c) is what makes every reply one JSON object, with thinking on (the
// constraint applies after </think>) or off (the reply is forced to open with "{"), streamed or
// not, greedy or sampled, and also when max_tokens cuts it short (the object is closed in time).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer } from './server.mjs';

const model = path.join(process.env.STRATA_SOURCE_DIR ?? path.resolve('../..'), 'models/strata-demo-q8_0.gguf');
let srv, client;
before(async () => {
  assert.ok(fs.existsSync(model), `${model} is missing`);
  srv = await startServer(['--ctx', '2048', '-m', model]);
  client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  assert.equal(await srv.stop(), 0, srv.stderr());
});

function parsesAsObject(text, what) {
  let v;
  assert.doesNotThrow(() => { v = JSON.parse(text); }, `${what}: not JSON: ${JSON.stringify(text)}`);
  assert.equal(typeof v, 'object', what);
  assert.ok(v !== null && !Array.isArray(v), `${what}: not an object: ${text}`);
  return v;
}

const prompts = ['Define happy.', 'Give a JSON object describing a cat.', 'What is a dog?'];

for (const thinking of [false, true]) {
  test(`json_object replies parse with JSON.parse (thinking ${thinking ? 'on' : 'off'})`, async () => {
    for (const [i, content] of prompts.entries()) {
      const r = await client.chat.completions.create({
        model: 'demo', response_format: { type: 'json_object' }, max_tokens: 48 + 16 * i,
        temperature: i === 0 ? 0 : 0.9, seed: 7 + i, chat_template_kwargs: { enable_thinking: thinking },
        messages: [{ role: 'user', content }],
      });
      const c = r.choices[0];
      parsesAsObject(c.message.content, content);
      assert.ok(['stop', 'length'].includes(c.finish_reason));
      assert.ok(r.usage.completion_tokens <= 48 + 16 * i);
    }
  });
}

test('a streamed json_object reply parses once joined', async () => {
  const stream = await client.chat.completions.create({
    model: 'demo', stream: true, response_format: { type: 'json_object' }, max_tokens: 40, temperature: 0.7, seed: 3,
    messages: [{ role: 'user', content: 'Define water.' }],
  });
  let text = '', chunks = 0, finish = null;
  for await (const ch of stream) {
    const d = ch.choices[0]?.delta;
    if (d?.content) { text += d.content; chunks++; }
    if (ch.choices[0]?.finish_reason) finish = ch.choices[0].finish_reason;
  }
  assert.ok(chunks > 1, 'streamed in pieces');
  assert.ok(finish === 'stop' || finish === 'length');
  parsesAsObject(text, 'stream');
});

test('without response_format the same request is free text', async () => {
  const r = await client.chat.completions.create({
    model: 'demo', max_tokens: 24, temperature: 0, chat_template_kwargs: { enable_thinking: false },
    messages: [{ role: 'user', content: 'Define happy.' }],
  });
  assert.ok(!r.choices[0].message.content.startsWith('{'), r.choices[0].message.content);
});

test('a forced tool call takes precedence over json_object (no error)', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
    const r = await client.chat.completions.create({
      model: 'demo', tools, tool_choice, response_format: { type: 'json_object' }, max_tokens: 24, temperature: 0,
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
    });
    assert.ok(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason), JSON.stringify(r));
  }
  // with tools offered but not forced, the reply is still one JSON object
  const r = await client.chat.completions.create({
    model: 'demo', tools, response_format: { type: 'json_object' }, max_tokens: 40, temperature: 0,
    messages: [{ role: 'user', content: 'Weather in Paris?' }],
  });
  parsesAsObject(r.choices[0].message.content, 'tools offered');
});
