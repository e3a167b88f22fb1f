// errors.test.mjs: every refusal of `strata serve`, with the error shape of the API that was
// called (OpenAI: {error: {message, type, param, code}}; Anthropic: {type: "error", error: {type,
// message}}): body too large (413), nesting too deep, invalid UTF-8, wrong field types, n out of range, logprobs refusals, bad prompts,
// context exceeded, bad JSON, unknown routes; and the Host check and CORS.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, post, getWithHost } from './server.mjs';

let srv, openai, anthropic;
before(async () => {
  srv = await startServer(['--ctx', '512', '--max-body', '65536']);
  openai = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: srv.base, apiKey: 'unused', maxRetries: 0 });
});
after(async () => { assert.equal(await srv.stop(), 0, srv.stderr()); });

const chat = (extra) => ({ model: 'echo', messages: [{ role: 'user', content: 'hi' }], ...extra });

function openaiError(r, status, param) {
  assert.equal(r.status, status, r.text);
  assert.equal(typeof r.json.error.message, 'string');
  assert.equal(typeof r.json.error.type, 'string');
  if (param !== undefined) assert.equal(r.json.error.param, param);
}

function anthropicError(r, status, mention) {
  assert.equal(r.status, status, r.text);
  assert.equal(r.json.type, 'error');
  assert.equal(typeof r.json.error.type, 'string');
  if (mention) assert.ok(r.json.error.message.includes(mention), r.json.error.message);
}

test('413 for a body over --max-body, both shapes', async () => {
  const big = JSON.stringify(chat({ messages: [{ role: 'user', content: 'x'.repeat(70000) }] }));
  openaiError(await post(srv.base, '/v1/chat/completions', big), 413);
  const r = await post(srv.base, '/v1/messages', big);
  anthropicError(r, 413);
  assert.equal(r.json.error.type, 'request_too_large');
});

test('JSON nested past the limit is refused, naming where', async () => {
  const deep = '['.repeat(100) + ']'.repeat(100);
  const r = await post(srv.base, '/v1/chat/completions', `{"model":"echo","messages":[{"role":"user","content":"hi"}],"metadata":{"x":${deep}}}`);
  openaiError(r, 400);
  assert.ok(r.json.error.param.startsWith('metadata.x[0][0][0]'), r.json.error.param);
  assert.match(r.json.error.message, /nested deeper than 64/);
});

test('invalid UTF-8 is refused, naming the field', async () => {
  const body = Buffer.concat([Buffer.from('{"model":"echo","messages":[{"role":"user","content":"ab'), Buffer.from([0xc3, 0x28]), Buffer.from('"}]}')]);
  const r = await post(srv.base, '/v1/chat/completions', body);
  openaiError(r, 400, 'messages[0].content');
  assert.match(r.json.error.message, /invalid UTF-8/);
  const body2 = Buffer.concat([Buffer.from('{"model":"echo","max_tokens":5,"messages":[{"role":"user","content":"\xed'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}]}')]);
  anthropicError(await post(srv.base, '/v1/messages', body2), 400, 'messages[0].content');
});

test('wrong field types get 400 naming the field (OpenAI)', async () => {
  const cases = [
    [{ temperature: 'hot' }, 'temperature'],
    [{ temperature: 3 }, 'temperature'],
    [{ top_p: [] }, 'top_p'],
    [{ max_tokens: 1.5 }, 'max_tokens'],
    [{ max_completion_tokens: 0 }, 'max_completion_tokens'],
    [{ stream: 'yes' }, 'stream'],
    [{ stop: 5 }, 'stop'],
    [{ stop: ['a', 7] }, 'stop[1]'],
    [{ seed: 'x' }, 'seed'],
    [{ messages: 'hi' }, 'messages'],
    [{ messages: [{ role: 'wizard', content: 'x' }] }, 'messages[0].role'],
    [{ messages: [{ role: 'user', content: 12 }] }, 'messages[0].content'],
    [{ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, 'messages[0].content[0]'],
    [{ tools: {} }, 'tools'],
    [{ tool_choice: 'sometimes', tools: [{ type: 'function', function: { name: 'f' } }] }, 'tool_choice'],
    [{ response_format: { type: 'yaml' } }, 'response_format.type'],
    [{ reasoning_effort: 'extreme' }, 'reasoning_effort'],
    [{ chat_template_kwargs: { enable_thinking: 'no' } }, 'chat_template_kwargs.enable_thinking'],
    [{ tool_choice: 'required' }, 'tool_choice'],
    [{ tool_choice: 'required', tools: [] }, 'tool_choice'],
    [{ tool_choice: { type: 'function', function: { name: 'f' } } }, 'tool_choice'],
    [{ tool_choice: { type: 'function', function: { name: 'g' } }, tools: [{ type: 'function', function: { name: 'f' } }] }, 'tool_choice'],
  ];
  for (const [extra, param] of cases) openaiError(await post(srv.base, '/v1/chat/completions', chat(extra)), 400, param);
  const missing = await post(srv.base, '/v1/chat/completions', { model: 'echo' });
  openaiError(missing, 400, 'messages');
});

test('top_p 0 means greedy, on both APIs', async () => {
  const r = await openai.chat.completions.create(chat({ top_p: 0, temperature: 0.9, messages: [{ role: 'user', content: '/params' }] }));
  assert.match(r.choices[0].message.content, /temperature=0 top_p=1 /);
  const a = await anthropic.messages.create({ model: 'echo', max_tokens: 300, top_p: 0, messages: [{ role: 'user', content: '/params' }] });
  assert.match(a.content.at(-1).text, /temperature=0 top_p=1 /);
});

test('Anthropic tool_choice must name one of the tools, and any/tool need tools', async () => {
  const tools = [{ name: 'get_weather', input_schema: { type: 'object', properties: {} } }];
  const base = { model: 'echo', max_tokens: 50, messages: [{ role: 'user', content: 'x' }] };
  anthropicError(await post(srv.base, '/v1/messages', { ...base, tools, tool_choice: { type: 'tool', name: 'launch_missiles' } }), 400, 'launch_missiles');
  anthropicError(await post(srv.base, '/v1/messages', { ...base, tool_choice: { type: 'any' } }), 400, 'tool_choice');
  anthropicError(await post(srv.base, '/v1/messages', { ...base, tools: [], tool_choice: { type: 'tool', name: 'get_weather' } }), 400, 'tool_choice');
  await assert.rejects(anthropic.messages.create({ ...base, tools, tool_choice: { type: 'tool', name: 'launch_missiles' } }), (e) => e.status === 400);
  const ok = await anthropic.messages.create({ ...base, tools, tool_choice: { type: 'tool', name: 'get_weather' } });
  assert.equal(ok.content.at(-1).name, 'get_weather');
});

test('the openai client surfaces these as BadRequestError with the param', async () => {
  await assert.rejects(openai.chat.completions.create(chat({ temperature: 'hot' })), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.param, 'temperature');
    return true;
  });
});

test('n outside 1..128 is refused; top_logprobs needs logprobs', async () => {
  openaiError(await post(srv.base, '/v1/chat/completions', chat({ n: 0 })), 400, 'n');
  openaiError(await post(srv.base, '/v1/chat/completions', chat({ n: 129 })), 400, 'n');
  openaiError(await post(srv.base, '/v1/chat/completions', chat({ top_logprobs: 3 })), 400, 'top_logprobs');
  openaiError(await post(srv.base, '/v1/chat/completions', chat({ logprobs: true, top_logprobs: 21 })), 400, 'top_logprobs');
  openaiError(await post(srv.base, '/v1/completions', { model: 'echo', prompt: 'x', logprobs: 2 }), 400, 'logprobs');
  openaiError(await post(srv.base, '/v1/completions', { model: 'echo', prompt: [1, 2, 99999] }), 400, 'prompt');
  openaiError(await post(srv.base, '/v1/completions', { model: 'echo', prompt: ['a', 7] }), 400, 'prompt[1]');
  openaiError(await post(srv.base, '/v1/completions', { model: 'echo', prompt: [] }), 400, 'prompt');
});

test('a prompt longer than the context: 400 context_length_exceeded', async () => {
  const r = await post(srv.base, '/v1/chat/completions', chat({ messages: [{ role: 'user', content: 'y'.repeat(600) }] }));
  openaiError(r, 400, 'messages');
  assert.equal(r.json.error.code, 'context_length_exceeded');
  const c = await post(srv.base, '/v1/completions', { model: 'echo', prompt: 'z'.repeat(600) });
  assert.equal(c.json.error.code, 'context_length_exceeded');
  await assert.rejects(anthropic.messages.create({ model: 'echo', max_tokens: 10, messages: [{ role: 'user', content: 'y'.repeat(600) }] }),
    (e) => e.status === 400 && /maximum context length/.test(e.message));
  // count_tokens still counts it: that is how a client learns it is too long.
  const counted = await anthropic.messages.countTokens({ model: 'echo', messages: [{ role: 'user', content: 'y'.repeat(600) }] });
  assert.ok(counted.input_tokens > 600);
});

test('Anthropic field errors name the field', async () => {
  anthropicError(await post(srv.base, '/v1/messages', { model: 'echo', messages: [{ role: 'user', content: 'x' }] }), 400, 'max_tokens');
  anthropicError(await post(srv.base, '/v1/messages', { model: 'echo', max_tokens: 'ten', messages: [{ role: 'user', content: 'x' }] }), 400, 'max_tokens');
  anthropicError(await post(srv.base, '/v1/messages', { model: 'echo', max_tokens: 5, messages: [{ role: 'system', content: 'x' }] }), 400, 'messages.0.role');
  anthropicError(await post(srv.base, '/v1/messages', { model: 'echo', max_tokens: 5, temperature: 'warm', messages: [{ role: 'user', content: 'x' }] }), 400, 'temperature');
  anthropicError(await post(srv.base, '/v1/messages', { model: 'echo', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }), 400, 'messages.0.content.0');
  await assert.rejects(anthropic.messages.create({ model: 'echo', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }),
    (e) => e.status === 400 && e.error?.error?.type === 'invalid_request_error');
});

test('bad JSON, a non-object body, unknown routes, wrong methods', async () => {
  const bad = await post(srv.base, '/v1/chat/completions', '{"model": ');
  openaiError(bad, 400);
  assert.match(bad.json.error.message, /not valid JSON/);
  openaiError(await post(srv.base, '/v1/chat/completions', '[1,2]'), 400);
  const nf = await fetch(srv.base + '/v1/nothing');
  assert.equal(nf.status, 404);
  const wm = await fetch(srv.base + '/v1/chat/completions');
  assert.equal(wm.status, 405);
});

test('without a key, Host must be a loopback name', async () => {
  for (const host of ['localhost', `localhost:${srv.port}`, `127.0.0.1:${srv.port}`, `[::1]:${srv.port}`, '127.1.2.3'])
    assert.equal((await getWithHost(srv.port, '/v1/models', host)).status, 200, host);
  for (const host of ['evil.example', `evil.example:${srv.port}`, '10.0.0.1', 'localhost.evil.example']) {
    const r = await getWithHost(srv.port, '/v1/models', host);
    assert.equal(r.status, 403, host);
    assert.match(JSON.parse(r.body).error.message, /not a loopback name/);
  }
});

test('CORS is off unless configured', async () => {
  const r = await getWithHost(srv.port, '/v1/models', 'localhost', { Origin: 'http://page.example' });
  assert.equal(r.headers['access-control-allow-origin'], undefined);
  const pre = await fetch(srv.base + '/v1/chat/completions', { method: 'OPTIONS', headers: { Origin: 'http://page.example' } });
  assert.equal(pre.status, 405);
  assert.equal(pre.headers.get('access-control-allow-origin'), null);
});

test('CORS with --cors ORIGIN answers that origin only', async () => {
  const s2 = await startServer(['--cors', 'http://app.example']);
  try {
    const pre = await fetch(s2.base + '/v1/chat/completions', {
      method: 'OPTIONS', headers: { Origin: 'http://app.example', 'Access-Control-Request-Method': 'POST' },
    });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), 'http://app.example');
    assert.match(pre.headers.get('access-control-allow-headers'), /Authorization/);
    const ok = await getWithHost(s2.port, '/v1/models', 'localhost', { Origin: 'http://app.example' });
    assert.equal(ok.headers['access-control-allow-origin'], 'http://app.example');
    const other = await getWithHost(s2.port, '/v1/models', 'localhost', { Origin: 'http://other.example' });
    assert.equal(other.headers['access-control-allow-origin'], undefined);
  } finally {
    assert.equal(await s2.stop(), 0);
  }
});
