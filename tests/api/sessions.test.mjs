// sessions.test.mjs: saved sessions. POST /v1/sessions/save and /v1/sessions/restore write and
// read STATE_DIR/NAME.session (versioned, with the model's fingerprint and a checksum, written
// atomically). A restored session continues where the saved one stood (its reuse count shows it);
// a name that tries to leave the folder, a truncated or altered file, a file of another version or
// model are refused with a message, and the session is untouched.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, post } from './server.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'strata-sessions-'));
let srv, client;
before(async () => {
  srv = await startServer(['--state-dir', dir]);
  client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  assert.equal(await srv.stop(), 0, srv.stderr());
  fs.rmSync(dir, { recursive: true, force: true });
});

const quiet = { chat_template_kwargs: { enable_thinking: false } };
const ask = (content) => client.chat.completions.create({ model: 'echo', ...quiet, messages: [{ role: 'user', content }] });

// FNV-1a 64, as the file's checksum.
function fnv1a(buf) {
  let h = 0xcbf29ce484222325n;
  for (const b of buf) h = BigInt.asUintN(64, (h ^ BigInt(b)) * 0x100000001b3n);
  return h;
}
function reseal(buf) {
  const out = Buffer.from(buf);
  out.writeBigUInt64LE(fnv1a(out.subarray(0, out.length - 8)), out.length - 8);
  return out;
}

test('save, talk about something else, restore: the saved conversation is reused again', async () => {
  const a = await ask('the saved conversation ' + 'a'.repeat(100));
  const saved = await post(srv.base, '/v1/sessions/save', { name: 'chat-1' });
  assert.equal(saved.status, 200, saved.text);
  assert.equal(saved.json.saved, 'chat-1');
  assert.equal(saved.json.tokens, a.usage.prompt_tokens + a.usage.completion_tokens);
  const file = path.join(dir, 'chat-1.session');
  assert.equal(fs.statSync(file).size, saved.json.bytes);
  assert.deepEqual(fs.readdirSync(dir).filter((f) => f.startsWith('.')), [], 'no temporary file left');

  const other = await ask('something else entirely');
  assert.ok(other.usage.prompt_tokens_details.cached_tokens < a.usage.prompt_tokens - 1);
  const restored = await post(srv.base, '/v1/sessions/restore', { name: 'chat-1' });
  assert.equal(restored.status, 200, restored.text);
  assert.equal(restored.json.tokens, saved.json.tokens);
  const again = await ask('the saved conversation ' + 'a'.repeat(100));
  assert.equal(again.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens - 1);
  assert.equal(again.choices[0].message.content, a.choices[0].message.content);

  const list = await (await fetch(srv.base + '/v1/sessions')).json();
  assert.deepEqual(list.sessions.map((s) => s.name), ['chat-1']);
});

test('names that leave the state folder are refused', async () => {
  for (const name of ['../escape', 'a/b', '/etc/passwd', '.hidden', '', 'x'.repeat(65), 'sp ace', '..']) {
    for (const op of ['save', 'restore']) {
      const r = await post(srv.base, `/v1/sessions/${op}`, { name });
      assert.equal(r.status, 400, `${op} ${JSON.stringify(name)}: ${r.text}`);
      assert.equal(r.json.error.param, 'name');
    }
  }
  assert.equal((await post(srv.base, '/v1/sessions/save', { name: 5 })).status, 400);
  assert.equal((await post(srv.base, '/v1/sessions/save', { name: 'nul\u0000byte' })).status, 400);
  assert.ok(!fs.existsSync(path.join(dir, '..', 'escape.session')));
  const missing = await post(srv.base, '/v1/sessions/restore', { name: 'never-saved' });
  assert.equal(missing.status, 404);
});

test('a truncated, altered, foreign or future file is refused and the session is untouched', async () => {
  const probe = 'the session in use ' + 'b'.repeat(80);
  await ask(probe);
  assert.equal((await post(srv.base, '/v1/sessions/save', { name: 'good' })).status, 200);
  const good = fs.readFileSync(path.join(dir, 'good.session'));
  const bad = {
    truncated: good.subarray(0, good.length - 20),
    altered: (() => { const b = Buffer.from(good); b[100] ^= 1; return b; })(),
    foreign: (() => { const b = Buffer.from(good); b.write('another-model-fingerprint\0', 16); return reseal(b); })(),
    future: (() => { const b = Buffer.from(good); b.writeUInt32LE(2, 8); return reseal(b); })(),
    garbage: Buffer.from('not a session at all'),
    badpayload: (() => { const b = Buffer.from(good); b.writeInt32LE(999999, 88 + 12); return reseal(b); })(),
  };
  const messages = {
    truncated: /truncated/, altered: /altered/, foreign: /another model/, future: /version 2/, garbage: /not a Strata session/,
    badpayload: /does not fit this engine/,
  };
  for (const [name, bytes] of Object.entries(bad)) {
    fs.writeFileSync(path.join(dir, `${name}.session`), bytes);
    const r = await post(srv.base, '/v1/sessions/restore', { name });
    assert.equal(r.status, 400, `${name}: ${r.text}`);
    assert.match(r.json.error.message, messages[name], name);
    // Untouched: the conversation in use is still the one reused.
    const again = await ask(probe);
    assert.equal(again.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens - 1, name);
  }
});
