// server.mjs: starts `strata serve --engine echo` (or the real engine with -m) on a free loopback
// port for a test file, and small helpers the tests share. STRATA_BIN names the binary (set by run.sh).
import { execFileSync, spawn } from 'node:child_process';
import { after, before } from 'node:test';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// Where a browser test saves a screenshot: docs/ only when asked (STRATA_UPDATE_SCREENSHOT=1, to
// refresh the picture in docs/server.md), else the build directory (STRATA_BUILD_DIR, which run.sh
// sets to the directory of the binary under test), so a test run never changes the source tree.
export function screenshotPath(name) {
  if (process.env.STRATA_UPDATE_SCREENSHOT === '1') return path.join(root, 'docs', name);
  const dir = process.env.STRATA_BUILD_DIR ?? path.dirname(process.env.STRATA_BIN ?? path.join(root, 'build', 'strata'));
  return path.join(dir, name);
}

// Tiny random-weight f32 models written by `strata synth` into a temporary folder, one per
// architecture: models[arch] is the path once made() has run (in a before hook); gone() removes them.
export function synthModels(archs) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'strata-synth-'));
  const models = {};
  return {
    models,
    made() {
      for (const arch of archs) {
        models[arch] = path.join(dir, `${arch}.gguf`);
        execFileSync(process.env.STRATA_BIN, ['synth', models[arch], '--arch', arch, '--preset', 'tiny', '--type', 'f32'], { stdio: 'ignore' });
      }
    },
    gone() { fs.rmSync(dir, { recursive: true, force: true }); },
  };
}

// The demo model shipped in models/.
export const demoModel = path.join(root, 'models', 'strata-demo-q8_0.gguf');

// For a test file: the synth models of archs made before its tests and removed after, and the
// demo model, as paths by name (models.qwen3, ..., models.demo).
export function testModels(archs) {
  const synth = synthModels(archs);
  before(() => {
    synth.made();
    synth.models.demo = demoModel;
  });
  after(() => synth.gone());
  return synth.models;
}

// `strata serve -m model` on the real engine with an openai client beside it (srv.client).
export async function serveModel(model, args = []) {
  const { default: OpenAI } = await import('openai');
  const srv = await startServer(['-m', model, ...args], {});
  srv.client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
  return srv;
}

export async function startServer(args = [], env = {}) {
  const bin = process.env.STRATA_BIN;
  if (!bin) throw new Error('STRATA_BIN is not set (run through tests/api/run.sh or ctest)');
  // The echo engine unless the caller names a model (-m): then the real one.
  const engine = args.includes('-m') ? [] : ['--engine', 'echo'];
  const child = spawn(bin, ['serve', ...engine, '--port', '0', ...args], {
    env: { ...process.env, STRATA_API_KEY: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const port = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/[^ ]*:(\d+)\//);
      if (m) resolve(Number(m[1]));
    });
    child.on('exit', (code) => reject(new Error(`strata serve exited with ${code}: ${stderr}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  return {
    port,
    base,
    child,
    stderr: () => stderr,
    stop: () => new Promise((resolve) => {
      if (child.exitCode !== null) return resolve(child.exitCode);
      child.on('exit', (code) => resolve(code));
      child.kill('SIGTERM');
    }),
  };
}

// POST raw bytes (Buffer or string) and return {status, headers, body(json or text)}.
export async function post(base, path, body, headers = {}) {
  const r = await fetch(base + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, headers: r.headers, text, json };
}

// A GET with any Host header (fetch does not let a caller choose Host).
export function getWithHost(port, path, host, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method: 'GET', headers: { Host: host, ...headers } }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

export async function status(base, headers = {}) {
  const r = await fetch(base + '/v1/status', { headers });
  return r.json();
}

// Polls /v1/status until pred(status) holds, at most `tries` times; returns the last status.
// Each try is a real request, so this waits on the server's state, not on a clock.
export async function until(base, pred, tries = 2000, headers = {}) {
  let s;
  for (let i = 0; i < tries; i++) {
    s = await status(base, headers);
    if (pred(s)) return s;
  }
  return s;
}
