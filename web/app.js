// app.js: the Strata web app. Chat streams from POST /v1/chat/completions (SSE, parsed here:
// reasoning_content goes into a folded "Thinking" block, the answer is rendered as Markdown by
// markdown.js, tool calls are shown as such); Stop aborts the request, which the server notices
// and cancels between tokens. Conversations are kept in this browser (localStorage: a list, new,
// delete); the last reply can be regenerated and a message of yours edited (the conversation goes
// on from there). Monitor samples /v1/status every second while the page is shown and plots the
// last five minutes: decode and prompt speed, queue and slot. About shows the model, the server's
// settings and its addresses. The whole conversation is sent on each turn; the server reuses the
// prefix it already holds.
'use strict';

const $ = (id) => document.getElementById(id);
const state = { messages: [], controller: null, monitorTimer: null, status: null, convs: [], current: null, samples: [] };
const STORE = 'strata-conversations';
const HISTORY_SECONDS = 300;

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

// --- conversations, kept in this browser -------------------------------------------------------

function loadConversations() {
  try { state.convs = JSON.parse(localStorage.getItem(STORE) ?? '[]'); } catch { state.convs = []; }
  if (!Array.isArray(state.convs)) state.convs = [];
  const last = localStorage.getItem(STORE + '-current');
  const conv = state.convs.find((c) => c.id === last) ?? state.convs[0];
  openConversation(conv ? conv.id : null);
}

function saveConversations() {
  try {
    localStorage.setItem(STORE, JSON.stringify(state.convs));
    if (state.current) localStorage.setItem(STORE + '-current', state.current);
  } catch { /* full: the conversation still lives on the page */ }
}

function currentConversation() {
  let c = state.convs.find((x) => x.id === state.current);
  if (!c) {
    c = { id: 'c' + Date.now().toString(36) + Math.random().toString(36).slice(2, 6), title: 'New chat', messages: [], updated: Date.now() };
    state.convs.unshift(c);
    state.current = c.id;
  }
  return c;
}

// The conversation's messages changed: keep them, title it after its first message, list it first.
function storeMessages() {
  const c = currentConversation();
  c.messages = state.messages;
  c.updated = Date.now();
  const first = state.messages.find((m) => m.role === 'user');
  c.title = first ? first.content.slice(0, 60) : 'New chat';
  state.convs = [c, ...state.convs.filter((x) => x !== c)];
  saveConversations();
  renderConversationList();
}

function openConversation(id) {
  state.controller?.abort();
  state.current = id;
  const c = state.convs.find((x) => x.id === id);
  state.messages = c ? c.messages : [];
  $('chat-status').textContent = '';
  renderMessages();
  renderConversationList();
  if (id) localStorage.setItem(STORE + '-current', id);
}

function deleteConversation(id) {
  state.convs = state.convs.filter((c) => c.id !== id);
  saveConversations();
  if (state.current === id) openConversation(state.convs[0]?.id ?? null);
  else renderConversationList();
}

function renderConversationList() {
  const items = state.convs.map((c) => {
    const li = el('li', c.id === state.current ? 'conv active' : 'conv');
    li.dataset.id = c.id;
    const open = el('button', 'conv-title', c.title || 'New chat');
    open.type = 'button';
    open.addEventListener('click', () => openConversation(c.id));
    const del = el('button', 'conv-delete', '×');
    del.type = 'button';
    del.title = 'Delete this conversation';
    del.addEventListener('click', () => deleteConversation(c.id));
    li.append(open, del);
    return li;
  });
  $('conv-list').replaceChildren(...items);
}

// --- messages ----------------------------------------------------------------------------------

function renderMessages() {
  const nodes = [];
  const lastAssistant = state.messages.map((m) => m.role).lastIndexOf('assistant');
  state.messages.forEach((m, i) => {
    if (m.role === 'user') nodes.push(userBubble(m, i));
    else if (m.role === 'assistant') {
      const v = assistantBubble();
      fillAssistant(v, { content: m.content, reasoning_content: m.reasoning ?? '', tool_calls: m.tool_calls ?? [] });
      if (m.reasoning) v.summary.textContent = 'Thought';
      v.stats.textContent = m.stats ?? '';
      if (i === lastAssistant && i === state.messages.length - 1) {
        const again = el('button', 'regenerate', 'Regenerate');
        again.type = 'button';
        again.addEventListener('click', regenerate);
        v.actions.append(again);
      }
      nodes.push(v.box);
    }
  });
  $('messages').replaceChildren(...nodes);
  scrollDown();
}

function userBubble(m, index) {
  const box = el('div', 'msg user');
  box.append(el('div', 'content', m.content));
  const edit = el('button', 'edit', 'Edit');
  edit.type = 'button';
  edit.addEventListener('click', () => editMessage(box, index));
  const actions = el('div', 'actions');
  actions.append(edit);
  box.append(actions);
  return box;
}

// Edits message index in place; saving sends it again, the conversation going on from there.
function editMessage(box, index) {
  if (state.controller) return;
  const area = el('textarea', 'edit-text');
  area.value = state.messages[index].content;
  area.rows = 3;
  const save = el('button', 'save', 'Send');
  save.type = 'button';
  const cancel = el('button', 'cancel', 'Cancel');
  cancel.type = 'button';
  cancel.addEventListener('click', renderMessages);
  save.addEventListener('click', () => {
    const text = area.value.trim();
    if (!text) return;
    state.messages = state.messages.slice(0, index);
    send(text);
  });
  const actions = el('div', 'actions');
  actions.append(save, cancel);
  box.replaceChildren(area, actions);
  area.focus();
}

function regenerate() {
  if (state.controller) return;
  if (state.messages.at(-1)?.role === 'assistant') state.messages.pop();
  renderMessages();
  generate();
}

function assistantBubble() {
  const box = el('div', 'msg assistant');
  const thinking = el('details', 'thinking');
  thinking.hidden = true;
  const summary = el('summary', null, 'Thinking…');
  const thinkText = el('div', 'think-text');
  thinking.append(summary, thinkText);
  const content = el('div', 'content markdown');
  const tools = el('div', 'tools');
  const stats = el('div', 'stats');
  const actions = el('div', 'actions');
  box.append(thinking, content, tools, stats, actions);
  return { box, thinking, summary, thinkText, content, tools, stats, actions };
}

function fillAssistant(view, reply) {
  if (reply.reasoning_content) {
    view.thinking.hidden = false;
    view.thinkText.textContent = reply.reasoning_content;
    if (reply.content || reply.tool_calls.length) view.summary.textContent = 'Thought';
  }
  view.content.replaceChildren(window.renderMarkdown(reply.content));
  if (reply.tool_calls.length)
    view.tools.replaceChildren(...reply.tool_calls.map((c) => el('div', 'tool-call', `${c.function.name}(${c.function.arguments})`)));
}

function numberField(id) {
  const v = $(id).value.trim();
  return v === '' ? undefined : Number(v);
}

function requestBody() {
  const messages = [];
  const system = $('system').value.trim();
  if (system) messages.push({ role: 'system', content: system });
  messages.push(...state.messages.map((m) => {
    const sent = { role: m.role, content: m.content };
    if (m.tool_calls) sent.tool_calls = m.tool_calls;
    return sent;
  }));
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
  storeMessages();
  renderMessages();
  await generate();
}

// A reply to the conversation as it stands, streamed into a new bubble.
async function generate() {
  const view = assistantBubble();
  view.box.classList.add('streaming');
  $('messages').append(view.box);
  scrollDown();
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
    fillAssistant(view, reply);
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
  const kept = { role: 'assistant', content: reply.content, stats: view.stats.textContent };
  if (reply.reasoning_content) kept.reasoning = reply.reasoning_content;
  if (reply.tool_calls.length) kept.tool_calls = reply.tool_calls;
  if (reply.content || reply.tool_calls.length) {
    state.messages.push(kept);
    storeMessages();
  }
  if (!view.box.classList.contains('error')) renderMessages();
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
  const now = Date.now();
  state.samples.push({ t: now, decode: s.speed.decode_tokens_per_second, prompt: s.speed.prompt_tokens_per_second,
    queue: s.queue.waiting, busy: s.busy ? 1 : 0 });
  while (state.samples.length && state.samples[0].t < now - HISTORY_SECONDS * 1000) state.samples.shift();
  if ($('view-monitor').classList.contains('active')) drawCharts();

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

// Line charts of the samples over the last HISTORY_SECONDS, drawn on a canvas (no library).
function drawChart(canvas, series, unit) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  canvas.width = w * dpr;
  canvas.height = h * dpr;
  const g = canvas.getContext('2d');
  g.scale(dpr, dpr);
  const css = getComputedStyle(document.documentElement);
  const muted = css.getPropertyValue('--muted').trim(), line = css.getPropertyValue('--line').trim();
  const now = Date.now(), span = HISTORY_SECONDS * 1000, pad = { l: 44, r: 8, t: 8, b: 18 };
  let max = 1;
  for (const sr of series) for (const p of state.samples) max = Math.max(max, p[sr.key] ?? 0);
  const x = (t) => pad.l + ((t - (now - span)) / span) * (w - pad.l - pad.r);
  const y = (v) => h - pad.b - (v / max) * (h - pad.t - pad.b);
  g.strokeStyle = line;
  g.fillStyle = muted;
  g.font = '11px system-ui, sans-serif';
  g.lineWidth = 1;
  for (const f of [0, 0.5, 1]) {
    g.beginPath();
    g.moveTo(pad.l, y(max * f));
    g.lineTo(w - pad.r, y(max * f));
    g.stroke();
    g.fillText((max * f).toFixed(max * f >= 10 ? 0 : 1), 4, y(max * f) + 4);
  }
  g.fillText(`-${HISTORY_SECONDS / 60} min`, pad.l, h - 4);
  g.fillText('now ' + unit, w - pad.r - 60, h - 4);
  for (const sr of series) {
    g.strokeStyle = sr.color;
    g.lineWidth = 2;
    g.beginPath();
    state.samples.forEach((p, i) => {
      const v = p[sr.key] ?? 0;
      if (i) g.lineTo(x(p.t), y(v)); else g.moveTo(x(p.t), y(v));
    });
    g.stroke();
  }
  canvas.dataset.samples = String(state.samples.length);
  canvas.dataset.max = String(max);
}

function drawCharts() {
  drawChart($('chart-speed'), [{ key: 'decode', color: '#2f5bd3' }, { key: 'prompt', color: '#d97706' }], 'tokens/s');
  drawChart($('chart-queue'), [{ key: 'queue', color: '#7c3aed' }, { key: 'busy', color: '#059669' }], 'requests');
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
  $('clear').addEventListener('click', () => openConversation(null));
  $('new-chat').addEventListener('click', () => openConversation(null));
  $('api-key').value = localStorage.getItem('strata-api-key') ?? '';
  $('api-key').addEventListener('change', () => {
    localStorage.setItem('strata-api-key', $('api-key').value);
    refreshStatus();
  });
  loadConversations();
  refreshStatus();
  // the Monitor's history: a sample a second while the page is shown
  setInterval(() => { if (document.visibilityState === 'visible' && !state.monitorTimer) refreshStatus(); }, 1000);
}

init();
