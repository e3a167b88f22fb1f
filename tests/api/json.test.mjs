// json.test.mjs: response_format json_object and json_schema, and forced tool calls, on the real
// engine with the demo model (models/strata-demo-q8_0.gguf). The model was never taught JSON; the
// sampler's constraint (src/engine/json_grammar.c) is what makes every reply one JSON object, with
// thinking on (the constraint applies after </think>) or off (the reply is forced to open with
// "{"), streamed or not, greedy or sampled, and also when max_tokens cuts it short (the object is
// closed in time). With a schema every finished reply meets it (checked here by a validator of
// our own); a forced tool call names one of the tools and its arguments fit that tool's
// parameters, in Qwen's JSON form and in Qwen 3.5's XML form (the demo model under a Qwen 3.5
// template); the bounds (string lengths, item counts, integer ranges) and patterns (checked by
// JavaScript's own RegExp) hold in every finished reply; a schema that cannot be enforced (or with
// a keyword the automaton does not enforce, such as format, or a pattern outside the regex subset,
// such as a lookahead) is a 400 naming the field.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
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

// A validator for the schema subset these tests use (lengths count code points, as JSON Schema's).
function meets(v, s) {
  const n = typeof v === 'string' ? [...v].length : Array.isArray(v) ? v.length : null;
  if (typeof v === 'string' && ((s.minLength ?? 0) > n || (s.maxLength ?? Infinity) < n)) return false;
  if (typeof v === 'string' && s.pattern !== undefined && !new RegExp(s.pattern).test(v)) return false;
  if (Array.isArray(v) && ((s.minItems ?? 0) > n || (s.maxItems ?? Infinity) < n)) return false;
  if (typeof v === 'number' && ((s.minimum ?? -Infinity) > v || (s.maximum ?? Infinity) < v
    || (s.exclusiveMinimum ?? -Infinity) >= v || (s.exclusiveMaximum ?? Infinity) <= v)) return false;
  if (s.enum) return s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v));
  if (s.anyOf) return s.anyOf.some((b) => meets(v, b));
  const types = [s.type ?? []].flat();
  const typeOf = v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v;
  if (types.length && !types.some((t) => t === typeOf || (t === 'number' && typeOf === 'integer') || (t === 'boolean' && typeOf === 'boolean')))
    return false;
  if (typeOf === 'object') {
    for (const r of s.required ?? []) if (!(r in v)) return false;
    for (const [k, x] of Object.entries(v)) {
      if (s.properties?.[k]) { if (!meets(x, s.properties[k])) return false; }
      else if (s.additionalProperties === false) return false;
    }
  }
  if (typeOf === 'array' && s.items) return v.every((x) => meets(x, s.items));
  return true;
}

const person = {
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer' }, pet: { enum: ['cat', 'dog', null] },
    scores: { type: 'array', items: { type: 'number' } }, nick: { anyOf: [{ type: 'string' }, { type: 'null' }] } },
  required: ['name', 'age', 'pet', 'scores', 'nick'], additionalProperties: false,
};

// Six replies under a strict schema whose keys are all required, greedy and then sampled: each
// finished one (a reply cut by max_tokens is unfinished, as OpenAI's) parses, meets the schema and
// has every key; at least three finish.
async function everyFinishedMeets(schema, content, { thinking = false, max_tokens = 160, seed = 11 } = {}) {
  let finished = 0;
  for (let i = 0; i < 6; i++) {
    const r = await client.chat.completions.create({
      model: 'demo', max_tokens, temperature: i ? 1 : 0, seed: seed + i, chat_template_kwargs: { enable_thinking: thinking },
      response_format: { type: 'json_schema', json_schema: { name: 'reply', strict: true, schema } },
      messages: [{ role: 'user', content }],
    });
    const c = r.choices[0];
    if (c.finish_reason !== 'stop') continue;
    finished++;
    const v = parsesAsObject(c.message.content, `run ${i}`);
    assert.ok(meets(v, schema), `run ${i}: ${c.message.content}`);
    assert.deepEqual(Object.keys(v).sort(), [...schema.required].sort());
  }
  assert.ok(finished >= 3, `only ${finished} of 6 replies finished within max_tokens`);
}

for (const thinking of [false, true]) {
  test(`json_schema: every finished reply meets a strict {name, age} schema (thinking ${thinking ? 'on' : 'off'})`, async () => {
    await everyFinishedMeets(person, 'Describe a person as JSON.', { thinking });
  });
}

test('json_schema through the SDK helper: the streamed reply parses and meets the schema', async () => {
  const stream = await client.chat.completions.create({
    model: 'demo', stream: true, max_tokens: 160, temperature: 0.8, seed: 5,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: person } },
    messages: [{ role: 'user', content: 'Describe a person.' }],
  });
  let text = '', finish = null;
  for await (const ch of stream) {
    text += ch.choices[0]?.delta?.content ?? '';
    finish = ch.choices[0]?.finish_reason ?? finish;
  }
  if (finish === 'stop') assert.ok(meets(JSON.parse(text), person), text);
});

const bounded = {
  type: 'object',
  properties: { code: { type: 'string', minLength: 3, maxLength: 5 }, words: { type: 'array', items: { type: 'string', maxLength: 8 }, minItems: 1, maxItems: 3 },
    year: { type: 'integer', minimum: 1900, maximum: 2100 }, level: { type: 'integer', exclusiveMinimum: 0, exclusiveMaximum: 10 } },
  required: ['code', 'words', 'year', 'level'], additionalProperties: false,
};

test('json_schema bounds: lengths, item counts and integer ranges hold in every finished reply', async () => {
  await everyFinishedMeets(bounded, 'Describe a year as JSON.', { max_tokens: 240, seed: 21 });
});

const patterned = {
  type: 'object',
  properties: { code: { type: 'string', pattern: '^[A-Z]{2}-[0-9]{3}$' }, mail: { type: 'string', pattern: '^[a-z]+@[a-z]+\\.(com|org)$', maxLength: 24 },
    animal: { type: 'string', pattern: 'cat|dog', maxLength: 10 }, note: { type: ['string', 'null'], pattern: '^[^\\n"]*$', maxLength: 20 } },
  required: ['code', 'mail', 'animal', 'note'], additionalProperties: false,
};

test('json_schema pattern: every finished reply matches (as RegExp reads the pattern)', async () => {
  await everyFinishedMeets(patterned, 'Describe an animal as JSON.', { max_tokens: 200, seed: 31 });
});

test('a schema that cannot be enforced is a 400 naming the field', async () => {
  const bad = [
    [{ type: 'object', properties: { a: { type: 'string', pattern: 'a(?=b)' } } }, 'response_format.json_schema.schema.properties.a.pattern'],
    [{ type: 'object', properties: { a: { type: 'string', pattern: '(a)\\1' } } }, 'response_format.json_schema.schema.properties.a.pattern'],
    [{ type: 'object', properties: { a: { type: 'string', pattern: '^x{9}$', maxLength: 4 } } }, 'response_format.json_schema.schema.properties.a.pattern'],
    [{ type: 'object', properties: { a: { type: 'string', format: 'date-time' } } }, 'response_format.json_schema.schema.properties.a.format'],
    [{ type: 'object', properties: { a: { type: 'number', minimum: 0 } } }, 'response_format.json_schema.schema.properties.a.minimum'],
    [{ type: 'object', properties: { a: { type: 'array', uniqueItems: true } } }, 'response_format.json_schema.schema.properties.a.uniqueItems'],
    [{ type: 'object', minProperties: 1 }, 'response_format.json_schema.schema.minProperties'],
    [{ type: 'object', properties: { a: { type: 'strng' } } }, 'response_format.json_schema.schema.properties.a.type'],
    [{ type: 'object', properties: { a: { enum: [] } } }, 'response_format.json_schema.schema.properties.a.enum'],
    [{ type: 'object', properties: { a: { oneOf: [{ type: 'string' }] } } }, 'response_format.json_schema.schema.properties.a.oneOf'],
    [{ type: 'array' }, 'response_format.json_schema.schema'],
  ];
  for (const [schema, param] of bad) {
    await assert.rejects(client.chat.completions.create({
      model: 'demo', max_tokens: 8, response_format: { type: 'json_schema', json_schema: { name: 'x', schema } },
      messages: [{ role: 'user', content: 'x' }],
    }), (e) => { assert.equal(e.status, 400); assert.equal(e.param, param, e.message); return true; });
  }
  // the refusal names the construct
  await assert.rejects(client.chat.completions.create({
    model: 'demo', max_tokens: 8, messages: [{ role: 'user', content: 'x' }],
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'string', pattern: '\\bword' } } } } },
  }), (e) => { assert.match(e.message, /word boundary '\\b' is not supported/); return true; });
});

const weatherTools = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { enum: ['c', 'f'] } }, required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string' } }, required: ['zone'] } } },
];

// Forced calls (tool_choice each of choices, greedy and then sampled) through client c: each finished
// one names one tool (the named one when named) with arguments that fit it; returns how many finished.
async function forcedCallsFit(c, choices, seed) {
  let calls = 0;
  for (const [i, tool_choice] of choices.entries()) {
    const r = await c.chat.completions.create({
      model: 'demo', tools: weatherTools, tool_choice, max_tokens: 120, temperature: i ? 0.9 : 0, seed: seed + i, parallel_tool_calls: false,
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    });
    const ch = r.choices[0];
    if (ch.finish_reason === 'length') continue;
    assert.equal(ch.finish_reason, 'tool_calls', JSON.stringify(ch));
    assert.equal(ch.message.tool_calls.length, 1);
    const call = ch.message.tool_calls[0].function;
    const tool = weatherTools.find((t) => t.function.name === call.name);
    assert.ok(tool, call.name);
    if (typeof tool_choice === 'object') assert.equal(call.name, tool_choice.function.name);
    assert.ok(meets(JSON.parse(call.arguments), tool.function.parameters), call.arguments);
    calls++;
  }
  return calls;
}

test('a forced tool call names one of the tools, with arguments that fit it', async () => {
  await forcedCallsFit(client, ['required', { type: 'function', function: { name: 'get_time' } }, 'required'], 0);
});

test('Qwen 3.5\'s XML form: a forced call names a tool, each <parameter> value JSON that fits it', async () => {
  // a template with Qwen 3.5's markers makes the server render (and constrain) that form
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'strata-xml-'));
  const tmpl = path.join(dir, 'qwen35.jinja');
  fs.writeFileSync(tmpl, "{{- '<|im_start|>' }}<tool_call>\n<function=x>\n<parameter=y>\n</parameter>\n</function>\n</tool_call>");
  const xml = await startServer(['--ctx', '2048', '-m', model, '--chat-template-file', tmpl]);
  try {
    const c = new OpenAI({ baseURL: xml.base + '/v1', apiKey: 'unused', maxRetries: 0 });
    const calls = await forcedCallsFit(c, ['required', { type: 'function', function: { name: 'get_weather' } }, 'required', 'required'], 40);
    assert.ok(calls >= 2, `only ${calls} of 4 calls finished within max_tokens`);
  } finally {
    assert.equal(await xml.stop(), 0, xml.stderr());
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('logprobs on the real engine: log-probabilities of the model, the greedy pick first among the alternatives', async () => {
  const r = await client.chat.completions.create({
    model: 'demo', max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 5, chat_template_kwargs: { enable_thinking: false },
    messages: [{ role: 'user', content: 'What does ocean mean?' }],
  });
  const lp = r.choices[0].logprobs.content;
  assert.ok(lp.length > 0 && lp.length <= 12);
  assert.equal(Buffer.concat(lp.map((x) => Buffer.from(x.bytes))).toString(), r.choices[0].message.content);
  for (const x of lp) {
    assert.ok(x.logprob <= 0);
    assert.equal(x.top_logprobs.length, 5);
    assert.equal(x.top_logprobs[0].token, x.token);
    assert.ok(Math.abs(x.top_logprobs[0].logprob - x.logprob) < 1e-4);
    for (let i = 1; i < 5; i++) assert.ok(x.top_logprobs[i].logprob <= x.top_logprobs[i - 1].logprob);
    assert.ok(x.top_logprobs.reduce((s, t) => s + Math.exp(t.logprob), 0) <= 1.0001);
  }
});

test('n > 1 on the real engine: with a seed, n different samples of one prompt', async () => {
  const r = await client.chat.completions.create({
    model: 'demo', max_tokens: 16, temperature: 1, seed: 1, n: 3, chat_template_kwargs: { enable_thinking: false },
    messages: [{ role: 'user', content: 'Tell me about the sea.' }],
  });
  assert.equal(r.choices.length, 3);
  assert.ok(new Set(r.choices.map((c) => c.message.content)).size > 1, JSON.stringify(r.choices));
  // the second and third read only what the first did not: the prompt is held
  assert.ok(r.usage.prompt_tokens > 0 && r.usage.completion_tokens <= 48);
});
