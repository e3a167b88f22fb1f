// agent.test.mjs: /v1/responses as a Codex-style agent uses it, on the real engine with the demo
// model (models/strata-demo-q8_0.gguf), through the openai SDK: a two-turn conversation through
// previous_response_id, whose second turn answers as the whole conversation sent again does and
// reads the first turn from the held state; the tool loop (a forced call whose arguments fit the
// tool, its output sent back through previous_response_id, as the same items sent whole give);
// and a streamed turn with thinking on, whose events come in the order and shapes the SDK's
// accumulator checks, continued by a second turn.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { serveModel, demoModel } from './server.mjs';

let srv, client;
before(async () => {
  assert.ok(fs.existsSync(demoModel), `${demoModel} is missing`);
  srv = await serveModel(demoModel, ['--ctx', '2048']);
  client = srv.client;
});
after(async () => { assert.equal(await srv.stop(), 0, srv.stderr()); });

const greedy = { model: 'demo', temperature: 0, max_output_tokens: 24, reasoning: { effort: 'none' } };

test('two turns through previous_response_id: the whole conversation, its first turn read again from the held state', async () => {
  const r1 = await client.responses.create({ ...greedy, input: 'What is a cat?' });
  assert.ok(['completed', 'incomplete'].includes(r1.status), r1.status);
  assert.ok(r1.output_text.length > 0);
  const r2 = await client.responses.create({ ...greedy, previous_response_id: r1.id, input: 'And what is a dog?' });
  assert.equal(r2.previous_response_id, r1.id);
  assert.ok(r2.usage.input_tokens > r1.usage.input_tokens + r1.usage.output_tokens / 2, JSON.stringify([r1.usage, r2.usage]));
  assert.ok(r2.usage.input_tokens_details.cached_tokens >= r1.usage.input_tokens - 8, JSON.stringify([r1.usage, r2.usage]));
  // the first turn's output items sent back as input (what a client without stored responses does)
  const whole = await client.responses.create({ ...greedy, input: [{ role: 'user', content: 'What is a cat?' }, ...r1.output,
    { role: 'user', content: 'And what is a dog?' }] });
  assert.equal(whole.usage.input_tokens, r2.usage.input_tokens);
  assert.equal(whole.output_text, r2.output_text);
});

const shell = { type: 'function', name: 'shell', description: 'run a shell command', strict: true,
  parameters: { type: 'object', properties: { command: { enum: ['ls', 'pwd', 'date'] } }, required: ['command'], additionalProperties: false } };
const agent = { ...greedy, instructions: 'You are a coding agent.', tools: [shell], parallel_tool_calls: false };

test('the tool loop: a forced call fitting the tool, its output sent back through previous_response_id', async () => {
  const r1 = await client.responses.create({ ...agent, tool_choice: 'required', max_output_tokens: 160, input: 'List the files here.' });
  assert.equal(r1.status, 'completed', JSON.stringify(r1.output));
  const calls = r1.output.filter((o) => o.type === 'function_call');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'shell');
  assert.ok(['ls', 'pwd', 'date'].includes(JSON.parse(calls[0].arguments).command), calls[0].arguments);
  const output = { type: 'function_call_output', call_id: calls[0].call_id, output: 'README.md\nsrc' };
  const r2 = await client.responses.create({ ...agent, previous_response_id: r1.id, input: [output] });
  assert.ok(['completed', 'incomplete'].includes(r2.status), r2.status);
  assert.ok(r2.output.length > 0);
  assert.ok(r2.usage.input_tokens > r1.usage.input_tokens + r1.usage.output_tokens, JSON.stringify([r1.usage, r2.usage]));
  assert.ok(r2.usage.input_tokens_details.cached_tokens > 0, JSON.stringify(r2.usage));
  const whole = await client.responses.create({ ...agent, input: [{ role: 'user', content: 'List the files here.' }, ...r1.output, output] });
  assert.equal(whole.usage.input_tokens, r2.usage.input_tokens);
  assert.deepEqual(whole.output.map((o) => [o.type, o.content?.[0]?.text ?? o.arguments]), r2.output.map((o) => [o.type, o.content?.[0]?.text ?? o.arguments]));
});

test('a streamed turn with thinking on: events in order, items opened and closed, then continued', async () => {
  const stream = client.responses.stream({ model: 'demo', temperature: 0, max_output_tokens: 96, reasoning: { effort: 'low' }, input: 'What is the sea?' });
  const events = [];
  for await (const ev of stream) events.push(ev);
  const final = await stream.finalResponse();
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  assert.deepEqual(events.slice(0, 2).map((e) => e.type), ['response.created', 'response.in_progress']);
  assert.ok(['response.completed', 'response.incomplete'].includes(events.at(-1).type));
  // every item opens (added), grows and closes (done) before the next one opens
  const open = [];
  for (const e of events) {
    if (e.type === 'response.output_item.added') { assert.equal(open.length, 0); open.push(e.output_index); }
    if (e.type === 'response.output_item.done') assert.equal(open.pop(), e.output_index);
    if (e.type.endsWith('.delta')) assert.equal(e.output_index, open.at(-1));
  }
  assert.ok(final.output.length > 0);
  if (final.output.length > 1) assert.equal(final.output[0].type, 'reasoning');
  const done = events.filter((e) => e.type === 'response.output_item.done').map((e) => e.item);
  assert.deepEqual(done, events.at(-1).response.output);
  assert.equal(final.id, events[0].response.id);
  const next = await client.responses.create({ ...greedy, previous_response_id: final.id, input: 'Say it shorter.' });
  assert.ok(['completed', 'incomplete'].includes(next.status));
  assert.ok(next.usage.input_tokens > final.usage.input_tokens);
});
