// anthropic.test.mjs: `strata serve --engine echo` through the official @anthropic-ai/sdk client,
// unchanged: messages (plain, streamed with the exact event sequence, thinking, tools round trip,
// stop sequences, max_tokens, cache_read_input_tokens) and count_tokens.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startServer } from './server.mjs';

let srv, client;
before(async () => {
  srv = await startServer();
  client = new Anthropic({ baseURL: srv.base, apiKey: 'unused', maxRetries: 0 });
});
after(async () => { assert.equal(await srv.stop(), 0, srv.stderr()); });

test('messages, not streamed', async () => {
  const m = await client.messages.create({
    model: 'echo', max_tokens: 200, system: 'You are terse.', messages: [{ role: 'user', content: 'bonjour' }],
  });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.deepEqual(m.content, [{ type: 'text', text: 'Echo: bonjour' }]);
  assert.equal(m.stop_reason, 'end_turn');
  assert.equal(m.stop_sequence, null);
  assert.ok(m.usage.input_tokens > 0);
  assert.equal(m.usage.output_tokens, 'Echo: bonjour'.length);
  assert.equal(typeof m.usage.cache_read_input_tokens, 'number');
});

test('system as text blocks and user content as blocks', async () => {
  const m = await client.messages.create({
    model: 'echo', max_tokens: 200, system: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }],
    messages: [{ role: 'user', content: [{ type: 'text', text: 'one' }, { type: 'text', text: 'two' }] }],
  });
  assert.equal(m.content[0].text, 'Echo: one\ntwo');
});

test('streaming: the exact event sequence, thinking then text', async () => {
  const stream = client.messages.stream({
    model: 'echo', max_tokens: 200, thinking: { type: 'enabled', budget_tokens: 100 },
    messages: [{ role: 'user', content: 'stream me' }],
  });
  const seq = [];
  for await (const ev of stream) {
    const name = ev.type === 'content_block_delta' ? `delta:${ev.delta.type}` : ev.type === 'content_block_start' ? `start:${ev.content_block.type}` : ev.type;
    if (seq.at(-1) !== name) seq.push(name);
  }
  assert.deepEqual(seq, [
    'message_start',
    'start:thinking', 'delta:thinking_delta', 'delta:signature_delta', 'content_block_stop',
    'start:text', 'delta:text_delta', 'content_block_stop',
    'message_delta', 'message_stop',
  ]);
  const final = await stream.finalMessage();
  assert.equal(final.content[0].type, 'thinking');
  assert.equal(final.content[0].thinking, 'The user wrote 9 bytes.');
  assert.equal(final.content[1].text, 'Echo: stream me');
  assert.equal(final.stop_reason, 'end_turn');
  assert.equal(final.usage.output_tokens, 'The user wrote 9 bytes.\n</think>\n\nEcho: stream me'.length);
});

test('thinking is off unless asked for', async () => {
  const m = await client.messages.create({ model: 'echo', max_tokens: 200, messages: [{ role: 'user', content: 'x' }] });
  assert.deepEqual(m.content.map((b) => b.type), ['text']);
});

const tools = [{ name: 'get_weather', description: 'weather of a city', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }];

test('tool_use round trip with tool_result', async () => {
  const messages = [{ role: 'user', content: '/tool get_weather {"city": "Lima"}' }];
  const m = await client.messages.create({ model: 'echo', max_tokens: 300, tools, messages });
  assert.equal(m.stop_reason, 'tool_use');
  const use = m.content.find((b) => b.type === 'tool_use');
  assert.equal(use.name, 'get_weather');
  assert.deepEqual(use.input, { city: 'Lima' });
  assert.ok(use.id.startsWith('toolu_'));
  messages.push({ role: 'assistant', content: m.content });
  messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: [{ type: 'text', text: '18 degrees' }] }] });
  const m2 = await client.messages.create({ model: 'echo', max_tokens: 300, tools, messages });
  assert.deepEqual(m2.content, [{ type: 'text', text: 'The tool returned: 18 degrees' }]);
});

test('tool_use streams as content_block_start + input_json_delta', async () => {
  const stream = client.messages.stream({
    model: 'echo', max_tokens: 300, tools, messages: [{ role: 'user', content: '/tool get_weather {"city": "Rome"}' }],
  });
  const types = [];
  for await (const ev of stream) if (ev.type === 'content_block_delta') types.push(ev.delta.type);
  assert.ok(types.includes('input_json_delta'));
  const final = await stream.finalMessage();
  assert.equal(final.stop_reason, 'tool_use');
  assert.deepEqual(final.content.find((b) => b.type === 'tool_use').input, { city: 'Rome' });
});

test('tool_choice any forces a call', async () => {
  const m = await client.messages.create({ model: 'echo', max_tokens: 300, tools, tool_choice: { type: 'any' }, messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(m.content[0].type, 'tool_use');
  assert.equal(m.content[0].name, 'get_weather');
});

test('stop_sequences and max_tokens', async () => {
  const m = await client.messages.create({
    model: 'echo', max_tokens: 300, stop_sequences: ['b a'], messages: [{ role: 'user', content: '/repeat 3 ab' }],
  });
  assert.equal(m.content[0].text, 'a');
  assert.equal(m.stop_reason, 'stop_sequence');
  assert.equal(m.stop_sequence, 'b a');
  const m2 = await client.messages.create({ model: 'echo', max_tokens: 4, messages: [{ role: 'user', content: 'hello' }] });
  assert.equal(m2.content[0].text, 'Echo');
  assert.equal(m2.stop_reason, 'max_tokens');
});

test('a repeated request reads the prompt from the cache (cache_read_input_tokens)', async () => {
  const req = { model: 'echo', max_tokens: 100, messages: [{ role: 'user', content: 'cache me please' }] };
  const a = await client.messages.create(req);
  const b = await client.messages.create(req);
  const total = a.usage.input_tokens + a.usage.cache_read_input_tokens;
  assert.equal(b.usage.input_tokens + b.usage.cache_read_input_tokens, total);
  assert.equal(b.usage.cache_read_input_tokens, total - 1);
  assert.equal(b.usage.input_tokens, 1);
});

test('count_tokens equals the prompt the model reads', async () => {
  const req = { model: 'echo', messages: [{ role: 'user', content: 'count me' }] };
  const c = await client.messages.countTokens(req);
  const m = await client.messages.create({ ...req, max_tokens: 50 });
  assert.equal(c.input_tokens, m.usage.input_tokens + m.usage.cache_read_input_tokens);
});
