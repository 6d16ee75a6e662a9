"""Figures from the raw results, computed the same way for every runner (Rust, Python, Node).

Events are [worker, requested, acquired, released] in ns; `released` is read just before the
release call, so a hand-off gap (one holder's `released` to the next holder's `acquired`)
includes the release round trip, the wake-up and the new holder's acquire.
"""

from collections import Counter

# Two requests closer than this are not ordered by their timestamps: a FIFO inversion is
# counted only when the overtaken waiter asked at least this much earlier.
INVERSION_SLACK_NS = 1_000_000

KEYLATCH = ("keylatch", "reentrant")
KEYLATCH_FAIR = ("keylatch", "fair")
KEYLATCH_SEMAPHORE = ("keylatch", "semaphore")


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[round((len(v) - 1) * p)]


def mean(values):
    return sum(values) / len(values) if values else None


def ident(r):
    return (r.get("lib"), r.get("variant"))


def commands_total(r):
    return sum(r.get("commands", {}).values())


def top_commands(r, acquisitions):
    if not acquisitions:
        return {}
    cmds = r.get("commands", {})
    return {k: v / acquisitions for k, v in sorted(cmds.items(), key=lambda kv: -kv[1]) if v > 0}


def contended_figures(r, rtt_ns, permits=1):
    """Throughput, hand-offs, fairness and safety of one contended run."""
    events = sorted(r.get("events", []), key=lambda e: e[2])
    window_ns = r["window_s"] * 1e9
    out = {"acquisitions": len(events), "errors": r.get("errors", 0),
           "first_error": r.get("first_error"), "timed_out": r.get("timed_out", False)}
    out["throughput"] = sum(1 for e in events if e[2] <= window_ns) / r["window_s"]
    holds = [e[3] - e[2] for e in events]
    out["hold_us"] = mean(holds) / 1e3 if holds else None
    waits = [e[2] - e[1] for e in events]
    out["wait_p50_us"] = pct(waits, 0.5) / 1e3 if waits else None
    out["wait_p99_us"] = pct(waits, 0.99) / 1e3 if waits else None
    # Hand-offs: the next acquisition by another worker. A worker re-taking the lock it just
    # released is not a hand-off (its share is reported apart).
    gaps, same = [], 0
    for prev, nxt in zip(events, events[1:]):
        if nxt[0] == prev[0]:
            same += 1
        else:
            gaps.append(nxt[2] - prev[3])
    pairs = max(1, len(events) - 1)
    out["reacquire_share"] = same / pairs if len(events) > 1 else None
    out["handoffs"] = len(gaps)
    out["gap_p50_us"] = pct(gaps, 0.5) / 1e3 if gaps else None
    out["gap_p99_us"] = pct(gaps, 0.99) / 1e3 if gaps else None
    out["gap_p50_rtt"] = out["gap_p50_us"] * 1e3 / rtt_ns if gaps and rtt_ns else None
    workers = r.get("workers", 1)
    counts = Counter(e[0] for e in events)
    per = [counts.get(w, 0) for w in range(workers)]
    out["per_worker_min"] = min(per) if per else 0
    out["per_worker_max"] = max(per) if per else 0
    out["starved"] = sum(1 for c in per if c == 0)
    out["max_min"] = (max(per) / min(per)) if per and min(per) > 0 else None
    # FIFO inversions: acquisitions granted while a waiter that asked earlier (by more than
    # the slack) was still waiting.
    inversions = 0
    suffix_min = float("inf")
    for e in reversed(events):
        if suffix_min + INVERSION_SLACK_NS < e[1]:
            inversions += 1
        suffix_min = min(suffix_min, e[1])
    out["inversions"] = inversions
    out["inversions_per_100"] = 100 * inversions / len(events) if events else None
    # Safety: more holders at once than permits, over the [acquired, released] intervals.
    points = sorted([(e[2], 1) for e in events] + [(e[3], -1) for e in events],
                    key=lambda p: (p[0], p[1]))
    level = peak = 0
    for _, d in points:
        level += d
        peak = max(peak, level)
    out["max_holders"] = peak
    out["exclusion_violations"] = peak > permits
    out["cmds_per_acq"] = commands_total(r) / len(events) if events else None
    out["commands"] = top_commands(r, len(events))
    hold_ns = (mean(holds) or 0)
    out["limit_throughput"] = permits * 1e9 / (hold_ns + rtt_ns) if rtt_ns else None
    out["of_limit"] = out["throughput"] / out["limit_throughput"] if out["limit_throughput"] else None
    return out


def analyse(records, redis_benchmark):
    a = {"runs": {}, "baselines": {}, "redis_benchmark": redis_benchmark, "variants": {}}
    base = a["baselines"]
    by_runner = base.setdefault("by_runner", {})
    for r in records:
        if r["scenario"] == "raw_rtt":
            # redis-rs round trips, measured just before each runner's turn.
            figures = {"rtt_p50_ns": pct(r["single_ns"], 0.5), "rtt_p99_ns": pct(r["single_ns"], 0.99),
                       "pair_p50_ns": pct(r["pair_ns"], 0.5), "pair_p99_ns": pct(r["pair_ns"], 0.99)}
            by_runner[r.get("for_runner", "rust")] = figures
            if r.get("for_runner", "rust") == "rust":
                base.update(figures)
        elif r["scenario"] == "raw_s3":
            base["s3_pairs_per_s"] = r["acquired_in_window"] / r["window_s"]
        elif r["scenario"] == "raw_rtt_runtime":
            base.setdefault("runtime", {})[r["runner"]] = {
                "label": r["label"], "rtt_p50_ns": pct(r["single_ns"], 0.5),
                "pair_p50_ns": pct(r["pair_ns"], 0.5)}
    for r in records:
        sc = r["scenario"]
        if sc not in ("s1", "s2", "s3", "s4", "s5"):
            continue
        near = by_runner.get(r["runner"]) or base
        # A round trip measured just before this run (Rust), else before this runner.
        rtt = r.get("rtt_p50_ns") or near.get("rtt_p50_ns")
        key = ident(r)
        a["variants"].setdefault(key, {k: r.get(k) for k in ("lib", "variant", "label", "kind", "tuned", "note", "runner")})
        if sc == "s1":
            lat = r.get("latencies_ns", [])
            f = {"p50_us": pct(lat, 0.5) / 1e3 if lat else None,
                 "p99_us": pct(lat, 0.99) / 1e3 if lat else None,
                 "samples": len(lat), "errors": r.get("errors", 0), "first_error": r.get("first_error"),
                 "timed_out": r.get("timed_out", False), "process_model": r.get("process_model")}
            raw_pairs = r.get("raw_pair_ns")
            if raw_pairs:
                f["limit_p50_us"] = pct(raw_pairs, 0.5) / 1e3
                f["limit_p99_us"] = pct(raw_pairs, 0.99) / 1e3
                f["limit_basis"] = "interleaved"
            elif near.get("pair_p50_ns"):
                f["limit_p50_us"] = near["pair_p50_ns"] / 1e3
                f["limit_p99_us"] = near["pair_p99_ns"] / 1e3
                f["limit_basis"] = "just before"
            if r.get("keylatch_ns"):
                f["keylatch_p50_us"] = pct(r["keylatch_ns"], 0.5) / 1e3
            n = r.get("commands_acquisitions") or (len(lat) + 20)
            if lat:
                f["cmds_per_acq"] = commands_total(r) / n
            a["runs"][(key, "s1")] = f
        elif sc in ("s2", "s4", "s5"):
            f = contended_figures(r, rtt, r.get("permits", 1))
            f["rtt_us"] = rtt / 1e3 if rtt else None
            f["process_model"] = r.get("process_model")
            a["runs"][(key, sc, r["workers"], r.get("hold_ms", 0))] = f
        elif sc == "s3":
            f = {"throughput": r["acquired_in_window"] / r["window_s"],
                 "errors": r.get("errors", 0), "first_error": r.get("first_error"),
                 "timed_out": r.get("timed_out", False), "process_model": r.get("process_model"),
                 "harness_setting": r.get("harness_setting")}
            total = r.get("acquired_total") or 0
            f["cmds_per_acq"] = commands_total(r) / total if total else None
            # Rust rows: keylatch and raw EVALSHA pairs ran in slices interleaved with this one.
            f["keylatch_side_by_side"] = r.get("keylatch_side_by_side")
            f["raw_side_by_side"] = r.get("raw_side_by_side")
            a["runs"][(key, "s3")] = f
    return a


def run(a, key, *rest):
    return a["runs"].get((key,) + tuple(rest))


def ratio(x, y):
    if x is None or y is None or y == 0:
        return None
    return x / y
