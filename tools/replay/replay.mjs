#!/usr/bin/env node
// replay: a multi-turn coding-agent workload against an OpenAI-compatible ds41-serve endpoint, with the
// official `openai` client. Each session sends a system prompt and a task, then every turn appends the
// assistant's reply and a synthetic tool result (same x-session-id throughout), streamed so TTFT is
// measured client-side. One line per turn, then a summary. Run it via scripts/replay.
import { parseArgs } from 'node:util';
import { OpenAI } from './load_openai.mjs';

const USAGE = `usage: scripts/replay [options]
  --endpoint URL      OpenAI base URL (default http://127.0.0.1:8000/v1)
  --api-key KEY       API key (default $OPENAI_API_KEY or "sk-ds41")
  --model NAME        model (default deepseek-v4.1-flash)
  --turns N           turns per session (default 6)
  --sessions S        concurrent sessions (default 1)
  --tool-tokens C     approx size of each appended tool result, in characters (default 400)
  --max-tokens M      max_tokens per turn (default 32)
  --seed N            seed for the synthetic content and the sampler (default 1)
  --thinking on|off   thinking mode (default off)
  --json              also print one JSON object per turn (prefix "json ")
  -h, --help`;

let opts;
try {
  ({ values: opts } = parseArgs({
    options: {
      endpoint: { type: 'string', default: 'http://127.0.0.1:8000/v1' },
      'api-key': { type: 'string', default: process.env.OPENAI_API_KEY || 'sk-ds41' },
      model: { type: 'string', default: 'deepseek-v4.1-flash' },
      turns: { type: 'string', default: '6' },
      sessions: { type: 'string', default: '1' },
      'tool-tokens': { type: 'string', default: '400' },
      'max-tokens': { type: 'string', default: '32' },
      seed: { type: 'string', default: '1' },
      thinking: { type: 'string', default: 'off' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    allowPositionals: false,
  }));
} catch (e) {
  console.error(`replay: ${e.message}\n${USAGE}`);
  process.exit(2);
}
if (opts.help) {
  console.log(USAGE);
  process.exit(0);
}
function int(name, min) {
  const v = Number(opts[name]);
  if (!Number.isInteger(v) || v < min) {
    console.error(`replay: --${name} must be an integer >= ${min} (got "${opts[name]}")`);
    process.exit(2);
  }
  return v;
}
const turns = int('turns', 1), sessions = int('sessions', 1), toolChars = int('tool-tokens', 0);
const maxTokens = int('max-tokens', 1), seed = int('seed', 0);
if (!['on', 'off'].includes(opts.thinking)) {
  console.error(`replay: --thinking must be on or off (got "${opts.thinking}")`);
  process.exit(2);
}
const thinking = { type: opts.thinking === 'on' ? 'enabled' : 'disabled' };

// mulberry32: a small seeded PRNG, so a --seed gives the same synthetic workload.
function rng(s) {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const WORDS = ('int return const auto std vector string size_t if else for while struct class namespace '
  + 'void bool true false nullptr template typename static inline include error warning note test build '
  + 'cache prefix token encoder decoder router session request reply status ok failed expected line file')
  .split(' ');
const FILES = ['util/strings.cc', 'router/core.cc', 'engine/attention.cc', 'cache_service/store.cc',
  'http/server.cc', 'tests/cache/prefix_test.cc', 'decoder_node/main.cc', 'encoder_node/main.cc'];
const TOOLS = [
  { type: 'function', function: { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
  { type: 'function', function: { name: 'grep', description: 'Search the repository', parameters: { type: 'object', properties: { pattern: { type: 'string' } }, required: ['pattern'] } } },
  { type: 'function', function: { name: 'run_tests', description: 'Run the tests', parameters: { type: 'object', properties: { filter: { type: 'string' } } } } },
];

function toolResult(r, chars, turn) {
  const file = FILES[Math.floor(r() * FILES.length)];
  let s = `$ cat ${file}  # turn ${turn}\n`;
  let line = 1;
  while (s.length < chars) {
    const n = 3 + Math.floor(r() * 8);
    const ws = [];
    for (let i = 0; i < n; i++) ws.push(WORDS[Math.floor(r() * WORDS.length)]);
    s += `${String(line++).padStart(4)}  ${ws.join(' ')};\n`;
  }
  return s.slice(0, Math.max(chars, 1));
}

const client = new OpenAI({ baseURL: opts.endpoint, apiKey: opts['api-key'], maxRetries: 0, timeout: 300_000 });
const runId = `${Date.now().toString(36)}-${process.pid}`;
const rows = [];

function fmt(n, w) { return String(n).padStart(w); }
function printHeader() {
  console.log(`${'session'.padEnd(8)} ${'turn'.padStart(4)} ${'prompt'.padStart(7)} ${'hit'.padStart(7)} ${'miss'.padStart(6)} `
    + `${'computed'.padStart(8)} ${'enc_rep'.padStart(7)} ${'dec_rep'.padStart(7)} ${'ttft_ms'.padStart(8)} ${'srv_ttft'.padStart(8)} `
    + `${'total_ms'.padStart(8)} ${'out'.padStart(4)} ${'ctx_hit'.padStart(7)}  prefix/swa  decoder (placement)`);
}

async function runSession(si) {
  const r = rng(seed * 1000003 + si);
  const sessionId = `replay-${runId}-s${si}`;
  const task = FILES[Math.floor(r() * FILES.length)];
  const messages = [
    { role: 'system', content: 'You are a coding agent. You work in a C++ repository through the tools read_file, grep and run_tests. '
      + 'Think step by step, call one tool per turn, and stop when the tests pass.' },
    { role: 'user', content: `Session ${si}: the tests in ${task} fail after the last refactor. Find the cause and fix it.` },
  ];
  let context = 0;  // the previous turn's prompt and reply as fed (all generated tokens but the last)
  for (let turn = 1; turn <= turns; turn++) {
    const t0 = performance.now();
    let ttft = null, content = '', reasoning = '', usage = null, finish = null;
    const calls = [];
    const stream = await client.chat.completions.create(
      { model: opts.model, messages, tools: TOOLS, max_tokens: maxTokens, seed: seed + si * 1000 + turn, stream: true,
        stream_options: { include_usage: true }, thinking },
      { headers: { 'x-session-id': sessionId } },
    );
    for await (const ch of stream) {
      const c = ch.choices?.[0];
      const d = c?.delta;
      if (d) {
        if ((d.content || d.reasoning_content || d.tool_calls?.length) && ttft === null) ttft = performance.now() - t0;
        if (d.content) content += d.content;
        if (d.reasoning_content) reasoning += d.reasoning_content;
        for (const tc of d.tool_calls || []) {
          const i = tc.index ?? calls.length;
          calls[i] ??= { id: tc.id, type: 'function', function: { name: '', arguments: '' } };
          if (tc.id) calls[i].id = tc.id;
          if (tc.function?.name) calls[i].function.name += tc.function.name;
          if (tc.function?.arguments) calls[i].function.arguments += tc.function.arguments;
        }
      }
      if (c?.finish_reason) finish = c.finish_reason;
      if (ch.usage) usage = ch.usage;
    }
    const total = performance.now() - t0;
    if (!usage) throw new Error(`session ${si} turn ${turn}: no usage in the final chunk`);
    const x = usage.ds41 || {};
    const row = {
      session: si, turn, prompt: usage.prompt_tokens, hit: usage.prompt_cache_hit_tokens ?? 0,
      miss: usage.prompt_cache_miss_tokens ?? 0, completion: usage.completion_tokens,
      computed: x.computed_tokens ?? 0, enc_replay: x.encoder_replay_tokens ?? 0, dec_replay: x.decoder_replay_tokens ?? 0,
      ttft_ms: ttft ?? total, server_ttft_ms: (x.ttft_seconds ?? NaN) * 1000, total_ms: total, finish,
      placement: x.placement_reason, prefix_source: x.prefix_source, swa_source: x.swa_source, decoder: x.decoder, encoder: x.encoder,
      context,
    };
    context = usage.prompt_tokens + usage.completion_tokens - 1;
    rows.push(row);
    console.log(`${('s' + si).padEnd(8)} ${fmt(turn, 4)} ${fmt(row.prompt, 7)} ${fmt(row.hit, 7)} ${fmt(row.miss, 6)} `
      + `${fmt(row.computed, 8)} ${fmt(row.enc_replay, 7)} ${fmt(row.dec_replay, 7)} ${fmt(row.ttft_ms.toFixed(1), 8)} `
      + `${fmt(row.server_ttft_ms.toFixed(1), 8)} ${fmt(row.total_ms.toFixed(0), 8)} ${fmt(row.completion, 4)} `
      + `${fmt(row.context ? ((100 * row.hit) / row.context).toFixed(1) + '%' : '-', 7)}  `
      + `${row.prefix_source}/${row.swa_source}  ${row.decoder} (${row.placement})`);
    if (opts.json) console.log('json ' + JSON.stringify(row));

    // The next turn: the assistant's reply, then a tool result (for its tool calls, or a synthetic one).
    const assistant = { role: 'assistant', content: content || (calls.length ? null : '') };
    if (reasoning) assistant.reasoning_content = reasoning;
    if (calls.length) {
      assistant.tool_calls = calls.filter(Boolean);
      messages.push(assistant);
      for (const tc of assistant.tool_calls) messages.push({ role: 'tool', tool_call_id: tc.id, content: toolResult(r, toolChars, turn) });
    } else {
      // The model is free-running; make the turn look like an agent step anyway: a tool call it
      // "made" would need the model to emit it, so the result arrives as the next user message.
      messages.push(assistant);
      messages.push({ role: 'user', content: `Tool output:\n${toolResult(r, toolChars, turn)}` });
    }
  }
}

printHeader();
const t0 = performance.now();
const results = await Promise.allSettled(Array.from({ length: sessions }, (_, i) => runSession(i)));
const wall = (performance.now() - t0) / 1000;
let failed = 0;
for (const [i, res] of results.entries()) {
  if (res.status === 'rejected') {
    failed++;
    console.error(`session ${i} failed: ${res.reason?.status ? `HTTP ${res.reason.status} ` : ''}${res.reason?.message ?? res.reason}`);
  }
}
const sum = (f, rs = rows) => rs.reduce((a, r) => a + f(r), 0);
const mean = (f, rs) => (rs.length ? sum(f, rs) / rs.length : NaN);
const later = rows.filter((r) => r.turn > 1), first = rows.filter((r) => r.turn === 1);
const prompt = sum((r) => r.prompt), hit = sum((r) => r.hit);
const pct = (a, b) => (b ? ((100 * a) / b).toFixed(1) + '%' : 'n/a');
console.log('');
console.log(`summary: ${rows.length} turns in ${sessions} session(s), ${wall.toFixed(1)} s wall, ${failed} failed session(s)`);
console.log(`  cache hit ratio: ${pct(hit, prompt)} of ${prompt} prompt tokens (turns > 1: ${pct(sum((r) => r.hit, later), sum((r) => r.prompt, later))})`);
// Session reuse: how much of what the previous turn already computed (its prompt and its reply as
// fed) the next turn hit; 100 % when replies are spliced back (docs/session_reuse.md).
const ctxHit = (r) => Math.min(r.hit, r.context);
const lowest = later.length ? Math.min(...later.map((r) => ctxHit(r) / r.context)) : NaN;
console.log(`  previous-context hit (turns > 1): ${pct(sum(ctxHit, later), sum((r) => r.context, later))} `
  + `of ${sum((r) => r.context, later)} tokens (lowest turn: ${later.length ? pct(lowest, 1) : 'n/a'})`);
console.log(`  encoder-computed tokens: ${sum((r) => r.computed)}, replay tokens: encoder ${sum((r) => r.enc_replay)}, decoder ${sum((r) => r.dec_replay)}`);
console.log(`  mean TTFT (client): ${mean((r) => r.ttft_ms, rows).toFixed(1)} ms (turn 1: ${mean((r) => r.ttft_ms, first).toFixed(1)} ms, turns > 1: ${mean((r) => r.ttft_ms, later).toFixed(1)} ms)`);
console.log(`  mean TTFT (server ds41.ttft_seconds): ${mean((r) => r.server_ttft_ms, rows).toFixed(1)} ms`);
process.exit(failed ? 1 : 0);
