"""Python side of scripts/bench.sh: redis-py's Lock (asyncio) and python-redis-lock
(processes) through the same scenarios as bench/rust. Writes one JSON object per run to
--out; bench/report.py turns them into tables and plots.

    python bench.py --url redis://127.0.0.1:PORT --out results/python.jsonl [--scale 1.0]
                    [--only redis-py,python-redis-lock] [--scenarios raw,s1,s2,s3,s4]
"""

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import sys
import threading
import time

import redis
import redis.asyncio
import redis_lock

GRACE_S = 10.0
CALLER_RETRY_S = 0.010
RAW_SCRIPT = "return redis.call('exists', KEYS[1])"


def now_ns():
    # CLOCK_MONOTONIC: the same clock in every process of this machine.
    return time.monotonic_ns()


def command_counts(client):
    stats = client.info("commandstats")
    return {k[len("cmdstat_"):]: v["calls"] for k, v in stats.items() if k.startswith("cmdstat_")}


def command_delta(before, after):
    return {k: v - before.get(k, 0) for k, v in after.items()
            if k != "info" and v - before.get(k, 0) > 0}


# --- redis-py's asyncio Lock --------------------------------------------------------------

class RedisPyWorker:
    """One worker's redis-py Lock: documented defaults (timeout=None, blocking, sleep=0.1)
    unless `sleep` is the tuned setting."""

    def __init__(self, client, key, sleep):
        kwargs = {} if sleep is None else {"sleep": sleep}
        self.lock = client.lock(key, **kwargs)

    async def acquire(self):
        if not await self.lock.acquire():
            raise RuntimeError("acquire returned False")

    async def release(self):
        await self.lock.release()


async def async_contended(make_worker, info, workers, hold_s, window_s):
    ready = asyncio.Barrier(workers + 1)
    start = asyncio.get_running_loop().create_future()

    async def run(w):
        worker = make_worker()
        await ready.wait()
        t0 = await start
        end = t0 + int(window_s * 1e9)
        events, errors, first_error = [], 0, None
        while True:
            requested = now_ns()
            if requested >= end:
                break
            try:
                await worker.acquire()
            except Exception as e:  # noqa: BLE001 - counted and reported
                errors += 1
                first_error = first_error or repr(e)
                await asyncio.sleep(CALLER_RETRY_S)
                continue
            acquired = now_ns()
            if hold_s:
                await asyncio.sleep(hold_s)
            released = now_ns()
            try:
                await worker.release()
            except Exception as e:  # noqa: BLE001
                errors += 1
                first_error = first_error or repr(e)
            events.append([w, requested - t0, acquired - t0, released - t0])
        return events, errors, first_error

    tasks = [asyncio.create_task(run(w)) for w in range(workers)]
    await ready.wait()
    before = command_counts(info)
    t0 = now_ns()
    start.set_result(t0)
    done, pending = await asyncio.wait(tasks, timeout=window_s + GRACE_S)
    for t in pending:
        t.cancel()
    after = command_counts(info)
    events, errors, first_error = [], 0, None
    for t in done:
        if t.exception() is not None:
            errors += 1
            first_error = first_error or repr(t.exception())
            continue
        e, n, f = t.result()
        events += e
        errors += n
        first_error = first_error or f
    return {"window_s": window_s, "events": events, "errors": errors, "first_error": first_error,
            "timed_out": bool(pending), "commands": command_delta(before, after),
            "process_model": "asyncio tasks, one process"}


async def async_uncontended(make_worker, info, window_s, max_samples):
    worker = make_worker()
    before = command_counts(info)
    for _ in range(20):
        await worker.acquire()
        await worker.release()
    latencies = []
    start = time.monotonic()
    while len(latencies) < max_samples and time.monotonic() - start < window_s:
        t = now_ns()
        await worker.acquire()
        await worker.release()
        latencies.append(now_ns() - t)
    after = command_counts(info)
    return {"window_s": window_s, "latencies_ns": latencies, "errors": 0, "first_error": None,
            "timed_out": False, "commands": command_delta(before, after),
            "commands_acquisitions": len(latencies) + 20, "process_model": "asyncio, one process"}


async def async_many_keys(make_worker_for, info, prefix, tasks, keys, window_s):
    ready = asyncio.Barrier(tasks + 1)
    start = asyncio.get_running_loop().create_future()

    async def run(t):
        await ready.wait()
        t0 = await start
        end = t0 + int(window_s * 1e9)
        in_window = total = errors = 0
        first_error = None
        i = 0
        while now_ns() < end:
            key = f"{prefix}:{(t * 7919 + i * 104729) % keys}"
            i += 1
            try:
                worker = make_worker_for(key)
                await worker.acquire()
                acquired = now_ns()
                await worker.release()
                total += 1
                in_window += acquired < end
            except Exception as e:  # noqa: BLE001
                errors += 1
                first_error = first_error or repr(e)
                await asyncio.sleep(CALLER_RETRY_S)
        return in_window, total, errors, first_error

    aws = [asyncio.create_task(run(t)) for t in range(tasks)]
    await ready.wait()
    before = command_counts(info)
    start.set_result(now_ns())
    done, pending = await asyncio.wait(aws, timeout=window_s + GRACE_S)
    for t in pending:
        t.cancel()
    after = command_counts(info)
    in_window = total = errors = 0
    first_error = None
    for t in done:
        if t.exception() is not None:
            errors += 1
            first_error = first_error or repr(t.exception())
            continue
        w, n, e, f = t.result()
        in_window, total, errors = in_window + w, total + n, errors + e
        first_error = first_error or f
    return {"window_s": window_s, "acquired_in_window": in_window, "acquired_total": total,
            "errors": errors, "first_error": first_error, "timed_out": bool(pending),
            "commands": command_delta(before, after), "process_model": "asyncio tasks, one process"}


async def raw_rtt(url, window_s):
    """redis-py's own EVALSHA round trip (asyncio), to show the runtime's share."""
    client = redis.asyncio.Redis.from_url(url)
    script = client.register_script(RAW_SCRIPT)
    for _ in range(200):
        await script(keys=["kb:raw:py"])
    single, pair = [], []
    start = time.monotonic()
    while time.monotonic() - start < window_s and len(pair) < 20000:
        t = now_ns()
        await script(keys=["kb:raw:py"])
        single.append(now_ns() - t)
        t = now_ns()
        await script(keys=["kb:raw:py"])
        await script(keys=["kb:raw:py"])
        pair.append(now_ns() - t)
    await client.aclose()
    return {"single_ns": single, "pair_ns": pair}


# --- python-redis-lock, one process per worker ---------------------------------------------

def prl_process(url, key_of, threads, hold_s, window_s, barrier, start_ns, queue, first_index, mode):
    """A process of `threads` workers. mode: 'contended' (every worker on one key, events)
    or 'keys' (each lock+unlock on another key, counts)."""
    client = redis.StrictRedis.from_url(url)

    def run(w):
        out = {"events": [], "errors": 0, "first_error": None, "in_window": 0, "total": 0}
        lock = redis_lock.Lock(client, key_of(0)) if mode == "contended" else None
        barrier.wait()
        while start_ns.value == 0:
            time.sleep(0.0005)
        t0 = start_ns.value
        end = t0 + int(window_s * 1e9)
        i = 0
        while True:
            requested = now_ns()
            if requested >= end:
                break
            try:
                if mode == "keys":
                    lock = redis_lock.Lock(client, key_of((w * 7919 + i * 104729)))
                    i += 1
                lock.acquire()
                acquired = now_ns()
                if hold_s:
                    time.sleep(hold_s)
                released = now_ns()
                lock.release()
            except Exception as e:  # noqa: BLE001
                out["errors"] += 1
                out["first_error"] = out["first_error"] or repr(e)
                time.sleep(CALLER_RETRY_S)
                continue
            if mode == "contended":
                out["events"].append([w, requested - t0, acquired - t0, released - t0])
            else:
                out["total"] += 1
                out["in_window"] += acquired < end
        queue.put(out)

    ts = [threading.Thread(target=run, args=(first_index + k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


class KeyOf:
    def __init__(self, prefix, keys):
        self.prefix, self.keys = prefix, keys

    def __call__(self, n):
        return self.prefix if self.keys == 1 else f"{self.prefix}:{n % self.keys}"


def prl_run(url, info, prefix, processes, threads, hold_s, window_s, keys=1):
    ctx = mp.get_context("fork")
    workers = processes * threads
    barrier = ctx.Barrier(workers + 1)
    start_ns = ctx.Value("q", 0, lock=False)
    queue = ctx.Queue()
    mode = "contended" if keys == 1 else "keys"
    procs = [ctx.Process(target=prl_process,
                         args=(url, KeyOf(prefix, keys), threads, hold_s, window_s, barrier,
                               start_ns, queue, p * threads, mode))
             for p in range(processes)]
    for p in procs:
        p.start()
    barrier.wait()
    before = command_counts(info)
    t0 = now_ns()
    start_ns.value = t0
    results = []
    deadline = time.monotonic() + window_s + GRACE_S
    while len(results) < workers and time.monotonic() < deadline:
        try:
            results.append(queue.get(timeout=max(0.01, deadline - time.monotonic())))
        except Exception:  # noqa: BLE001 - queue.Empty: the deadline passed
            break
    timed_out = len(results) < workers
    for p in procs:
        p.join(timeout=0.5 if timed_out else 5)
        if p.is_alive():
            p.terminate()
            p.join()
    after = command_counts(info)
    out = {"window_s": window_s, "errors": sum(r["errors"] for r in results),
           "first_error": next((r["first_error"] for r in results if r["first_error"]), None),
           "timed_out": timed_out, "commands": command_delta(before, after),
           "process_model": (f"{processes} processes" if threads == 1
                             else f"{processes} processes × {threads} threads")}
    if mode == "contended":
        out["events"] = [e for r in results for e in r["events"]]
    else:
        out["acquired_in_window"] = sum(r["in_window"] for r in results)
        out["acquired_total"] = sum(r["total"] for r in results)
    return out


def prl_uncontended(url, info, key, window_s, max_samples):
    client = redis.StrictRedis.from_url(url)
    lock = redis_lock.Lock(client, key)
    before = command_counts(info)
    for _ in range(20):
        lock.acquire()
        lock.release()
    latencies = []
    start = time.monotonic()
    while len(latencies) < max_samples and time.monotonic() - start < window_s:
        t = now_ns()
        lock.acquire()
        lock.release()
        latencies.append(now_ns() - t)
    after = command_counts(info)
    return {"window_s": window_s, "latencies_ns": latencies, "errors": 0, "first_error": None,
            "timed_out": False, "commands": command_delta(before, after),
            "commands_acquisitions": len(latencies) + 20, "process_model": "one process"}


# --- driver ------------------------------------------------------------------------------------

VARIANTS = [
    {"lib": "redis-py", "variant": "default", "label": "redis-py Lock (sleep 0.1 s)",
     "kind": "lock", "tuned": None, "sleep": None,
     "note": "SET NX polling every 100 ms, asyncio"},
    {"lib": "redis-py", "variant": "tuned", "label": "redis-py Lock (sleep 1 ms)",
     "kind": "lock", "tuned": "sleep=0.001", "sleep": 0.001,
     "note": "SET NX polling every 1 ms, asyncio"},
    {"lib": "python-redis-lock", "variant": "default", "label": "python-redis-lock",
     "kind": "lock", "tuned": None,
     "note": "SET NX + BLPOP wake-up, one process per worker (sync library)"},
]


def summary(d):
    s = ""
    if "events" in d:
        s += f"{len(d['events'])} acquisitions"
    if d.get("latencies_ns"):
        v = sorted(d["latencies_ns"])
        s += f"p50 {v[len(v) // 2] / 1e3:.0f} us ({len(v)} samples)"
    if "acquired_in_window" in d:
        s += f"{d['acquired_in_window'] / d['window_s']:.0f}/s"
    if d.get("errors"):
        s += f", {d['errors']} errors (first: {d['first_error']})"
    if d.get("timed_out"):
        s += ", TIMED OUT"
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only")
    ap.add_argument("--scenarios", default="raw,s1,s2,s3,s4")
    args = ap.parse_args()
    scenarios = set(args.scenarios.split(","))
    only = set(args.only.split(",")) if args.only else None
    secs = lambda base: max(0.2, base * args.scale)  # noqa: E731
    info = redis.StrictRedis.from_url(args.url)
    run = f"{os.getpid()}"
    out = open(args.out, "a")

    def write(variant, scenario, params, data):
        record = {"runner": "python", "scenario": scenario}
        if variant:
            record.update({k: variant[k] for k in ("lib", "variant", "label", "kind", "tuned", "note")})
        record.update(params)
        record.update(data)
        out.write(json.dumps(record) + "\n")
        out.flush()

    def log(label, what, data):
        print(f"python: {label:<34} {what}: {summary(data)}", file=sys.stderr, flush=True)

    if "raw" in scenarios:
        data = asyncio.run(raw_rtt(args.url, secs(1.5)))
        write(None, "raw_rtt_runtime", {"lib": "raw", "label": "raw EVALSHA (redis-py asyncio)"}, data)
        print(f"python: raw EVALSHA (redis-py asyncio): {len(data['pair_ns'])} samples", file=sys.stderr)

    for v in VARIANTS:
        if only and v["lib"] not in only:
            continue
        key = lambda sc: f"kb:{run}:{v['lib']}:{v['variant']}:{sc}"  # noqa: E731
        if v["lib"] == "redis-py":
            async def with_client(body, max_connections=None):
                # redis-py's asyncio pool holds at most 100 connections by default and raises
                # MaxConnectionsError past that: 256 concurrent tasks need a bigger pool.
                kwargs = {"max_connections": max_connections} if max_connections else {}
                client = redis.asyncio.Redis.from_url(args.url, **kwargs)
                try:
                    return await body(client)
                finally:
                    await client.aclose()

            def maker(client, k, sleep=v["sleep"]):
                return lambda: RedisPyWorker(client, k, sleep)

            if "s1" in scenarios:
                data = asyncio.run(with_client(lambda c: async_uncontended(
                    maker(c, key("s1")), info, secs(1.5), 20000)))
                write(v, "s1", {"workers": 1}, data)
                log(v["label"], "s1 uncontended", data)
            if "s2" in scenarios:
                for n in (2, 8, 32):
                    for hold_ms in (0, 1):
                        k = f"{key('s2')}:{n}:{hold_ms}"
                        data = asyncio.run(with_client(lambda c: async_contended(
                            maker(c, k), info, n, hold_ms / 1000, secs(2.0))))
                        write(v, "s2", {"workers": n, "hold_ms": hold_ms}, data)
                        log(v["label"], f"s2 N={n:<2} hold={hold_ms}ms", data)
            if "s3" in scenarios:
                data = asyncio.run(with_client(lambda c: async_many_keys(
                    lambda k, s=v["sleep"]: RedisPyWorker(c, k, s), info, key("s3"), 256, 10000, secs(3.0)),
                    max_connections=256))
                data["harness_setting"] = "client max_connections=256 (default 100 fails with MaxConnectionsError)"
                write(v, "s3", {"workers": 256, "keys": 10000}, data)
                log(v["label"], "s3 256 workers/10 000 keys", data)
            if "s4" in scenarios:
                data = asyncio.run(with_client(lambda c: async_contended(
                    maker(c, key("s4")), info, 8, 0.001, secs(3.0))))
                write(v, "s4", {"workers": 8, "hold_ms": 1}, data)
                log(v["label"], "s4 fairness N=8 hold=1ms", data)
        else:
            if "s1" in scenarios:
                data = prl_uncontended(args.url, info, key("s1"), secs(1.5), 20000)
                write(v, "s1", {"workers": 1}, data)
                log(v["label"], "s1 uncontended", data)
            if "s2" in scenarios:
                for n in (2, 8, 32):
                    for hold_ms in (0, 1):
                        data = prl_run(args.url, info, f"{key('s2')}:{n}:{hold_ms}", n, 1,
                                       hold_ms / 1000, secs(2.0))
                        write(v, "s2", {"workers": n, "hold_ms": hold_ms}, data)
                        log(v["label"], f"s2 N={n:<2} hold={hold_ms}ms", data)
            if "s3" in scenarios:
                # 256 processes would not fit two cores: 16 processes of 16 threads each.
                data = prl_run(args.url, info, key("s3"), 16, 16, 0, secs(3.0), keys=10000)
                write(v, "s3", {"workers": 256, "keys": 10000}, data)
                log(v["label"], "s3 256 workers/10 000 keys", data)
            if "s4" in scenarios:
                data = prl_run(args.url, info, key("s4"), 8, 1, 0.001, secs(3.0))
                write(v, "s4", {"workers": 8, "hold_ms": 1}, data)
                log(v["label"], "s4 fairness N=8 hold=1ms", data)
    out.close()


if __name__ == "__main__":
    main()
