"""Tables: plain text for the terminal, Markdown for docs/benchmarks.md."""

import explain
from analysis import KEYLATCH, KEYLATCH_SEMAPHORE, ratio, run

RUNTIME = {"rust": "Rust, tokio tasks", "python": "Python", "node": "Node, one process"}
N_VALUES = (2, 8, 32)


def scaled(x, thousands, units):
    """`x` in `units`, or in thousands of them (suffix `thousands`) from 1000 up."""
    if x is None:
        return "—"
    if x >= 10_000:
        return f"{x / 1000:.0f}{thousands}"
    if x >= 1000:
        return f"{x / 1000:.1f}{thousands}"
    return f"{x:.0f}{units}"


def us(x):
    return scaled(x, " ms", " µs")


def rate(x):
    return scaled(x, "k/s", "/s")


def times(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}×"


def num(x, digits=1):
    return "—" if x is None else f"{x:.{digits}f}"


def order(a, kinds):
    """Variants in report order: keylatch first, then Rust, Python, Node peers."""
    rank = {"rust": 1, "python": 2, "node": 3}
    vs = [(k, v) for k, v in a["variants"].items() if v["kind"] in kinds]
    return sorted(vs, key=lambda kv: (kv[0][0] != "keylatch", kv[0][0] != "raw", rank.get(kv[1]["runner"], 9),
                                      kv[1]["label"]))


def runtime(v, f=None):
    if v["runner"] == "python":
        model = (f or {}).get("process_model")
        return f"Python, {model}" if model else "Python, asyncio tasks"
    return RUNTIME.get(v["runner"], v["runner"])


def flags(f):
    notes = []
    if f.get("errors"):
        notes.append(f"{f['errors']} errors: {str(f.get('first_error'))[:80]}")
    if f.get("timed_out"):
        notes.append("workers abandoned at the time limit")
    if f.get("exclusion_violations"):
        notes.append(f"**{f['max_holders']} holders at once**")
    if f.get("starved"):
        notes.append(f"{f['starved']} workers never acquired")
    return "; ".join(notes)


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


# --- the tables, as rows ----------------------------------------------------------------------

def s1_rows(a):
    kl = run(a, KEYLATCH, "s1") or {}
    rows = []
    for key, v in order(a, ("lock", "fairlock", "baseline")):
        f = run(a, key, "s1")
        if not f:
            continue
        side_by_side = f.get("keylatch_p50_us")
        vs_keylatch = ratio(f["p50_us"], side_by_side or kl.get("p50_us"))
        rows.append([v["label"], runtime(v, f), us(f["p50_us"]), us(f["p99_us"]),
                     times(vs_keylatch) + ("" if side_by_side or key == KEYLATCH else " ¹"),
                     times(ratio(f["p50_us"], f.get("limit_p50_us"))),
                     # A p99 measured apart from its limit says more about the moment than the library.
                     times(ratio(f["p99_us"], f.get("limit_p99_us"))) if f.get("limit_basis") == "interleaved" else "—",
                     num(f.get("cmds_per_acq")), flags(f)])
    return ["library", "runtime", "p50", "p99", "p50 × keylatch", "p50 × limit", "p99 × limit",
            "commands", "notes"], rows


def s2_summary_rows(a, hold):
    header = ["library"] + [f"N={n}: acq/s (× keylatch, × limit)" for n in N_VALUES] + \
             [f"N={n}: hand-off p50 (× keylatch, round trips)" for n in N_VALUES]
    rows = []
    for key, v in order(a, ("lock", "fairlock")):
        cells, gaps = [], []
        for n in N_VALUES:
            f = run(a, key, "s2", n, hold)
            kl = run(a, KEYLATCH, "s2", n, hold) or {}
            if not f:
                cells.append("—")
                gaps.append("—")
                continue
            cells.append(f"{rate(f['throughput'])} ({times(ratio(f['throughput'], kl.get('throughput')))}, "
                         f"{times(f['of_limit'])})")
            gaps.append(f"{us(f['gap_p50_us'])} ({times(ratio(f['gap_p50_us'], kl.get('gap_p50_us')))}, "
                        f"{num(f['gap_p50_rtt'])})")
        if any(c != "—" for c in cells):
            rows.append([v["label"]] + cells + gaps)
    return header, rows


def s2_detail_rows(a, n, hold):
    kl = run(a, KEYLATCH, "s2", n, hold) or {}
    rows = []
    for key, v in order(a, ("lock", "fairlock")):
        f = run(a, key, "s2", n, hold)
        if not f:
            continue
        top = ", ".join(f"{k} {x:.2f}" for k, x in list(f["commands"].items())[:4])
        rows.append([v["label"], rate(f["throughput"]), times(ratio(f["throughput"], kl.get("throughput"))),
                     times(f["of_limit"]), us(f["gap_p50_us"]), us(f["gap_p99_us"]),
                     times(ratio(f["gap_p50_us"], kl.get("gap_p50_us"))), num(f["gap_p50_rtt"]),
                     f"{100 * f['reacquire_share']:.0f} %" if f["reacquire_share"] is not None else "—",
                     num(f["max_min"]) if f["max_min"] else "∞",
                     num(f["cmds_per_acq"]), top, flags(f)])
    return ["library", "acq/s", "× keylatch", "× limit", "hand-off p50", "hand-off p99",
            "p50 × keylatch", "p50 in round trips", "re-acquired by the releaser", "max/min per worker",
            "commands per acq", "top commands per acq", "notes"], rows


def s3_rows(a):
    kl = run(a, KEYLATCH, "s3") or {}
    base = a["baselines"]
    rb = a["redis_benchmark"].get("c256", {}).get("rps")
    rows = []
    for key, v in order(a, ("lock", "fairlock", "baseline")):
        f = run(a, key, "s3")
        if not f:
            continue
        note = flags(f)
        if f.get("harness_setting"):
            note = "; ".join(x for x in (note, f["harness_setting"]) if x)
        side = f.get("keylatch_side_by_side")
        vs_keylatch = ratio(f["throughput"], side or kl.get("throughput"))
        raw = f.get("raw_side_by_side") or base.get("s3_pairs_per_s")
        rows.append([v["label"], runtime(v, f), rate(f["throughput"]),
                     times(vs_keylatch) + ("" if side or key == KEYLATCH else " ¹"),
                     times(ratio(f["throughput"], raw)) + ("" if f.get("raw_side_by_side") else " ¹"),
                     times(ratio(f["throughput"], rb / 2 if rb else None)),
                     num(f["cmds_per_acq"]), note])
    return ["library", "runtime", "lock+unlock/s", "× keylatch", "× raw EVALSHA pairs (redis-rs)",
            "× redis-benchmark pairs (256 conns)", "commands per acq", "notes"], rows


def s4_rows(a):
    kl = run(a, KEYLATCH, "s4", 8, 1) or {}
    rows = []
    for key, v in order(a, ("lock", "fairlock")):
        f = run(a, key, "s4", 8, 1)
        if not f:
            continue
        rows.append([v["label"], "FIFO" if v["kind"] == "fairlock" else "—", f["acquisitions"],
                     f"{f['per_worker_min']}–{f['per_worker_max']}",
                     num(f["max_min"], 2) if f["max_min"] else "∞",
                     f"{f['inversions']} ({num(f['inversions_per_100'])} %)",
                     us(f["gap_p50_us"]), times(ratio(f["gap_p50_us"], kl.get("gap_p50_us"))),
                     num(f["gap_p50_rtt"]),
                     f"{100 * f['reacquire_share']:.0f} %" if f["reacquire_share"] is not None else "—",
                     rate(f["throughput"]), flags(f)])
    return ["library", "claims", "acquisitions", "per worker min–max", "max/min", "FIFO inversions",
            "hand-off p50", "× keylatch reentrant", "round trips", "re-acquired by the releaser",
            "acq/s", "notes"], rows


def s5_rows(a):
    kl = run(a, KEYLATCH_SEMAPHORE, "s5", 16, 1)
    rows = []
    for key, v in order(a, ("semaphore",)):
        f = run(a, key, "s5", 16, 1)
        if not f:
            continue
        rows.append([v["label"], runtime(v), rate(f["throughput"]),
                     times(ratio(f["throughput"], (kl or {}).get("throughput"))) if kl else "pending",
                     times(f["of_limit"]), f["max_holders"], num(f["max_min"]) if f["max_min"] else "∞",
                     f"{us(f['wait_p50_us'])} / {us(f['wait_p99_us'])}", num(f["cmds_per_acq"]), flags(f)])
    if not kl:
        rows.insert(0, ["keylatch Semaphore", "Rust, tokio tasks", "pending", "—", "—", "—", "—", "—", "—",
                        "not measured in this run"])
    return ["library", "runtime", "acquire+release/s", "× keylatch", "× limit", "most holders at once (P = 4)",
            "max/min per worker", "wait p50 / p99", "commands per acq", "notes"], rows


# --- output -------------------------------------------------------------------------------------

def console(a):
    def text_table(header, rows):
        cells = [header] + [[str(c).replace("**", "") for c in r] for r in rows]
        widths = [min(40, max(len(r[i]) for r in cells)) for i in range(len(header))]
        return "\n".join("  ".join(c[:40].ljust(w) for c, w in zip(r, widths)) for r in cells)

    base = a["baselines"]
    parts = ["", "== baselines",
             f"raw EVALSHA round trip (redis-rs) p50 {us((base.get('rtt_p50_ns') or 0) / 1e3)}, "
             f"two back to back p50 {us((base.get('pair_p50_ns') or 0) / 1e3)}; "
             f"256 tasks over 10 000 keys: {rate(base.get('s3_pairs_per_s'))} pairs"]
    parts += ["", "== 1. uncontended lock+unlock, one worker", text_table(*s1_rows(a))]
    for hold in (0, 1):
        for n in N_VALUES:
            parts += ["", f"== 2. one contended key, N={n}, hold {hold} ms", text_table(*s2_detail_rows(a, n, hold))]
    parts += ["", "== 3. 256 workers over 10 000 keys", text_table(*s3_rows(a))]
    parts += ["", "== 4. fairness, N=8, hold 1 ms", text_table(*s4_rows(a))]
    parts += ["", "== 5. semaphore, P=4, N=16, hold 1 ms", text_table(*s5_rows(a))]
    return "\n".join(parts)


def baselines_md(a):
    base = a["baselines"]
    rb = a["redis_benchmark"]
    rows = [["EVALSHA round trip, redis-rs, one connection", us((base.get("rtt_p50_ns") or 0) / 1e3),
             us((base.get("rtt_p99_ns") or 0) / 1e3), "the unit of the \"round trips\" columns"],
            ["two EVALSHA back to back (lock + unlock's limit)", us((base.get("pair_p50_ns") or 0) / 1e3),
             us((base.get("pair_p99_ns") or 0) / 1e3), "scenario 1's limit (Rust rows: measured interleaved)"],
            ["EVALSHA pairs, 256 tasks over 10 000 keys, redis-rs", rate(base.get("s3_pairs_per_s")), "",
             "scenario 3's limit"]]
    for name, label in (("c1", "redis-benchmark EVALSHA, 1 connection"),
                        ("c256", "redis-benchmark EVALSHA, 256 connections, 10 000 keys"),
                        ("pipelined", "redis-benchmark EVALSHA, 4 connections, pipeline 64")):
        r = rb.get(name)
        if r:
            lat = f"p50 {us(r['p50_ms'] * 1000)}" if name == "c1" else ""
            rows.append([label, f"{rate(r['rps'])} commands", lat, "the server's own ceiling" if name == "pipelined" else ""])
    for runner, r in sorted(base.get("runtime", {}).items()):
        rows.append([f"{r['label']}", us(r["rtt_p50_ns"] / 1e3), "",
                     f"the {runner} runtime's own round trip; two back to back {us(r['pair_p50_ns'] / 1e3)}"])
    return table(["baseline", "p50 / rate", "p99", "used for"], rows)


def markdown(a, meta, images):
    out = [explain.intro(a, meta), "", "### Baselines, same run", "", baselines_md(a), "",
           explain.libraries(meta), "",
           "### 1. Uncontended lock + unlock, one worker", "",
           "Limit: two raw EVALSHA round trips (redis-rs). The Rust rows interleave each sample with such "
           "a pair and with a lock + unlock of keylatch's reentrant lock, so both their ratios are "
           "measured under the same load; the Python and Node rows use the raw round trip measured just "
           "before their runner and keylatch's own row (¹). \"commands\" is Redis commands per lock + "
           "unlock (`INFO commandstats`), scripts' inner calls included.", "",
           table(*s1_rows(a)), "", f"![uncontended latency]({images['s1']})", "",
           "### 2. One contended key", "",
           explain.s2_text(), ""]
    for hold in (0, 1):
        out += [f"**Hold {hold} ms.** Cells: acquisitions per second (× keylatch, × limit) and hand-off gap "
                "p50 (× keylatch, in raw round trips).", "", table(*s2_summary_rows(a, hold)), ""]
    out += [f"![contended key]({images['s2']})", "", "<details><summary>Every figure of scenario 2</summary>", ""]
    for hold in (0, 1):
        for n in N_VALUES:
            out += [f"N = {n}, hold {hold} ms", "", table(*s2_detail_rows(a, n, hold)), ""]
    out += ["</details>", "",
            "### 3. 256 workers over 10 000 keys", "",
            "Each worker locks and unlocks key after key (a new lock handle per key, as a service "
            "locking per entity would). Limit: raw EVALSHA pairs from 256 tasks on one redis-rs "
            "connection, and redis-benchmark's rate halved (two commands per lock+unlock). The Rust "
            "rows run in three 1 s slices, each followed by a slice of keylatch's reentrant lock and "
            "one of raw EVALSHA pairs, so their ratios compare the same minutes; ¹ marks ratios to "
            "figures measured apart (keylatch's own row, the raw baseline at the start).", "",
            table(*s3_rows(a)), "", f"![many keys]({images['s3']})", "",
            "### 4. Fairness: 8 workers on one key, hold 1 ms", "",
            explain.s4_text(), "", table(*s4_rows(a)), "", f"![fairness]({images['s4']})", "",
            "### 5. Semaphore: P = 4 permits, N = 16 workers, hold 1 ms", "",
            explain.s5_text(), "", table(*s5_rows(a)), "", f"![semaphore]({images['s5']})", "",
            explain.targets(a), "", explain.where_keylatch_trails(a), "", explain.caveats(a, meta)]
    return "\n".join(out)
