"""Renders the scaling step of scripts/bench.sh (bench/results/scaling/coalesce-{on,off}.jsonl
and meta.json, written by tests/benches/tax.rs under KEYLATCH_TAX_JSON) as a table on stdout,
the plot docs/img/scaling.png, and the section of docs/benchmarks.md between
<!-- scaling:start --> and <!-- scaling:end -->.

    bench/.venv/bin/python bench/scaling_report.py --results bench/results/scaling \\
        --doc docs/benchmarks.md --img docs/img
"""

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

import docsection  # noqa: E402
from plots import DPI, KEYLATCH_COLOUR, save  # noqa: E402

IMAGE = "scaling.png"


def thousands(v):
    return f"{v:,.0f}".replace(",", " ")


def by_tasks(records):
    """{tasks: record} for coalescing on and for off."""
    on = {r["tasks"]: r for r in records if r["coalesce"]}
    off = {r["tasks"]: r for r in records if not r["coalesce"]}
    return on, off


def raw(on, off, n, key):
    """The raw side's figure at `n` tasks: the mean of the two runs that measured it."""
    values = [s[n][key] for s in (on, off) if n in s and s[n][key] is not None]
    return sum(values) / len(values) if values else None


def plot(on, off, tasks, img_dir):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    panels = (
        ("pairs_per_s", "lock + unlock pairs per second", False),
        ("cpu_us_per_pair", "client CPU per pair, µs (log)", True),
    )
    for ax, (key, label, log) in zip(axes, panels):
        runs = [(on, "keylatch, coalescing on", KEYLATCH_COLOUR, "-"),
                (off, "keylatch, coalescing off", "#ff7f0e", "--")]
        for side, name, colour, ls in runs:
            ax.plot(tasks, [side[n]["keylatch_" + key] for n in tasks], color=colour, ls=ls,
                    lw=2.2, marker="o", label=name)
        # The raw side ran in both runs: its mean, and the two runs as a band.
        ax.plot(tasks, [raw(on, off, n, "raw_" + key) for n in tasks], color="#000000", lw=1.3,
                marker="o", label="its own scripts, raw EVALSHA")
        ax.fill_between(tasks, [min(on[n]["raw_" + key], off[n]["raw_" + key]) for n in tasks],
                        [max(on[n]["raw_" + key], off[n]["raw_" + key]) for n in tasks],
                        color="#000000", alpha=0.12, lw=0)
        ax.set_xscale("log", base=2)
        ax.set_xticks(tasks)
        ax.set_xticklabels([str(n) for n in tasks])
        ax.set_xlabel("tasks (log 2)")
        ax.set_ylabel(label)
        if log:
            ax.set_yscale("log")
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        else:
            ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: thousands(v)))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    axes[0].set_title("Throughput over 10 000 names")
    axes[1].set_title("Client CPU (user + system) per lock + unlock")
    return save(fig, img_dir, IMAGE)


def table(on, off, tasks):
    out = [
        "| tasks | on: pairs/s | on / raw | off: pairs/s | off / raw | raw: pairs/s | "
        "CPU µs per pair, on / off / raw | on: requests coalesced per pair | on: per coalesced "
        "call |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in tasks:
        a, b = on[n], off[n]
        per_pair = a["coalesced_per_pair"]
        per_call = a["requests_per_coalesced_call"] if per_pair else None
        out.append(
            f"| {thousands(n)} | {thousands(a['keylatch_pairs_per_s'])} | {a['ratio']:.2f}× | "
            f"{thousands(b['keylatch_pairs_per_s'])} | {b['ratio']:.2f}× | "
            f"{thousands(raw(on, off, n, 'raw_pairs_per_s'))} | "
            f"{a['keylatch_cpu_us_per_pair']:.1f} / {b['keylatch_cpu_us_per_pair']:.1f} / "
            f"{raw(on, off, n, 'raw_cpu_us_per_pair'):.1f} | "
            f"{f'{per_pair:.2f} of 2' if per_pair else '0'} | "
            f"{'—' if per_call is None else f'{per_call:.1f}'} |"
        )
    return out


def summary(on, off, tasks, cpus):
    """What the figures show, in numbers only."""
    last = tasks[-1]

    def peak(side):
        n = max(tasks, key=lambda n: side[n]["keylatch_pairs_per_s"])
        return n, side[n]["keylatch_pairs_per_s"]

    def best(side):
        return max(tasks, key=lambda n: side[n]["ratio"])

    (n_on, v_on), (n_off, v_off) = peak(on), peak(off)
    best_on, best_off = best(on), best(off)
    # CPU per pair times pairs per second: the client's share of the cores.
    cores = [s[last]["keylatch_cpu_us_per_pair"] * s[last]["keylatch_pairs_per_s"] / 1e6
             for s in (on, off)]
    raw_cores = raw(on, off, last, "raw_cpu_us_per_pair") * raw(on, off, last, "raw_pairs_per_s")
    raw_cores /= 1e6
    gain = [on[n]["keylatch_pairs_per_s"] / off[n]["keylatch_pairs_per_s"] for n in tasks]
    return (
        f"keylatch's throughput peaks at {thousands(n_on)} tasks with coalescing "
        f"({thousands(v_on)} pairs/s) and at {thousands(n_off)} without ({thousands(v_off)}); "
        f"its own scripts sent raw reach {thousands(raw(on, off, last, 'raw_pairs_per_s'))} at "
        f"{thousands(last)}. Against the raw side of its own run keylatch is at its best at "
        f"{thousands(best_on)} tasks with coalescing ({on[best_on]['ratio']:.2f}×) and at "
        f"{thousands(best_off)} without ({off[best_off]['ratio']:.2f}×), and at "
        f"{on[last]['ratio']:.2f}× and {off[last]['ratio']:.2f}× at {thousands(last)}. There its "
        f"client spends {on[last]['keylatch_cpu_us_per_pair']:.1f} and "
        f"{off[last]['keylatch_cpu_us_per_pair']:.1f} µs of CPU per pair against "
        f"{raw(on, off, last, 'raw_cpu_us_per_pair'):.1f} µs raw: at those rates the client "
        f"takes {cores[0]:.2f} and {cores[1]:.2f} of the {cpus} cores against {raw_cores:.2f} "
        f"raw, and redis-server shares the same cores. Coalescing on over off (separate runs, "
        f"one after the other) ranges from {min(gain):.2f}× (at "
        f"{thousands(tasks[gain.index(min(gain))])} tasks) to {max(gain):.2f}× (at "
        f"{thousands(tasks[gain.index(max(gain))])}), with "
        f"{on[last]['requests_per_coalesced_call']:.1f} requests per coalesced call at "
        f"{thousands(last)} tasks."
    )


def markdown(on, off, tasks, meta):
    first = on[tasks[0]]
    load = meta.get("load", {})
    dirty = meta.get("dirty") or []
    commit = meta.get("commit", "?") + (
        f" with uncommitted changes to {', '.join(dirty)}" if dirty else ""
    )
    out = [
        f"Measured {meta.get('date', '?')} by `{meta.get('invocation', './scripts/bench.sh')}` "
        f"at {commit}, {meta.get('redis', 'Redis ?')}, {meta.get('rustc', 'rustc ?')}; "
        f"{meta.get('cpus', '?')} cores shared by the client and redis-server (load average "
        f"{load.get('start', '?')} at the start, {load.get('end', '?')} at the end). The bench "
        "above, run twice: with coalescing on (the default), then off (`KEYLATCH_COALESCE=0`); "
        f"{first['blocks']} blocks of {first['block_ms'] / 1000:g} s per side and size, the "
        "sides alternating. Raw is the mean of the two runs' raw sides (the band in the plot "
        "spans them); each ratio is keylatch over the raw side of its own run.",
        "",
        f"![keylatch against its own scripts sent raw, 1 to 1 024 tasks](img/{IMAGE})",
        "",
    ]
    out += table(on, off, tasks)
    return out + ["", summary(on, off, tasks, meta.get("cpus", "?"))]


def console(on, off, tasks):
    lines = ["  tasks   on pairs/s (x raw)   off pairs/s (x raw)   raw pairs/s   cpu us on/off/raw"]
    for n in tasks:
        a, b = on[n], off[n]
        lines.append(
            f"  {n:>5} {a['keylatch_pairs_per_s']:>11.0f} ({a['ratio']:.2f}x) "
            f"{b['keylatch_pairs_per_s']:>12.0f} ({b['ratio']:.2f}x) "
            f"{raw(on, off, n, 'raw_pairs_per_s'):>13.0f}   "
            f"{a['keylatch_cpu_us_per_pair']:.1f} / {b['keylatch_cpu_us_per_pair']:.1f} / "
            f"{raw(on, off, n, 'raw_cpu_us_per_pair'):.1f}"
        )
    return "\n".join(lines)


def main():
    args = docsection.args(img=True)
    records, extra = docsection.load(args.results)
    on, off = by_tasks(records)
    tasks = sorted(set(on) & set(off))
    if not tasks:
        sys.exit("scaling report: no results with coalescing both on and off")
    print(console(on, off, tasks))
    plot(on, off, tasks, args.img)
    section = markdown(on, off, tasks, extra.get("meta", {}))
    docsection.replace(args.doc, "scaling", "\n".join(section))
    print(f"scaling report: wrote {args.img}/{IMAGE} and {args.doc} (scaling section)")


if __name__ == "__main__":
    main()
