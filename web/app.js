// app.js: the Strata web app. Chat streams from POST /v1/chat/completions (SSE, parsed here:
// reasoning_content goes into a folded "Thinking" block, tool calls are shown as such); Stop aborts
// the request, which the server notices and cancels between tokens. Monitor polls /v1/status once a
// second while it is shown. About shows the model, the server's settings and its addresses.
// The whole conversation is sent on each turn; the server reuses the prefix it already holds.
'use strict';

const $ = (id) => document.getElementById(id);
const state = { messages: [], controller: null, monitorTimer: null, status: null };

function apiHeaders() {
  const h = { 'Content-Type': 'application/json' };
  const key = localStorage.getItem('strata-api-key');
  if (key) h.Authorization = 'Bearer ' + key;
  return h;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// --- tabs -------------------------------------------------------------------------------------

function showView(name) {
  for (const t of document.querySelectorAll('.tab')) t.classList.toggle('active', t.dataset.view === name);
  for (const v of document.querySelectorAll('.view')) v.classList.toggle('active', v.id === 'view-' + name);
  clearInterval(state.monitorTimer);
  state.monitorTimer = null;
  if (name === 'monitor') {
    refreshStatus();
    state.monitorTimer = setInterval(refreshStatus, 1000);
  }
  if (name === 'about') refreshStatus();
}

// --- chat -------------------------------------------------------------------------------------

function scrollDown() {
  const m = $('messages');
  m.scrollTop = m.scrollHeight;
}

function addUserMessage(text) {
  $('messages').append(el('div', 'msg user', text));
  scrollDown();
}

function addAssistantMessage() {
  const box = el('div', 'msg assistant streaming');
  const thinking = el('details', 'thinking');
  thinking.hidden = true;
  const summary = el('summary', null, 'Thinking…');
  const thinkText = el('div', 'think-text');
  thinking.append(summary, thinkText);
  const content = el('div', 'content');
  const tools = el('div', 'tools');
  const stats = el('div', 'stats');
  box.append(thinking, content, tools, stats);
  $('messages').append(box);
  scrollDown();
  return { box, thinking, summary, thinkText, content, tools, stats };
}

function numberField(id) {
  const v = $(id).value.trim();
  return v === '' ? undefined : Number(v);
}

function requestBody() {
  const messages = [];
  const system = $('system').value.trim();
  if (system) messages.push({ role: 'system', content: system });
  messages.push(...state.messages);
  const body = {
    model: state.status?.model ?? 'default',
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: numberField('temperature'),
    top_p: numberField('top_p'),
    top_k: numberField('top_k'),
    min_p: numberField('min_p'),
    presence_penalty: numberField('presence_penalty'),
    max_tokens: numberField('max_tokens'),
    chat_template_kwargs: { enable_thinking: $('thinking').checked },
  };
  const seed = numberField('seed');
  if (seed !== undefined) body.seed = seed;
  return body;
}

// Reads an SSE body and calls onEvent(json) for each data line; comments are progress notes.
async function readEvents(response, onEvent, onComment) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, '');
      buf = buf.slice(nl + 1);
      if (line.startsWith(':')) onComment(line.slice(1).trim());
      else if (line.startsWith('data: ')) {
        const data = line.slice(6);
        if (data === '[DONE]') return;
        onEvent(JSON.parse(data));
      }
    }
  }
}

async function send(text) {
  state.messages.push({ role: 'user', content: text });
  addUserMessage(text);
  const view = addAssistantMessage();
  const reply = { role: 'assistant', content: '', reasoning_content: '', tool_calls: [] };
  const controller = new AbortController();
  state.controller = controller;
  $('send').disabled = true;
  $('stop').disabled = false;
  $('chat-status').textContent = 'Waiting for the engine…';
  const started = performance.now();
  let firstToken = 0, usage = null, finish = null, frame = 0;
  // Tokens can arrive far faster than the screen refreshes: draw at most once a frame.
  const render = () => {
    frame = 0;
    if (reply.reasoning_content) {
      view.thinking.hidden = false;
      view.thinkText.textContent = reply.reasoning_content;
      if (reply.content || reply.tool_calls.length) view.summary.textContent = 'Thought';
    }
    view.content.textContent = reply.content;
    if (reply.tool_calls.length)
      view.tools.replaceChildren(...reply.tool_calls.map((c) => el('div', 'tool-call', `${c.function.name}(${c.function.arguments})`)));
    scrollDown();
  };
  const schedule = () => { if (!frame) frame = requestAnimationFrame(render); };
  try {
    const response = await fetch('/v1/chat/completions', {
      method: 'POST', headers: apiHeaders(), body: JSON.stringify(requestBody()), signal: controller.signal,
    });
    if (!response.ok) {
      const err = await response.json().catch(() => ({}));
      throw new Error(err.error?.message ?? `HTTP ${response.status}`);
    }
    await readEvents(response, (chunk) => {
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices?.[0];
      if (!choice) return;
      const d = choice.delta ?? {};
      if (!firstToken && (d.content || d.reasoning_content || d.tool_calls)) {
        firstToken = performance.now();
        $('chat-status').textContent = 'Generating…';
      }
      if (d.reasoning_content) reply.reasoning_content += d.reasoning_content;
      if (d.content) reply.content += d.content;
      for (const tc of d.tool_calls ?? []) {
        const call = (reply.tool_calls[tc.index] ??= { id: tc.id, type: 'function', function: { name: '', arguments: '' } });
        if (tc.function?.name) call.function.name += tc.function.name;
        if (tc.function?.arguments) call.function.arguments += tc.function.arguments;
      }
      schedule();
      if (choice.finish_reason) finish = choice.finish_reason;
    }, (comment) => {
      const m = comment.match(/^prompt (\d+)\/(\d+)/);
      if (m) $('chat-status').textContent = `Reading the prompt: ${m[1]} / ${m[2]} tokens`;
    });
    $('chat-status').textContent = '';
  } catch (e) {
    if (e.name === 'AbortError') {
      $('chat-status').textContent = 'Stopped.';
      finish = 'stopped';
    } else {
      view.box.classList.add('error');
      view.content.textContent = reply.content + (reply.content ? '\n' : '') + 'Error: ' + e.message;
      $('chat-status').textContent = '';
    }
  } finally {
    cancelAnimationFrame(frame);
    if (!view.box.classList.contains('error')) render();
    state.controller = null;
    $('send').disabled = false;
    $('stop').disabled = true;
    view.box.classList.remove('streaming');
    if (reply.reasoning_content) view.summary.textContent = 'Thought';
  }
  const ended = performance.now();
  const parts = [];
  if (usage) {
    parts.push(`${usage.prompt_tokens} prompt tokens (${usage.prompt_tokens_details?.cached_tokens ?? 0} reused)`);
    parts.push(`${usage.completion_tokens} generated`);
    if (firstToken && ended > firstToken) parts.push(`${(usage.completion_tokens / ((ended - firstToken) / 1000)).toFixed(1)} tokens/s`);
  }
  if (firstToken) parts.push(`first token after ${((firstToken - started) / 1000).toFixed(2)} s`);
  if (finish && finish !== 'stop') parts.push(finish);
  view.stats.textContent = parts.join(' · ');
  const kept = { role: 'assistant', content: reply.content };
  if (reply.tool_calls.length) kept.tool_calls = reply.tool_calls;
  if (reply.content || reply.tool_calls.length) state.messages.push(kept);
}

// --- monitor and about ------------------------------------------------------------------------

function formatBytes(b) {
  if (!b) return '0 B';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  const i = Math.min(u.length - 1, Math.floor(Math.log(b) / Math.log(1024)));
  return (b / 1024 ** i).toFixed(i ? 1 : 0) + ' ' + u[i];
}

function fillList(dl, rows) {
  dl.replaceChildren(...rows.flatMap(([k, v]) => [el('dt', null, k), el('dd', null, String(v))]));
}

async function refreshStatus() {
  let s;
  try {
    const r = await fetch('/v1/status', { headers: apiHeaders() });
    if (r.status === 401) {
      $('model-name').textContent = 'API key needed (About)';
      return;
    }
    s = await r.json();
  } catch {
    $('model-name').textContent = 'server unreachable';
    return;
  }
  state.status = s;
  $('model-name').textContent = `${s.model} · ${s.context_length} tokens context`;

  const p = s.prompt;
  const pct = p.total ? Math.round((100 * p.done) / p.total) : 0;
  $('mon-progress-bar').style.width = (s.busy && p.total ? pct : 0) + '%';
  $('mon-progress').textContent = s.busy && p.total
    ? `${p.done} / ${p.total} tokens (${pct}%), ${p.reused} reused` : 'idle';
  $('mon-prompt-tps').textContent = s.speed.prompt_tokens_per_second ? s.speed.prompt_tokens_per_second.toFixed(1) : '–';
  $('mon-decode-tps').textContent = s.speed.decode_tokens_per_second ? s.speed.decode_tokens_per_second.toFixed(1) : '–';
  $('mon-reused').textContent = String(s.settings.reused_tokens);
  $('mon-memory').textContent = formatBytes(s.memory.rss_bytes);
  $('mon-memory-engine').textContent = `resident; engine accounts for ${formatBytes(s.memory.engine_bytes)}`;
  $('mon-queue').textContent = `${s.queue.waiting} / ${s.queue.max}`;
  $('mon-busy').textContent = s.busy ? 'engine busy' : 'engine idle';
  $('mon-requests').textContent = String(s.totals.requests);
  $('mon-totals').textContent = `${s.totals.ok} ok · ${s.totals.errors} failed · ${s.totals.cancelled} cancelled · ${s.totals.rejected} refused (queue full) · ${s.totals.prompt_tokens} prompt / ${s.totals.completion_tokens} generated tokens`;

  fillList($('about-model'), [
    ['Model', s.model], ['Engine', s.engine], ['Context', `${s.context_length} tokens`],
    ['Uptime', `${Math.round(s.uptime_seconds)} s`],
  ]);
  fillList($('about-settings'), [
    ['Listening on', `${s.host} port ${s.settings.port}`], ['API key required', s.settings.api_key ? 'yes' : 'no'],
    ['CORS origin', s.settings.cors ?? 'off'], ['Largest request body', formatBytes(s.settings.max_body)],
    ['Queue', `${s.queue.max} waiting at most`],
  ]);
  const origin = location.origin;
  fillList($('about-addresses'), [
    ['Web app', origin + '/'], ['OpenAI base URL', origin + '/v1'], ['Anthropic base URL', origin],
    ['Health', origin + '/health'], ['Metrics (Prometheus)', origin + '/metrics'],
  ]);
}

// --- wiring -----------------------------------------------------------------------------------

function init() {
  for (const t of document.querySelectorAll('.tab')) t.addEventListener('click', () => showView(t.dataset.view));
  for (const id of ['temperature', 'top_p']) {
    const sync = () => { $(id + '-out').textContent = $(id).value; };
    $(id).addEventListener('input', sync);
    sync();
  }
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    const text = $('prompt').value.trim();
    if (!text || state.controller) return;
    $('prompt').value = '';
    send(text);
  });
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      $('composer').requestSubmit();
    }
  });
  $('stop').addEventListener('click', () => state.controller?.abort());
  $('clear').addEventListener('click', () => {
    state.controller?.abort();
    state.messages = [];
    $('messages').replaceChildren();
    $('chat-status').textContent = '';
  });
  $('api-key').value = localStorage.getItem('strata-api-key') ?? '';
  $('api-key').addEventListener('change', () => {
    localStorage.setItem('strata-api-key', $('api-key').value);
    refreshStatus();
  });
  refreshStatus();
}

init();
