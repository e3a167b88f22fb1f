// codex.test.mjs: the Codex CLI against `strata serve`, on the echo engine.
//   - the real CLI (`codex exec`, @openai/codex from npm, when tests/api/node_modules has it or
//     STRATA_CODEX names a binary; skipped otherwise): a custom provider with wire_api
//     "responses" pointing at the server, offline; the echo engine's "/tool" answer makes it call
//     its exec_command tool, Codex runs the command and sends the output back as a
//     function_call_output item in a replay of the whole conversation (store false), and the
//     echo engine's answer to that is Codex's last message: the whole agent loop, streamed;
//   - Codex's request shapes replayed with fetch (always): the first turn as Codex 0.171 sends it
//     (developer messages with ids, input_text parts, its tools: functions with strict false, a
//     namespace of functions, web_search, a custom tool; include, store false, prompt_cache_key,
//     client_metadata, reasoning.summary auto), parsed as Codex's stream reader does (every item
//     of output_item.done a known item, response.completed with the usage fields it reads); a call
//     of a namespaced tool says its namespace and a custom tool is called with its free-text
//     input; the second turn replays the reasoning, the call and its output.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from './server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

let srv;
before(async () => { srv = await startServer(['--ctx', '262144']); });
after(async () => { assert.equal(await srv.stop(), 0, srv.stderr()); });

// The codex binary: STRATA_CODEX, else the npm package's launcher in tests/api/node_modules.
function codexBin() {
  if (process.env.STRATA_CODEX) return process.env.STRATA_CODEX;
  const launcher = path.join(here, 'node_modules', '@openai', 'codex', 'bin', 'codex.js');
  return fs.existsSync(launcher) ? launcher : null;
}

// Runs `codex exec PROMPT` with a fresh CODEX_HOME whose config points at the server.
function codexExec(prompt, workdir) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'strata-codex-home-'));
  fs.writeFileSync(path.join(home, 'config.toml'), [
    'model = "strata-echo"',
    'model_provider = "strata"',
    'check_for_update_on_startup = false',
    '[analytics]',
    'enabled = false',
    '[model_providers.strata]',
    'name = "Strata"',
    `base_url = "${srv.base}/v1"`,
    'wire_api = "responses"',
    'request_max_retries = 0',
    'stream_max_retries = 0',
    '',
  ].join('\n'));
  const bin = codexBin();
  const args = ['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', '--color', 'never', '-C', workdir, prompt];
  // killed after two minutes (it takes about two seconds), so a Codex that waits on something
  // this machine cannot reach fails the test instead of hanging it
  const opts = { env: { ...process.env, CODEX_HOME: home }, stdio: ['ignore', 'pipe', 'pipe'], timeout: 120000, killSignal: 'SIGKILL' };
  const child = bin.endsWith('.js') ? spawn(process.execPath, [bin, ...args], opts) : spawn(bin, args, opts);
  let out = '', err = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { err += d; });
  return new Promise((resolve) => child.on('exit', (code) => {
    fs.rmSync(home, { recursive: true, force: true });
    resolve({ code, out, err });
  }));
}

test('the Codex CLI runs its tool loop against strata serve', { skip: codexBin() ? false : 'no Codex CLI (npm install @openai/codex in tests/api, or STRATA_CODEX)' }, async () => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'strata-codex-work-'));
  try {
    const r = await codexExec('/tool exec_command {"cmd": "echo strata-codex-$((6*7))"}', work);
    assert.equal(r.code, 0, `codex exec failed:\n${r.out}\n${r.err}`);
    // the last message is the echo engine's answer to the tool's output: the command ran
    assert.match(r.out, /The tool returned: .*strata-codex-42/s, `${r.out}\n${r.err}`);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
});

// ---- Codex's request shapes, replayed ----

const ids = { window: '01a234eb-daac-7a22-87ac-4842f8470f07' };
const codexHeaders = {
  'content-type': 'application/json', accept: 'text/event-stream', originator: 'codex_exec',
  'user-agent': 'codex_exec/0.171.0 (Debian 12.0.0; x86_64) xterm (codex_exec; 0.171.0)', 'accept-encoding': 'zstd,gzip',
  'session-id': ids.window, 'thread-id': ids.window, 'x-client-request-id': ids.window,
  'x-codex-window-id': `${ids.window}:0`, 'x-codex-beta-features': 'remote_compaction_v2',
};

const codexTools = [
  { type: 'function', name: 'exec_command', description: 'Runs a command in a PTY, returning output or a session ID for ongoing interaction.', strict: false,
    parameters: { type: 'object', properties: { cmd: { type: 'string', description: 'Shell command to execute.' }, workdir: { type: 'string' },
      yield_time_ms: { type: 'number' }, max_output_tokens: { type: 'number' }, login: { type: 'boolean' } }, required: ['cmd'], additionalProperties: false } },
  { type: 'function', name: 'view_image', description: 'View a local image file.', strict: false,
    parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'], additionalProperties: false } },
  { type: 'namespace', name: 'multi_agent_v1', description: 'Tools for spawning and managing sub-agents.', tools: [
    { type: 'function', name: 'close_agent', description: 'Close an agent.', strict: false,
      parameters: { type: 'object', properties: { target: { type: 'string' } }, required: ['target'], additionalProperties: false } },
    { type: 'function', name: 'wait_agent', description: 'Wait on agents.', strict: false,
      parameters: { type: 'object', properties: { targets: { type: 'array', items: { type: 'string' } }, timeout_ms: { type: 'number' } }, required: ['targets'], additionalProperties: false } },
  ] },
  { type: 'function', name: 'get_goal', description: 'Get the current goal.', strict: false, parameters: { type: 'object', properties: {}, required: [], additionalProperties: false } },
  { type: 'custom', name: 'apply_patch', description: 'Use the `apply_patch` tool to edit files.', format: { type: 'grammar', syntax: 'lark', definition: 'start: begin_patch hunk+ end_patch' } },
  { type: 'web_search', external_web_access: false },
];

function codexTurn(input) {
  return {
    model: 'strata-echo', instructions: '', input, tools: codexTools, tool_choice: 'auto', parallel_tool_calls: true,
    reasoning: { summary: 'auto' }, store: false, stream: true, include: ['reasoning.encrypted_content'], prompt_cache_key: ids.window,
    client_metadata: { 'x-codex-window-id': `${ids.window}:0`, session_id: ids.window, thread_id: ids.window },
  };
}

const developer = { type: 'message', id: 'msg_048ba030-574b-58e9-be4f-c1646e8afdbe', role: 'developer',
  content: [{ type: 'input_text', text: 'You are a coding agent running in the Codex CLI, a terminal-based coding assistant.' }] };
const environment = { type: 'message', id: 'msg_01a234eb-db13-7160-a522-0669e973b509', role: 'user',
  content: [{ type: 'input_text', text: '<environment_context>\n  <cwd>/tmp/work</cwd>\n  <shell>bash</shell>\n</environment_context>' }] };
const user = (text) => ({ type: 'message', id: 'msg_01a234eb-db20-7442-b6bf-a896567826e6', role: 'user', content: [{ type: 'input_text', text }] });

// The stream as Codex's reader takes it: SSE events, each JSON with a type; the items of
// output_item.added / .done, and response.completed's id and usage.
async function codexStream(body) {
  const r = await fetch(srv.base + '/v1/responses', { method: 'POST', headers: codexHeaders, body: JSON.stringify(body) });
  const text = await r.text();
  assert.equal(r.status, 200, text);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  const events = [];
  for (const block of text.split('\n\n')) {
    const data = block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
    if (!data) continue;
    const ev = JSON.parse(data);
    const name = block.split('\n').find((l) => l.startsWith('event: '));
    if (name) assert.equal(name.slice(7), ev.type);
    events.push(ev);
  }
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  assert.equal(events[0].type, 'response.created');
  const last = events.at(-1);
  assert.equal(last.type, 'response.completed');
  const u = last.response.usage;
  for (const k of ['input_tokens', 'output_tokens', 'total_tokens']) assert.equal(typeof u[k], 'number', k);
  assert.equal(typeof u.input_tokens_details.cached_tokens, 'number');
  assert.equal(typeof u.output_tokens_details.reasoning_tokens, 'number');
  assert.match(last.response.id, /^resp_/);
  const done = events.filter((e) => e.type === 'response.output_item.done').map((e) => e.item);
  for (const it of done) {
    if (it.type === 'message') {
      assert.equal(it.role, 'assistant');
      for (const c of it.content) assert.equal(typeof c.text, 'string');
    } else if (it.type === 'reasoning') {
      assert.ok(Array.isArray(it.summary));
    } else if (it.type === 'function_call') {
      for (const k of ['name', 'arguments', 'call_id']) assert.equal(typeof it[k], 'string', k);
    } else if (it.type === 'custom_tool_call') {
      for (const k of ['name', 'input', 'call_id']) assert.equal(typeof it[k], 'string', k);
    } else {
      assert.fail(`an item Codex does not read: ${it.type}`);
    }
  }
  assert.deepEqual(last.response.output, done);
  return { events, items: done, response: last.response };
}

test('Codex 0.171 request shapes: a first turn, streamed', async () => {
  const { items, response } = await codexStream(codexTurn([developer, environment, user('list the files here')]));
  assert.deepEqual(items.map((i) => i.type), ['reasoning', 'message']);
  assert.equal(items[1].content[0].text, 'Echo: list the files here');
  assert.equal(response.store, false);
  assert.deepEqual(response.reasoning, { effort: null, summary: 'auto' });
  assert.deepEqual(response.tools, codexTools);
});

test('Codex request shapes: a namespaced call says its namespace, a custom tool gets its text', async () => {
  const ns = await codexStream(codexTurn([developer, user('/tool wait_agent {"targets": ["a1"]}')]));
  const call = ns.items.find((i) => i.type === 'function_call');
  assert.equal(call.name, 'wait_agent');
  assert.equal(call.namespace, 'multi_agent_v1');
  assert.deepEqual(JSON.parse(call.arguments), { targets: ['a1'] });
  const patch = '*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch';
  const custom = await codexStream(codexTurn([developer, user(`/tool apply_patch ${JSON.stringify({ input: patch })}`)]));
  const c = custom.items.find((i) => i.type === 'custom_tool_call');
  assert.ok(c, JSON.stringify(custom.items));
  assert.equal(c.name, 'apply_patch');
  assert.equal(c.input, patch);
  const deltas = custom.events.filter((e) => e.type === 'response.custom_tool_call_input.delta').map((e) => e.delta).join('');
  assert.equal(deltas, patch);
  // the plain call has no namespace
  const plain = await codexStream(codexTurn([developer, user('/tool exec_command {"cmd": "ls"}')]));
  assert.equal(plain.items.find((i) => i.type === 'function_call').namespace, undefined);
});

test('Codex request shapes: the second turn replays reasoning, the call and its output', async () => {
  const first = await codexStream(codexTurn([developer, environment, user('/tool exec_command {"cmd": "ls"}')]));
  const call = first.items.find((i) => i.type === 'function_call');
  const reasoning = first.items.find((i) => i.type === 'reasoning');
  // as Codex sends them back: without ids and statuses, the reasoning with its content
  const replayed = [
    developer, environment, user('/tool exec_command {"cmd": "ls"}'),
    { type: 'reasoning', summary: [], content: reasoning.content, encrypted_content: null },
    { type: 'function_call', name: call.name, arguments: call.arguments, call_id: call.call_id },
    { type: 'function_call_output', call_id: call.call_id, output: 'Chunk ID: 4f2a\nWall time: 0.01 seconds\nProcess exited with code 0\nOutput:\nREADME.md\n' },
  ];
  const second = await codexStream(codexTurn(replayed));
  const msg = second.items.find((i) => i.type === 'message');
  assert.match(msg.content[0].text, /^The tool returned: Chunk ID: 4f2a/);
  // the output as content items, and a custom tool's call and output replayed
  const again = await codexStream(codexTurn([
    developer, user('patch it'),
    { type: 'custom_tool_call', name: 'apply_patch', input: '*** Begin Patch\n*** End Patch', call_id: 'call_x' },
    { type: 'custom_tool_call_output', call_id: 'call_x', output: 'Success.' },
    { type: 'function_call', name: 'wait_agent', namespace: 'multi_agent_v1', arguments: '{"targets":["a"]}', call_id: 'call_y' },
    { type: 'function_call_output', call_id: 'call_y', output: [{ type: 'input_text', text: 'done' }] },
  ]));
  assert.match(again.items.find((i) => i.type === 'message').content[0].text, /^The tool returned: done/);
});
