// responses.test.mjs: POST /v1/responses through the openai SDK's responses.create and
// responses.stream (whose accumulator checks every event against the items it has), on the echo
// engine: text, reasoning items (thinking on) and none (effort none), instructions, a forced and
// a chosen function call, the round trip of function_call / function_call_output items, the
// event sequence of a stream with its numbering, max_output_tokens (incomplete), json_schema by
// text.format, the refusals; a Codex-style request (store false, developer instructions,
// reasoning items in the input, hosted tool types, parallel_tool_calls false, streamed); and the
// kept responses: previous_response_id continues a conversation (text turns, the tool loop,
// streamed, forks), GET and DELETE /v1/responses/ID, store false, and the bounds by count and bytes.
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

test('refusals: no input, unknown items, a response not kept', async () => {
  for (const [body, param] of [
    [{ model: 'echo' }, 'input'],
    [{ model: 'echo', input: [{ type: 'image_generation_call' }] }, 'input[0].type'],
    [{ model: 'echo', input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }, 'input[0].content[0]'],
    [{ model: 'echo', input: 'x', previous_response_id: 'resp_1' }, 'previous_response_id'],
    [{ model: 'echo', input: 'x', previous_response_id: 7 }, 'previous_response_id'],
    [{ model: 'echo', input: 'x', store: 'yes' }, 'store'],
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

const quiet = { reasoning: { effort: 'none' } };

test('previous_response_id: the next turn reads the conversation so far, whose prompt is reused', async () => {
  const r1 = await client.responses.create({ model: 'echo', input: 'first turn', instructions: 'Be brief.', ...quiet });
  assert.equal(r1.store, true);
  assert.equal(r1.previous_response_id, null);
  const r2 = await client.responses.create({ model: 'echo', input: 'second turn', previous_response_id: r1.id, ...quiet });
  assert.equal(r2.output_text, 'Echo: second turn');
  assert.equal(r2.previous_response_id, r1.id);
  // the whole first turn is in the prompt, and read again from the held state; instructions are
  // not carried over (as OpenAI's are not), so the prompt starts otherwise and reuses nothing of it
  const same = await client.responses.create({ model: 'echo', input: [
    { role: 'user', content: 'first turn' }, { role: 'assistant', content: 'Echo: first turn' }, { role: 'user', content: 'second turn' }], ...quiet });
  assert.equal(r2.usage.input_tokens, same.usage.input_tokens);
  const r3 = await client.responses.create({ model: 'echo', input: [{ role: 'user', content: 'third' }], previous_response_id: r2.id, ...quiet });
  assert.ok(r3.usage.input_tokens > r2.usage.input_tokens + r2.usage.output_tokens, JSON.stringify(r3.usage));
  // all of the second prompt but the empty think block that opened its reply (the history renders
  // the reply without it) is read again from the held state
  assert.ok(r3.usage.input_tokens_details.cached_tokens >= r2.usage.input_tokens - '<think>\n\n</think>\n\n'.length, JSON.stringify(r3.usage));
  // a fork from the first turn again
  const fork = await client.responses.create({ model: 'echo', input: 'another second', previous_response_id: r1.id, ...quiet });
  assert.equal(fork.output_text, 'Echo: another second');
  assert.equal(fork.usage.input_tokens, r2.usage.input_tokens - 'second turn'.length + 'another second'.length);
});

test('the tool loop through previous_response_id: the call, then its output', async () => {
  const r1 = await client.responses.create({ model: 'echo', tools: [weather], input: '/tool get_weather {"city": "Paris"}', ...quiet });
  const call = r1.output[0];
  assert.equal(call.type, 'function_call');
  const r2 = await client.responses.create({ model: 'echo', tools: [weather], previous_response_id: r1.id, ...quiet,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: 'sunny, 21 C' }] });
  assert.equal(r2.output_text, 'The tool returned: sunny, 21 C');
  assert.ok(r2.usage.input_tokens > r1.usage.input_tokens + r1.usage.output_tokens);
  // streamed, and the streamed response is kept too
  const stream = client.responses.stream({ model: 'echo', tools: [weather], previous_response_id: r2.id, input: '/tool get_weather {"city": "Oslo"}', ...quiet });
  const final = await stream.finalResponse();
  assert.equal(final.previous_response_id, r2.id);
  assert.equal(final.output[0].name, 'get_weather');
  const r4 = await client.responses.create({ model: 'echo', tools: [weather], previous_response_id: final.id, ...quiet,
    input: [{ type: 'function_call_output', call_id: final.output[0].call_id, output: 'rain' }] });
  assert.equal(r4.output_text, 'The tool returned: rain');
  assert.ok(r4.usage.input_tokens > r2.usage.input_tokens);
});

test('GET and DELETE /v1/responses/ID; store false keeps nothing', async () => {
  const r = await client.responses.create({ model: 'echo', input: 'keep me', ...quiet });
  const got = await client.responses.retrieve(r.id);
  assert.equal(got.id, r.id);
  assert.equal(got.output_text, 'Echo: keep me');
  await client.responses.delete(r.id);
  await assert.rejects(client.responses.retrieve(r.id), (e) => e.status === 404);
  await assert.rejects(client.responses.delete(r.id), (e) => e.status === 404);
  await assert.rejects(client.responses.create({ model: 'echo', input: 'x', previous_response_id: r.id }),
    (e) => e.status === 400 && e.param === 'previous_response_id' && e.code === 'previous_response_not_found');
  const other = await client.responses.create({ model: 'echo', input: 'and me', ...quiet });
  const del = await fetch(`${srv.base}/v1/responses/${other.id}`, { method: 'DELETE' });
  assert.deepEqual(await del.json(), { id: other.id, object: 'response', deleted: true });
  const unkept = await client.responses.create({ model: 'echo', input: 'forget me', store: false, ...quiet });
  assert.equal(unkept.store, false);
  await assert.rejects(client.responses.retrieve(unkept.id), (e) => e.status === 404);
  await assert.rejects(client.responses.create({ model: 'echo', input: 'x', previous_response_id: unkept.id }), (e) => e.status === 400);
});

test('the kept responses are bounded by count and by bytes, the least recently used going first', async () => {
  const small = await startServer(['--ctx', '1000000', '--responses-kept', '2', '--responses-mib', '1']);
  try {
    const c = new OpenAI({ baseURL: small.base + '/v1', apiKey: 'unused', maxRetries: 0 });
    const ids = [];
    for (const t of ['a', 'b']) ids.push((await c.responses.create({ model: 'echo', input: t, ...quiet })).id);
    await c.responses.retrieve(ids[0]); // a is now the most recently used
    ids.push((await c.responses.create({ model: 'echo', input: 'c', ...quiet })).id);
    await assert.rejects(c.responses.retrieve(ids[1]), (e) => e.status === 404);
    for (const id of [ids[0], ids[2]]) assert.equal((await c.responses.retrieve(id)).id, id);
    // 600 KB each: the count allows two, the bytes only one
    const big = [];
    for (const t of ['x', 'y']) big.push((await c.responses.create({ model: 'echo', input: t.repeat(600000), max_output_tokens: 8, ...quiet })).id);
    await assert.rejects(c.responses.retrieve(big[0]), (e) => e.status === 404);
    assert.equal((await c.responses.retrieve(big[1])).id, big[1]);
    const st = await (await fetch(small.base + '/v1/status')).json();
    assert.equal(st.responses.kept, 1);
    assert.ok(st.responses.bytes > 600000 && st.responses.bytes <= 1 << 20, JSON.stringify(st.responses));
  } finally {
    assert.equal(await small.stop(), 0, small.stderr());
  }
});
