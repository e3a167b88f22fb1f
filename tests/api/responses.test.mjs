// responses.test.mjs: POST /v1/responses through the openai SDK's responses.create and
// responses.stream (whose accumulator checks every event against the items it has), on the echo
// engine: text, reasoning items (thinking on) and none (effort none), instructions, a forced and
// a chosen function call, the round trip of function_call / function_call_output items, the
// event sequence of a stream with its numbering, max_output_tokens (incomplete), json_schema by
// text.format, the refusals; and a Codex-style request (store false, developer instructions,
// reasoning items in the input, hosted tool types, parallel_tool_calls false, streamed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, post } from './server.mjs';

let srv, client;
before(async () => {
  srv = await startServer(['--ctx', '65536']);
  client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
});
after(async () => { assert.equal(await srv.stop(), 0, srv.stderr()); });

const weather = { type: 'function', name: 'get_weather', description: 'the weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } };

test('responses.create: a text reply, output_text, usage', async () => {
  const r = await client.responses.create({ model: 'echo', input: 'hello there', reasoning: { effort: 'none' } });
  assert.equal(r.object, 'response');
  assert.equal(r.status, 'completed');
  assert.equal(r.output_text, 'Echo: hello there');
  assert.equal(r.output.length, 1);
  assert.equal(r.output[0].type, 'message');
  assert.equal(r.output[0].role, 'assistant');
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens === 'Echo: hello there'.length);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.match(r.id, /^resp_/);
});

test('thinking comes back as a reasoning item before the message', async () => {
  const r = await client.responses.create({ model: 'echo', input: [{ role: 'user', content: [{ type: 'input_text', text: 'think' }] }], reasoning: { effort: 'medium' } });
  assert.deepEqual(r.output.map((o) => o.type), ['reasoning', 'message']);
  assert.equal(r.output[0].content[0].type, 'reasoning_text');
  assert.equal(r.output[0].content[0].text, 'The user wrote 5 bytes.');
  assert.equal(r.output_text, 'Echo: think');
});

test('instructions and developer messages become the system turn', async () => {
  const r = await client.responses.create({ model: 'echo', instructions: 'Be brief.', reasoning: { effort: 'none' },
    input: [{ role: 'developer', content: 'Really.' }, { role: 'user', content: 'x' }] });
  assert.equal(r.output_text, 'Echo: x');
  assert.equal(r.instructions, 'Be brief.');
});

test('function calls: chosen by the model, forced, and the output round trip', async () => {
  const chosen = await client.responses.create({ model: 'echo', tools: [weather], reasoning: { effort: 'none' },
    input: '/tool get_weather {"city": "Paris"}' });
  assert.equal(chosen.output.length, 1);
  const call = chosen.output[0];
  assert.equal(call.type, 'function_call');
  assert.equal(call.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.arguments), { city: 'Paris' });
  assert.match(call.call_id, /^call_/);
  const forced = await client.responses.create({ model: 'echo', tools: [weather], tool_choice: { type: 'function', name: 'get_weather' }, input: 'weather?' });
  assert.equal(forced.output.at(-1).type, 'function_call');
  assert.equal(forced.output.at(-1).name, 'get_weather');
  const next = await client.responses.create({ model: 'echo', tools: [weather], reasoning: { effort: 'none' }, input: [
    { role: 'user', content: 'weather in Paris?' },
    { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
    { type: 'function_call_output', call_id: call.call_id, output: 'sunny, 21 C' },
  ] });
  assert.equal(next.output_text, 'The tool returned: sunny, 21 C');
  await assert.rejects(client.responses.create({ model: 'echo', input: 'x', tool_choice: 'required' }), (e) => e.status === 400 && e.param === 'tool_choice');
});

test('responses.stream: the events in order, numbered, and the final response', async () => {
  const stream = client.responses.stream({ model: 'echo', input: 'stream me', reasoning: { effort: 'low' } });
  const types = [];
  let seq = -1, text = '';
  for await (const ev of stream) {
    types.push(ev.type);
    assert.equal(ev.sequence_number, seq + 1);
    seq = ev.sequence_number;
    if (ev.type === 'response.output_text.delta') text += ev.delta;
  }
  const final = await stream.finalResponse();
  assert.equal(text, 'Echo: stream me');
  assert.equal(final.output_text, 'Echo: stream me');
  assert.equal(final.status, 'completed');
  assert.ok(final.usage.output_tokens > 0);
  const distinct = types.filter((t, i) => t !== types[i - 1]);
  assert.deepEqual(distinct, [
    'response.created', 'response.in_progress',
    'response.output_item.added', 'response.content_part.added', 'response.reasoning_text.delta', 'response.reasoning_text.done',
    'response.content_part.done', 'response.output_item.done',
    'response.output_item.added', 'response.content_part.added', 'response.output_text.delta', 'response.output_text.done',
    'response.content_part.done', 'response.output_item.done', 'response.completed']);
});

test('a streamed function call', async () => {
  const stream = client.responses.stream({ model: 'echo', tools: [weather], reasoning: { effort: 'none' }, input: '/tool get_weather {"city": "Oslo"}' });
  let args = '';
  stream.on('response.function_call_arguments.delta', (ev) => { args += ev.delta; });
  const final = await stream.finalResponse();
  assert.deepEqual(JSON.parse(args), { city: 'Oslo' });
  assert.equal(final.output[0].type, 'function_call');
  assert.equal(final.output[0].arguments, args);
});

test('max_output_tokens cuts the reply: status incomplete', async () => {
  const r = await client.responses.create({ model: 'echo', input: '/repeat 50 word', max_output_tokens: 10, reasoning: { effort: 'none' } });
  assert.equal(r.status, 'incomplete');
  assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.equal(r.usage.output_tokens, 10);
});

test('text.format json_schema is checked (400 naming the field); json_object answers JSON', async () => {
  await assert.rejects(client.responses.create({ model: 'echo', input: 'x',
    text: { format: { type: 'json_schema', name: 'p', schema: { type: 'object', properties: { a: { type: 'nope' } } } } } }),
  (e) => e.status === 400 && e.param === 'text.format.schema.properties.a.type');
  const r = await client.responses.create({ model: 'echo', input: 'give json', reasoning: { effort: 'none' }, text: { format: { type: 'json_object' } } });
  assert.deepEqual(JSON.parse(r.output_text), { echo: 'give json' });
});

test('refusals: no input, unknown items, stored responses', async () => {
  for (const [body, param] of [
    [{ model: 'echo' }, 'input'],
    [{ model: 'echo', input: [{ type: 'image_generation_call' }] }, 'input[0].type'],
    [{ model: 'echo', input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }, 'input[0].content[0]'],
    [{ model: 'echo', input: 'x', previous_response_id: 'resp_1' }, 'previous_response_id'],
    [{ model: 'echo', input: 'x', reasoning: { effort: 'max' } }, 'reasoning.effort'],
  ]) {
    const r = await post(srv.base, '/v1/responses', body);
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.param, param);
  }
});

test('a Codex-style request: store false, developer instructions, reasoning items, hosted tools, streamed', async () => {
  const shell = { type: 'function', name: 'shell', description: 'run a command', strict: false,
    parameters: { type: 'object', properties: { command: { type: 'array', items: { type: 'string' } } }, required: ['command'] } };
  const stream = await client.responses.create({
    model: 'echo', stream: true, store: false, parallel_tool_calls: false, include: ['reasoning.encrypted_content'],
    instructions: 'You are a coding agent.', prompt_cache_key: 'abc', reasoning: { effort: 'medium', summary: 'auto' },
    tools: [shell, { type: 'web_search' }, { type: 'custom', name: 'apply_patch', format: { type: 'text' } }], tool_choice: 'auto',
    input: [
      { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'Sandbox: read-only.' }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'list files' }] },
      { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'I should run ls.' }], encrypted_content: null },
      { type: 'function_call', call_id: 'call_1', name: 'shell', arguments: '{"command":["ls"]}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'README.md' },
    ],
  });
  const events = [];
  for await (const ev of stream) events.push(ev);
  assert.equal(events[0].type, 'response.created');
  const done = events.at(-1);
  assert.equal(done.type, 'response.completed');
  assert.equal(done.response.store, false);
  assert.ok(done.response.usage.input_tokens > 0);
  const items = events.filter((e) => e.type === 'response.output_item.done').map((e) => e.item);
  assert.deepEqual(items.map((i) => i.type), ['reasoning', 'message']);
  assert.equal(items[1].content[0].text, 'The tool returned: README.md');
});
