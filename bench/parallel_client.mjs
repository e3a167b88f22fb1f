// parallel_client.mjs: N concurrent streaming chat requests against an OpenAI-compatible server
// (strata serve, llama-server), or the same N one after the other (--serial), and what they took.
//   node bench/parallel_client.mjs --url http://127.0.0.1:8080 -n 4 --tokens 128 [--serial] [--json] [--eos]
// Each stream asks a different question at temperature 0 with max_tokens = --tokens and ignore_eos
// (both servers' extension: every stream decodes exactly --tokens tokens, whatever the model says;
// --eos lets the streams end at the model's end of turn instead); the aggregate
// decode rate is the completion tokens of all streams over the wall time from the first request to
// the last end (prompt reading included, so short prompts are used). Per stream it prints the time
// to the first token and to the end. No dependencies beyond node 20 (fetch).
const arg = (k, d) => { const i = process.argv.indexOf(k); return i > 0 ? process.argv[i + 1] : d; };
const url = arg('--url', 'http://127.0.0.1:8080');
const n = Number(arg('-n', '4'));
const tokens = Number(arg('--tokens', '128'));
const serial = process.argv.includes('--serial');
const json = process.argv.includes('--json');
const eos = process.argv.includes('--eos');

async function stream(i, t0) {
  const r = await fetch(url + '/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'm', stream: true, temperature: 0, max_tokens: tokens, stream_options: { include_usage: true }, ignore_eos: !eos,
      messages: [{ role: 'user', content: `Question ${i}: tell me about word number ${i} and what it means.` }],
    }),
  });
  if (!r.ok) throw new Error(`${r.status} ${await r.text()}`);
  const dec = new TextDecoder();
  let buf = '', first = null, pieces = 0, usage = null;
  for await (const chunk of r.body) {
    buf += dec.decode(chunk, { stream: true });
    let k;
    while ((k = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, k);
      buf = buf.slice(k + 2);
      const line = ev.split('\n').find((l) => l.startsWith('data: '));
      if (!line || line === 'data: [DONE]') continue;
      const o = JSON.parse(line.slice(6));
      if (o.usage) usage = o.usage;
      if (o.choices?.[0]?.delta?.content || o.choices?.[0]?.delta?.reasoning_content) {
        pieces++;
        first ??= performance.now() - t0;
      }
    }
  }
  return { i, first, end: performance.now() - t0, tokens: usage?.completion_tokens ?? pieces };
}

const t0 = performance.now();
let res;
if (serial) {
  res = [];
  for (let i = 0; i < n; i++) res.push(await stream(i, t0));
} else {
  res = await Promise.all(Array.from({ length: n }, (_, i) => stream(i, t0)));
}
const wall = (performance.now() - t0) / 1000;
const total = res.reduce((a, r) => a + r.tokens, 0);
if (json) {
  console.log(JSON.stringify({ n, serial, wall, tokens: total, tok_s: total / wall, streams: res }));
} else {
  for (const r of res) console.log(`stream ${r.i}: first token ${r.first?.toFixed(0)} ms, end ${r.end.toFixed(0)} ms, ${r.tokens} tokens`);
  console.log(`${serial ? 'serial' : 'concurrent'} ${n}: ${total} tokens in ${wall.toFixed(2)} s = ${(total / wall).toFixed(1)} tok/s`);
}
