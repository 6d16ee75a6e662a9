// Node side of scripts/bench.sh: redlock 4 (on ioredis 5) and redis-semaphore's Mutex and
// Semaphore through the same scenarios as bench/rust, async in one process on one ioredis
// client. Writes one JSON object per run to --out; bench/report.py makes tables and plots.
//
//   node bench.js --url redis://127.0.0.1:PORT --out results/node.jsonl [--scale 1.0]
//                 [--only redlock,redis-semaphore] [--scenarios raw,s1,s2,s3,s4,s5]
'use strict';

const fs = require('fs');
const Redis = require('ioredis');
const Redlock = require('redlock');
const { Mutex, Semaphore } = require('redis-semaphore');

const GRACE_MS = 10000;
const CALLER_RETRY_MS = 10;
const LEASE_MS = 30000;
const RAW_SCRIPT = "return redis.call('exists', KEYS[1])";
const T0 = process.hrtime.bigint();
const nowNs = () => Number(process.hrtime.bigint() - T0);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function parseArgs() {
  const args = { scale: 1, scenarios: 'raw,s1,s2,s3,s4,s5', only: null };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (flag === '--url') args.url = value;
    else if (flag === '--out') args.out = value;
    else if (flag === '--scale') args.scale = Number(value);
    else if (flag === '--only') args.only = value.split(',');
    else if (flag === '--scenarios') args.scenarios = value;
    else throw new Error(`unknown argument ${flag}`);
  }
  if (!args.url || !args.out) throw new Error('--url and --out are required');
  args.scenarios = new Set(args.scenarios.split(','));
  return args;
}

async function commandCounts(info) {
  const text = await info.info('commandstats');
  const out = {};
  for (const line of text.split('\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

function commandDelta(before, after) {
  const out = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] || 0);
    if (k !== 'info' && d > 0) out[k] = d;
  }
  return out;
}

// Resolves with the results, or with null for workers still running at the deadline.
function settleBy(promises, deadlineMs) {
  let timer;
  const deadline = new Promise((resolve) => {
    timer = setTimeout(() => resolve('timeout'), deadlineMs);
  });
  const results = promises.map(() => null);
  const all = Promise.all(promises.map((p, i) => p.then((r) => { results[i] = r; })));
  return Promise.race([all, deadline]).then((r) => {
    clearTimeout(timer);
    return { results, timedOut: r === 'timeout' };
  });
}

async function contended(makeWorker, info, workers, holdMs, windowS) {
  const ws = [];
  for (let w = 0; w < workers; w++) ws.push(makeWorker());
  const before = await commandCounts(info);
  const t0 = nowNs();
  const end = t0 + windowS * 1e9;
  const run = async (w, worker) => {
    const out = { events: [], errors: 0, firstError: null };
    for (;;) {
      const requested = nowNs();
      if (requested >= end) break;
      try {
        await worker.acquire();
      } catch (e) {
        out.errors += 1;
        out.firstError = out.firstError || String(e);
        await sleep(CALLER_RETRY_MS);
        continue;
      }
      const acquired = nowNs();
      if (holdMs) await sleep(holdMs);
      const released = nowNs();
      try {
        await worker.release();
      } catch (e) {
        out.errors += 1;
        out.firstError = out.firstError || String(e);
      }
      out.events.push([w, requested - t0, acquired - t0, released - t0]);
    }
    return out;
  };
  const { results, timedOut } = await settleBy(ws.map((worker, w) => run(w, worker)), windowS * 1000 + GRACE_MS);
  const after = await commandCounts(info);
  const done = results.filter(Boolean);
  return {
    window_s: windowS,
    events: done.flatMap((r) => r.events),
    errors: done.reduce((n, r) => n + r.errors, 0),
    first_error: (done.find((r) => r.firstError) || {}).firstError || null,
    timed_out: timedOut,
    commands: commandDelta(before, after),
  };
}

async function uncontended(makeWorker, info, windowS, max) {
  const worker = makeWorker();
  const before = await commandCounts(info);
  for (let i = 0; i < 20; i++) {
    await worker.acquire();
    await worker.release();
  }
  const latencies = [];
  const start = nowNs();
  while (latencies.length < max && nowNs() - start < windowS * 1e9) {
    const t = nowNs();
    await worker.acquire();
    await worker.release();
    latencies.push(nowNs() - t);
  }
  const after = await commandCounts(info);
  return { window_s: windowS, latencies_ns: latencies, errors: 0, first_error: null, timed_out: false,
    commands: commandDelta(before, after), commands_acquisitions: latencies.length + 20 };
}

async function manyKeys(makeWorkerFor, info, prefix, tasks, keys, windowS) {
  const before = await commandCounts(info);
  const t0 = nowNs();
  const end = t0 + windowS * 1e9;
  const run = async (t) => {
    const out = { inWindow: 0, total: 0, errors: 0, firstError: null };
    for (let i = 0; nowNs() < end; i++) {
      const key = `${prefix}:${(t * 7919 + i * 104729) % keys}`;
      try {
        const worker = makeWorkerFor(key);
        await worker.acquire();
        const acquired = nowNs();
        await worker.release();
        out.total += 1;
        if (acquired < end) out.inWindow += 1;
      } catch (e) {
        out.errors += 1;
        out.firstError = out.firstError || String(e);
        await sleep(CALLER_RETRY_MS);
      }
    }
    return out;
  };
  const runs = [];
  for (let t = 0; t < tasks; t++) runs.push(run(t));
  const { results, timedOut } = await settleBy(runs, windowS * 1000 + GRACE_MS);
  const after = await commandCounts(info);
  const done = results.filter(Boolean);
  return {
    window_s: windowS,
    acquired_in_window: done.reduce((n, r) => n + r.inWindow, 0),
    acquired_total: done.reduce((n, r) => n + r.total, 0),
    errors: done.reduce((n, r) => n + r.errors, 0),
    first_error: (done.find((r) => r.firstError) || {}).firstError || null,
    timed_out: timedOut,
    commands: commandDelta(before, after),
  };
}

async function rawRtt(client, windowS) {
  client.defineCommand('rawBench', { numberOfKeys: 1, lua: RAW_SCRIPT });
  for (let i = 0; i < 200; i++) await client.rawBench('kb:raw:node');
  const single = [];
  const pair = [];
  const start = nowNs();
  while (nowNs() - start < windowS * 1e9 && pair.length < 20000) {
    let t = nowNs();
    await client.rawBench('kb:raw:node');
    single.push(nowNs() - t);
    t = nowNs();
    await client.rawBench('kb:raw:node');
    await client.rawBench('kb:raw:node');
    pair.push(nowNs() - t);
  }
  return { single_ns: single, pair_ns: pair };
}

// --- the libraries -----------------------------------------------------------------------------

function redlockWorker(redlock, key) {
  let lock = null;
  return {
    async acquire() { lock = await redlock.lock(key, LEASE_MS); },
    async release() { await lock.unlock(); lock = null; },
  };
}

function mutexWorker(client, key, options) {
  const mutex = new Mutex(client, key, options);
  return { acquire: () => mutex.acquire(), release: () => mutex.release() };
}

function semaphoreWorker(client, key, permits, options) {
  const semaphore = new Semaphore(client, key, permits, options);
  return { acquire: () => semaphore.acquire(), release: () => semaphore.release() };
}

function variants(client) {
  const redlock = new Redlock([client]);
  const tuned = { retryInterval: 1 };
  return [
    { lib: 'redlock', variant: 'default', label: 'redlock', kind: 'lock', tuned: null,
      note: 'script polling, retry after 100-300 ms, gives up after 10 retries (the caller retries)',
      make: (key) => redlockWorker(redlock, key) },
    { lib: 'redis-semaphore', variant: 'default', label: 'redis-semaphore Mutex', kind: 'lock', tuned: null,
      note: 'SET NX polling every 10 ms', make: (key) => mutexWorker(client, key) },
    { lib: 'redis-semaphore', variant: 'tuned', label: 'redis-semaphore Mutex (poll 1 ms)', kind: 'lock',
      tuned: 'retryInterval 1 ms', note: 'SET NX polling every 1 ms', make: (key) => mutexWorker(client, key, tuned) },
    { lib: 'redis-semaphore', variant: 'semaphore', label: 'redis-semaphore Semaphore', kind: 'semaphore',
      tuned: null, note: 'zset script polling every 10 ms',
      make: (key, permits) => semaphoreWorker(client, key, permits) },
    { lib: 'redis-semaphore', variant: 'semaphore-tuned', label: 'redis-semaphore Semaphore (poll 1 ms)',
      kind: 'semaphore', tuned: 'retryInterval 1 ms', note: 'zset script polling every 1 ms',
      make: (key, permits) => semaphoreWorker(client, key, permits, tuned) },
  ];
}

function summary(d) {
  let s = '';
  if (d.events) s += `${d.events.length} acquisitions`;
  if (d.latencies_ns && d.latencies_ns.length) {
    const v = [...d.latencies_ns].sort((a, b) => a - b);
    s += `p50 ${(v[v.length >> 1] / 1e3).toFixed(0)} us (${v.length} samples)`;
  }
  if (d.acquired_in_window !== undefined) s += `${(d.acquired_in_window / d.window_s).toFixed(0)}/s`;
  if (d.errors) s += `, ${d.errors} errors (first: ${d.first_error})`;
  if (d.timed_out) s += ', TIMED OUT';
  return s;
}

async function main() {
  const args = parseArgs();
  const secs = (base) => Math.max(0.2, base * args.scale);
  const client = new Redis(args.url);
  const info = new Redis(args.url);
  const out = fs.openSync(args.out, 'a');
  const run = String(process.pid);
  const write = (v, scenario, params, data) => {
    const record = { runner: 'node', scenario };
    if (v) for (const k of ['lib', 'variant', 'label', 'kind', 'tuned', 'note']) record[k] = v[k];
    fs.writeSync(out, `${JSON.stringify({ ...record, ...params, ...data })}\n`);
  };
  const log = (label, what, data) => process.stderr.write(`node: ${label.padEnd(34)} ${what}: ${summary(data)}\n`);

  if (args.scenarios.has('raw')) {
    const data = await rawRtt(client, secs(1.5));
    write(null, 'raw_rtt_runtime', { lib: 'raw', label: 'raw EVALSHA (ioredis)' }, data);
    process.stderr.write(`node: raw EVALSHA (ioredis): ${data.pair_ns.length} samples\n`);
  }
  for (const v of variants(client)) {
    if (args.only && !args.only.includes(v.lib)) continue;
    const key = (sc) => `kb:${run}:${v.lib}:${v.variant}:${sc}`;
    if (v.kind === 'lock') {
      if (args.scenarios.has('s1')) {
        const data = await uncontended(() => v.make(key('s1')), info, secs(1.5), 20000);
        write(v, 's1', { workers: 1 }, data);
        log(v.label, 's1 uncontended', data);
      }
      if (args.scenarios.has('s2')) {
        for (const n of [2, 8, 32]) {
          for (const holdMs of [0, 1]) {
            const k = `${key('s2')}:${n}:${holdMs}`;
            const data = await contended(() => v.make(k), info, n, holdMs, secs(2.0));
            write(v, 's2', { workers: n, hold_ms: holdMs }, data);
            log(v.label, `s2 N=${String(n).padEnd(2)} hold=${holdMs}ms`, data);
          }
        }
      }
      if (args.scenarios.has('s3')) {
        const data = await manyKeys((k) => v.make(k), info, key('s3'), 256, 10000, secs(3.0));
        write(v, 's3', { workers: 256, keys: 10000 }, data);
        log(v.label, 's3 256 workers/10 000 keys', data);
      }
      if (args.scenarios.has('s4')) {
        const data = await contended(() => v.make(key('s4')), info, 8, 1, secs(3.0));
        write(v, 's4', { workers: 8, hold_ms: 1 }, data);
        log(v.label, 's4 fairness N=8 hold=1ms', data);
      }
    } else if (args.scenarios.has('s5')) {
      const data = await contended(() => v.make(key('s5'), 4), info, 16, 1, secs(3.0));
      write(v, 's5', { workers: 16, permits: 4, hold_ms: 1 }, data);
      log(v.label, 's5 semaphore P=4 N=16', data);
    }
  }
  fs.closeSync(out);
  // Refresh timers of abandoned workers must not keep the process alive.
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`node: ${e.stack || e}\n`);
  process.exit(1);
});
