// openai.test.mjs: `strata serve --engine echo` through the official openai client, unchanged:
// chat (plain, streamed, reasoning, tools, JSON mode, stop, max_tokens, sampling fields, reuse
// counts) and /v1/completions. The echo engine's answers are fixed (src/server/engine_echo.c).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './server.mjs';

let srv, client;
before(async () => {
  srv = await startServer();
  client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
});
after(async () => { assert.equal(await srv.stop(), 0, srv.stderr()); });

const noThinking = { chat_template_kwargs: { enable_thinking: false } };

test('models lists the served model', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ['echo']);
});

test('chat, not streamed: content, reasoning, usage', async () => {
  const r = await client.chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'héllo wörld' }] });
  assert.equal(r.object, 'chat.completion');
  const m = r.choices[0].message;
  assert.equal(m.role, 'assistant');
  assert.equal(m.content, 'Echo: héllo wörld');
  assert.equal(m.reasoning_content, 'The user wrote 13 bytes.');
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
});

test('content parts and system/developer roles are accepted', async () => {
  const r = await client.chat.completions.create({
    model: 'echo', ...noThinking,
    messages: [
      { role: 'developer', content: 'be brief' },
      { role: 'user', content: [{ type: 'text', text: 'part one' }, { type: 'text', text: 'part two' }] },
    ],
  });
  assert.equal(r.choices[0].message.content, 'Echo: part one\npart two');
  assert.equal(r.choices[0].message.reasoning_content, undefined);
});

test('chat, streamed: chunks reassemble to the reply; UTF-8 split across tokens stays whole', async () => {
  const stream = await client.chat.completions.create({
    model: 'echo', stream: true, stream_options: { include_usage: true }, ...noThinking,
    messages: [{ role: 'user', content: 'naïve café 日本' }],
  });
  let text = '', chunks = 0, finish = null, usage = null;
  for await (const c of stream) {
    if (c.usage) usage = c.usage;
    if (!c.choices.length) continue;
    chunks++;
    text += c.choices[0].delta.content ?? '';
    assert.ok(!(c.choices[0].delta.content ?? '').includes('\uFFFD'));
    if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
  }
  assert.equal(text, 'Echo: naïve café 日本');
  assert.ok(chunks > 10, `streamed in ${chunks} chunks`);
  assert.equal(finish, 'stop');
  assert.ok(usage && usage.completion_tokens === Buffer.byteLength(text));
});

test('reasoning streams as reasoning_content before the content', async () => {
  const stream = await client.chat.completions.create({
    model: 'echo', stream: true, reasoning_effort: 'high', messages: [{ role: 'user', content: 'think' }],
  });
  let reasoning = '', content = '', order = [];
  for await (const c of stream) {
    const d = c.choices[0]?.delta ?? {};
    if (d.reasoning_content) { reasoning += d.reasoning_content; if (order.at(-1) !== 'r') order.push('r'); }
    if (d.content) { content += d.content; if (order.at(-1) !== 'c') order.push('c'); }
  }
  assert.equal(reasoning, 'The user wrote 5 bytes.');
  assert.equal(content, 'Echo: think');
  assert.deepEqual(order, ['r', 'c']);
});

test('reasoning_effort none turns thinking off', async () => {
  const r = await client.chat.completions.create({ model: 'echo', reasoning_effort: 'none', messages: [{ role: 'user', content: 'x' }] });
  assert.equal(r.choices[0].message.reasoning_content, undefined);
  assert.equal(r.choices[0].message.content, 'Echo: x');
});

const tools = [{
  type: 'function',
  function: { name: 'get_weather', description: 'weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
}];

test('tool call round trip (not streamed)', async () => {
  const messages = [{ role: 'user', content: '/tool get_weather {"city": "Paris"}' }];
  const r = await client.chat.completions.create({ model: 'echo', tools, ...noThinking, messages });
  const choice = r.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });
  assert.ok(call.id.startsWith('call_'));
  messages.push(choice.message, { role: 'tool', tool_call_id: call.id, content: '22 degrees and sunny' });
  const r2 = await client.chat.completions.create({ model: 'echo', tools, ...noThinking, messages });
  assert.equal(r2.choices[0].message.content, 'The tool returned: 22 degrees and sunny');
  assert.equal(r2.choices[0].finish_reason, 'stop');
});

test('tool calls stream as deltas (Qwen 3.5 XML form parsed too)', async () => {
  const stream = await client.chat.completions.create({
    model: 'echo', tools, stream: true, ...noThinking, messages: [{ role: 'user', content: '/xmltool get_weather city=Oslo' }],
  });
  const calls = [];
  let finish = null, content = '';
  for await (const c of stream) {
    const d = c.choices[0]?.delta ?? {};
    content += d.content ?? '';
    for (const tc of d.tool_calls ?? []) {
      calls[tc.index] ??= { id: '', name: '', arguments: '' };
      if (tc.id) calls[tc.index].id = tc.id;
      if (tc.function?.name) calls[tc.index].name += tc.function.name;
      if (tc.function?.arguments) calls[tc.index].arguments += tc.function.arguments;
    }
    if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
  }
  assert.equal(content, '');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'get_weather');
  assert.deepEqual(JSON.parse(calls[0].arguments), { city: 'Oslo' });
  assert.equal(finish, 'tool_calls');
});

test('tool_choice required and named force a call', async () => {
  const r = await client.chat.completions.create({
    model: 'echo', tools, tool_choice: 'required', ...noThinking, messages: [{ role: 'user', content: 'hi' }],
  });
  assert.equal(r.choices[0].message.tool_calls[0].function.name, 'get_weather');
  const r2 = await client.chat.completions.create({
    model: 'echo', tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, ...noThinking,
    messages: [{ role: 'user', content: 'hi' }],
  });
  assert.equal(r2.choices[0].message.tool_calls[0].function.name, 'get_weather');
  assert.equal(r2.choices[0].finish_reason, 'tool_calls');
});

test('without tools a <tool_call> is plain content', async () => {
  const r = await client.chat.completions.create({ model: 'echo', ...noThinking, messages: [{ role: 'user', content: '/tool f {}' }] });
  assert.equal(r.choices[0].message.tool_calls, undefined);
  assert.match(r.choices[0].message.content, /^<tool_call>/);
});

test('response_format json_object gives one JSON object', async () => {
  const r = await client.chat.completions.create({
    model: 'echo', response_format: { type: 'json_object' }, ...noThinking, messages: [{ role: 'user', content: 'give json' }],
  });
  assert.deepEqual(JSON.parse(r.choices[0].message.content), { echo: 'give json' });
});

test('sampling fields reach the engine', async () => {
  const r = await client.chat.completions.create({
    model: 'echo', ...noThinking, temperature: 0.5, top_p: 0.75, top_k: 20, min_p: 0.125, presence_penalty: 1.5,
    frequency_penalty: -0.5, seed: 42, max_completion_tokens: 300, messages: [{ role: 'user', content: '/params' }],
  });
  assert.equal(r.choices[0].message.content,
    'temperature=0.5 top_p=0.75 top_k=20 min_p=0.125 presence_penalty=1.5 frequency_penalty=-0.5 seed=42 max_tokens=300');
});

test('stop strings cut the reply; max_tokens ends it with length', async () => {
  const r = await client.chat.completions.create({
    model: 'echo', ...noThinking, stop: ['c a', 'zzz'], messages: [{ role: 'user', content: '/repeat 4 abc' }],
  });
  assert.equal(r.choices[0].message.content, 'ab');
  assert.equal(r.choices[0].finish_reason, 'stop');
  const r2 = await client.chat.completions.create({ model: 'echo', ...noThinking, max_tokens: 3, messages: [{ role: 'user', content: 'hello' }] });
  assert.equal(r2.choices[0].message.content, 'Ech');
  assert.equal(r2.choices[0].finish_reason, 'length');
  assert.equal(r2.usage.completion_tokens, 3);
});

test('a repeated request reuses all but one prompt token (cached_tokens)', async () => {
  const req = { model: 'echo', ...noThinking, messages: [{ role: 'user', content: 'reuse me ' + 'x'.repeat(200) }] };
  const a = await client.chat.completions.create(req);
  const b = await client.chat.completions.create(req);
  assert.equal(b.choices[0].message.content, a.choices[0].message.content);
  assert.equal(b.usage.prompt_tokens, a.usage.prompt_tokens);
  assert.equal(b.usage.prompt_tokens_details.cached_tokens, b.usage.prompt_tokens - 1);
  // The next turn of the same conversation reuses the whole previous prompt at least.
  const c = await client.chat.completions.create({ ...req, messages: [...req.messages, b.choices[0].message, { role: 'user', content: 'more' }] });
  // (all but the empty think block of the earlier generation prompt, which the history renders without).
  assert.ok(c.usage.prompt_tokens_details.cached_tokens >= a.usage.prompt_tokens - 20, JSON.stringify([a.usage, c.usage]));
});

test('completions, plain and streamed', async () => {
  const r = await client.completions.create({ model: 'echo', prompt: 'Once upon', max_tokens: 100 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].text, 'Echo: Once upon');
  assert.equal(r.choices[0].finish_reason, 'stop');
  const d = await client.completions.create({ model: 'echo', prompt: 'Once upon a time there was' });
  assert.equal(d.choices[0].text, 'Echo: Once upon '); // 16 tokens by default, as OpenAI's
  assert.equal(d.choices[0].finish_reason, 'length');
  const stream = await client.completions.create({ model: 'echo', prompt: 'streamed', max_tokens: 100, stream: true });
  let text = '';
  for await (const c of stream) text += c.choices[0]?.text ?? '';
  assert.equal(text, 'Echo: streamed');
});

test('n > 1: that many choices, each with its index, streamed and not', async () => {
  const r = await client.chat.completions.create({ model: 'echo', ...noThinking, n: 3, messages: [{ role: 'user', content: 'many' }] });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  for (const c of r.choices) { assert.equal(c.message.content, 'Echo: many'); assert.equal(c.finish_reason, 'stop'); }
  assert.equal(r.usage.completion_tokens, 3 * 'Echo: many'.length);
  const stream = await client.chat.completions.create({ model: 'echo', ...noThinking, n: 2, stream: true, messages: [{ role: 'user', content: 'two' }] });
  const text = ['', ''], finish = [null, null];
  for await (const ch of stream) for (const c of ch.choices) { text[c.index] += c.delta?.content ?? ''; if (c.finish_reason) finish[c.index] = c.finish_reason; }
  assert.deepEqual(text, ['Echo: two', 'Echo: two']);
  assert.deepEqual(finish, ['stop', 'stop']);
});

test('logprobs and top_logprobs: one entry per content token, with its bytes and the alternatives', async () => {
  const r = await client.chat.completions.create({ model: 'echo', ...noThinking, logprobs: true, top_logprobs: 3, messages: [{ role: 'user', content: 'lp' }] });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.map((x) => x.token).join(''), 'Echo: lp');
  for (const x of lp) {
    assert.equal(x.logprob, 0);
    assert.deepEqual(x.bytes, [...Buffer.from(x.token)]);
    assert.equal(x.top_logprobs.length, 3);
    assert.equal(x.top_logprobs[0].token, x.token);
    assert.ok(x.top_logprobs[1].logprob < x.top_logprobs[0].logprob);
  }
  // thinking is not content: with it on, still only the answer's tokens
  const t = await client.chat.completions.create({ model: 'echo', logprobs: true, messages: [{ role: 'user', content: 'lp' }] });
  assert.equal(t.choices[0].logprobs.content.map((x) => x.token).join(''), 'Echo: lp');
  assert.equal(t.choices[0].logprobs.content[0].top_logprobs.length, 0);
  const stream = await client.chat.completions.create({ model: 'echo', ...noThinking, logprobs: true, stream: true, messages: [{ role: 'user', content: 's' }] });
  let tokens = '';
  for await (const ch of stream) for (const x of ch.choices[0]?.logprobs?.content ?? []) tokens += x.token;
  assert.equal(tokens, 'Echo: s');
  const none = await client.chat.completions.create({ model: 'echo', ...noThinking, messages: [{ role: 'user', content: 'x' }] });
  assert.equal(none.choices[0].logprobs, null);
});

test('/v1/completions: an array of prompts, token ids, arrays of token ids; n per prompt', async () => {
  const r = await client.completions.create({ model: 'echo', prompt: ['one', 'two'], max_tokens: 50 });
  assert.deepEqual(r.choices.map((c) => [c.index, c.text]), [[0, 'Echo: one'], [1, 'Echo: two']]);
  const ids = await client.completions.create({ model: 'echo', prompt: [104, 105], max_tokens: 50 });
  assert.equal(ids.choices[0].text, 'Echo: hi');
  assert.equal(ids.usage.prompt_tokens, 2);
  const arrays = await client.completions.create({ model: 'echo', prompt: [[104, 105], [121, 111]], n: 2, max_tokens: 50 });
  assert.deepEqual(arrays.choices.map((c) => c.text), ['Echo: hi', 'Echo: hi', 'Echo: yo', 'Echo: yo']);
  assert.equal(arrays.usage.prompt_tokens, 4);
});
