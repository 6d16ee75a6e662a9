"""Renders the RedLock step of scripts/bench.sh (bench/results/redlock/servers-*.jsonl and
meta.json, written by `bench-rust --redlock-urls`) as tables on stdout and as the section of
docs/benchmarks.md between <!-- redlock:start --> and <!-- redlock:end -->. Standard library
only.

    python3 bench/redlock_report.py --results bench/results/redlock --doc bench/results/peers.md
"""

import sys

import docsection

HEADING = "## RedLock over 3 and 5 servers"
INTRO = """\
keylatch's `RedLock` against rslock's `LockManager`, the other Rust implementation of the
RedLock algorithm (one lock on a majority of independent servers), over the same throwaway
redis-servers on loopback (`./scripts/bench.sh`, its RedLock step; `./scripts/bench.sh
--redlock-only` runs that step alone). Both use the same fixed lease and no watchdog."""


def us(v):
    if v is None:
        return "—"
    return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.0f} µs"


def ratio(a, b):
    if a is None or not b:
        return "—"
    return f"{a / b:.2f}×"


def find(records, scenario, servers, lib=None, variant=None):
    for r in records:
        if (r["scenario"], r.get("servers")) == (scenario, servers) and (
            lib is None or (r.get("lib"), r.get("variant")) == (lib, variant)
        ):
            return r
    return None


# Rows of the contended table: each keylatch setting beside rslock's at the same bound.
PAIRS = [
    ("defaults", ("keylatch", "redlock"), ("rslock", "redlock")),
    ("pause about 1 ms", ("keylatch", "redlock-tuned"), ("rslock", "redlock-tuned")),
]


def markdown(records, meta):
    servers = sorted({r["servers"] for r in records if "servers" in r})
    v = meta.get("versions", {})
    load = meta.get("load", {})
    any_c = next((r for r in records if r["scenario"] == "redlock_contended"), {})
    rounds, lease_ms = any_c.get("rounds", "?"), any_c.get("lease_ms", 10000)
    window = any_c.get("window_s", 0) / max(1, any_c.get("rounds", 1) or 1)
    out = []
    out.append(
        f"Measured {meta.get('date', '?')} by `{meta.get('invocation', './scripts/bench.sh')}` "
        f"(scale {meta.get('scale', 1):g}), {meta.get('redis', 'Redis ?')}, "
        f"keylatch {v.get('keylatch', '?')}, rslock {v.get('rslock', '?')}, "
        f"{meta.get('rustc', 'rustc ?')}; {meta.get('cpus', '?')} cores shared by the client "
        f"and all five redis-servers (load average {load.get('start', '?')} at the start, "
        f"{load.get('end', '?')} at the end)."
    )
    out.append("")
    out.append(
        "Method: the same process, one tokio runtime, one keylatch `Client` per server and "
        "one rslock `LockManager` over the same servers; every lock has a fixed "
        f"{lease_ms / 1000:g} s lease. Uncontended: one task locks and unlocks one resource, "
        "each sample being keylatch, then rslock, then the limit (one EVALSHA of a one-call "
        "script on every server at once, twice), so drifting load hits all three alike. "
        f"Contended: 8 tasks on one resource, each holding 1 ms, in {rounds} rounds of "
        f"{window:.2f} s per library and setting, the four taking turns (keylatch, rslock, "
        "keylatch, rslock); a hand-off is the time from one holder's release (read before its "
        "release call) to the next acquisition by another worker; Jain's index is "
        "(Σx)² / (n·Σx²) over the acquisitions per worker (1 is perfectly even, 1/8 one "
        "worker taking all)."
    )
    out.append("")
    out.append(
        "Settings. keylatch's `RedLock` at its defaults asks every server at once (50 ms per "
        "server at most); a refused caller subscribes to the lock's release channel on every "
        "server and tries again when a release arrives (after a random stagger of 0–25 ms) or "
        "after a random pause of 0–200 ms. rslock 0.10 at its defaults (`set_retry(3, 200 ms)`) "
        "polls: `SET NX` on every server, then a random sleep of 0–199 ms before the next "
        "attempt; its `acquire` calls `lock` again at once after 3 failed attempts, so every "
        "third retry comes without a pause. rslock's best within reason is "
        "`set_retry(3, 2 ms)`: a sleep of 0 or 1 ms (its pause is whole milliseconds below "
        "the delay; 1 ms is the least that still sleeps). keylatch was run beside it with "
        "`with_retry_delay(2 ms)`: pause 0–2 ms, stagger 0–0.25 ms. A lone caller never "
        "retries, so the uncontended rows are the same for either setting."
    )
    out.append("")
    out.append("### Uncontended lock + unlock, one task")
    out.append("")
    out.append(
        "| servers | keylatch p50 | keylatch p99 | rslock p50 | rslock p99 | "
        "keylatch / rslock p50 | keylatch / rslock p99 | limit p50 | limit p99 | "
        "requests per lock + unlock | samples |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for n in servers:
        k = find(records, "redlock_uncontended", n, "keylatch", "redlock")
        r = find(records, "redlock_uncontended", n, "rslock", "redlock")
        raw = find(records, "redlock_raw", n)
        if not (k and r):
            continue
        req = f"{k.get('requests_per_pair', 0):g} / {r.get('requests_per_pair', 0):g}"
        out.append(
            f"| {n} | {us(k['p50_us'])} | {us(k['p99_us'])} | {us(r['p50_us'])} | "
            f"{us(r['p99_us'])} | {ratio(k['p50_us'], r['p50_us'])} | "
            f"{ratio(k['p99_us'], r['p99_us'])} | {us(raw and raw['p50_us'])} | "
            f"{us(raw and raw['p99_us'])} | {req} | {min(k['samples'], r['samples'])} |"
        )
    out.append("")
    out.append(
        "Requests are what the servers were sent per lock + unlock, over all of them "
        "(keylatch / rslock): one acquire and one release on each server for both."
    )
    out.append("")
    out.append("### Contended hand-off: 8 workers on one resource, hold 1 ms")
    out.append("")
    out.append(
        "| servers | retry | library | hand-off p50 | hand-off p99 | keylatch / rslock p50 | "
        "keylatch / rslock p99 | acq/s | per worker min–max | Jain | re-taken by the releaser "
        "| errors |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in servers:
        for setting, kid, rid in PAIRS:
            k = find(records, "redlock_contended", n, *kid)
            r = find(records, "redlock_contended", n, *rid)
            for side, x in (("k", k), ("r", r)):
                if not x:
                    continue
                is_k = side == "k"
                share = x.get("reacquire_share")
                errors = x.get("errors", 0)
                if x.get("overlaps"):
                    errors = f"{errors}, {x['overlaps']} OVERLAPS"
                if x.get("timed_out"):
                    errors = f"{errors}, timed out"
                out.append(
                    f"| {n} | {setting} | {x['label']} | {us(x['gap_p50_us'])} | "
                    f"{us(x['gap_p99_us'])} | "
                    f"{ratio(k and k['gap_p50_us'], r and r['gap_p50_us']) if is_k else ''} | "
                    f"{ratio(k and k['gap_p99_us'], r and r['gap_p99_us']) if is_k else ''} | "
                    f"{x['acq_per_s']:.0f} | {x['per_worker_min']}–{x['per_worker_max']} | "
                    f"{x['jain']:.3f} | "
                    f"{'—' if share is None else f'{100 * share:.0f} %'} | {errors} |"
                )
    out.append("")
    out.append(
        "Reading the ratios: keylatch's figure over rslock's, measured in the same run on the "
        "same servers; below 1 keylatch took less time, above 1 more. Uncontended, both send "
        "the same requests to every server at once, so the ratio is each library's own work "
        "per call, and the limit shows what the servers and the network cost. Contended, the "
        "ratio compares how each wakes a waiter at the same bound on its retry pause: "
        "keylatch by a release message, rslock by its next poll. The hand-off counts only "
        "acquisitions by another worker: a releaser that takes the lock again at once shortens "
        "nothing for the others, which is what the per-worker spread and Jain's index show."
    )
    return "\n".join(out)


def console(records):
    lines = []
    for r in records:
        if r["scenario"] == "redlock_uncontended":
            lines.append(f"  {r['servers']} servers  {r['label']:<36} lock+unlock p50 "
                         f"{us(r['p50_us'])}  p99 {us(r['p99_us'])}")
        elif r["scenario"] == "redlock_contended":
            lines.append(f"  {r['servers']} servers  {r['label']:<36} hand-off p50 "
                         f"{us(r['gap_p50_us'])}  p99 {us(r['gap_p99_us'])}  "
                         f"{r['acq_per_s']:.0f} acq/s  Jain {r['jain']:.3f}")
    return "\n".join(lines)


def main():
    args = docsection.args(img=False)
    records, extra = docsection.load(args.results)
    meta = extra.get("meta", {})
    if not records:
        sys.exit("redlock report: no results found")
    print(console(records))
    section = markdown(records, meta)
    # First run: the section goes at the end of the file, under its heading.
    docsection.replace(args.doc, "redlock", section, heading=HEADING + "\n\n" + INTRO)
    print(f"redlock report: wrote {args.doc} (RedLock section)")


if __name__ == "__main__":
    main()
