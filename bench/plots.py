"""Plots of the peer comparison, drawn from the analysed results (PNG, under docs/img/)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from analysis import KEYLATCH, ratio, run  # noqa: E402
from render import N_VALUES, order  # noqa: E402

KEYLATCH_COLOUR = "#d62728"
DPI = 110


PEER_COLOURS = {
    "rslock": "#1f77b4", "distkit": "#2ca02c", "redisson": "#8c564b",
    "distributed-lock-redis": "#9467bd", "redis-py": "#17becf", "python-redis-lock": "#bcbd22",
    "redlock": "#e377c2", "redis-semaphore": "#7f7f7f",
}


def colour(key, i=0):
    if key[0] == "raw":
        return "#000000"
    if key[0] == "keylatch":
        return KEYLATCH_COLOUR if key == KEYLATCH else "#ff7f0e"
    return PEER_COLOURS.get(key[0], "#aaaaaa")


def line_style(key):
    """keylatch bold; a library's default solid, its other variants dashed (a fair lock with
    square markers)."""
    marker = "s" if key[1] == "fair" else "o"
    if key[0] == "keylatch":
        return dict(lw=2.8, ls="-", marker=marker)
    return dict(lw=1.3, ls="-" if key[1] == "default" else "--", marker=marker)


def save(fig, img_dir, name):
    fig.tight_layout()
    fig.savefig(f"{img_dir}/{name}", dpi=DPI)
    plt.close(fig)
    return name


def hbars(ax, labels, values, colours, xlabel):
    ys = range(len(labels))
    ax.barh(list(ys), [v or 0 for v in values], color=colours)
    ax.set_yticks(list(ys))
    ax.set_yticklabels(labels, fontsize=8)
    if not ax.yaxis_inverted():  # axes sharing y are inverted once
        ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)


def draw(a, img_dir):
    images = {}
    locks = order(a, ("lock", "fairlock"))
    base = a["baselines"]

    # 1. Uncontended latency: absolute, and against the limit measured alongside.
    with_base = order(a, ("lock", "fairlock", "baseline"))
    rows = [(k, v, run(a, k, "s1")) for k, v in with_base if run(a, k, "s1")]
    rows = [r for r in rows if r[2].get("p50_us")]
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.32 * len(rows) + 1.8), sharey=True)
    labels = [v["label"] for _, v, _ in rows]
    cols = [colour(k, i) for i, (k, _, _) in enumerate(rows)]
    hbars(axes[0], labels, [f["p50_us"] for _, _, f in rows], cols, "lock + unlock p50, µs (log); dots: p99")
    axes[0].scatter([f["p99_us"] for _, _, f in rows], range(len(rows)), color="black", s=10, zorder=3)
    axes[0].set_xscale("log")
    hbars(axes[1], labels, [ratio(f["p50_us"], f.get("limit_p50_us")) for _, _, f in rows], cols,
          "p50 × two raw EVALSHA (1 = the limit; keylatch target 1.2)")
    axes[1].axvline(1.0, color="black", lw=1)
    axes[1].axvline(1.2, color="grey", ls="--", lw=1)
    axes[1].set_xscale("log")
    axes[0].set_title("1. Uncontended lock + unlock, one worker")
    images["s1"] = save(fig, img_dir, "peers-uncontended.png")

    # 2. Contended key: throughput and hand-off gap against N.
    fig, axes = plt.subplots(2, 2, figsize=(12, 10))
    for col, hold in enumerate((0, 1)):
        for i, (k, v) in enumerate(locks):
            fs = [run(a, k, "s2", n, hold) for n in N_VALUES]
            if not any(fs):
                continue
            style = dict(color=colour(k, i), label=v["label"], **line_style(k))
            axes[0][col].plot(N_VALUES, [f["throughput"] if f else None for f in fs], **style)
            axes[1][col].plot(N_VALUES, [f["gap_p50_us"] if f and f["gap_p50_us"] else None for f in fs], **style)
        axes[0][col].set_title(f"hold {hold} ms: acquisitions per second")
        axes[1][col].set_title(f"hold {hold} ms: hand-off gap p50, µs (dotted: 1 round trip)")
        for row in (0, 1):
            ax = axes[row][col]
            ax.set_xscale("log", base=2)
            ax.set_xticks(N_VALUES)
            ax.set_xticklabels([str(n) for n in N_VALUES])
            ax.set_yscale("log")
            ax.set_xlabel("workers N")
            ax.grid(alpha=0.3)
        if base.get("rtt_p50_ns"):
            axes[1][col].axhline(base["rtt_p50_ns"] / 1e3, color="grey", ls=":", lw=1)
    fig.suptitle("2. One contended key")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(f"{img_dir}/peers-contended.png", dpi=DPI)
    plt.close(fig)
    images["s2"] = "peers-contended.png"

    # 3. Many keys: absolute, and against raw EVALSHA pairs measured alongside.
    rows = [(k, v, run(a, k, "s3")) for k, v in with_base if run(a, k, "s3")]
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.32 * len(rows) + 1.8), sharey=True)
    labels = [v["label"] for _, v, _ in rows]
    cols = [colour(k, i) for i, (k, _, _) in enumerate(rows)]
    hbars(axes[0], labels, [f["throughput"] for _, _, f in rows], cols, "lock + unlock per second")
    hbars(axes[1], labels,
          [ratio(f["throughput"], f.get("raw_side_by_side") or base.get("s3_pairs_per_s")) for _, _, f in rows],
          cols, "× raw EVALSHA pairs (1 = the limit; keylatch's target 0.7)")
    axes[1].axvline(0.7, color="grey", ls="--", lw=1)
    axes[0].set_title("3. 256 workers over 10 000 keys")
    images["s3"] = save(fig, img_dir, "peers-many-keys.png")

    # 4. Fairness.
    rows = [(k, v, run(a, k, "s4", 8, 1)) for k, v in locks if run(a, k, "s4", 8, 1)]
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.32 * len(rows) + 1.8), sharey=True)
    cols = [colour(k, i) for i, (k, _, _) in enumerate(rows)]
    labels = [v["label"] for _, v, _ in rows]
    spread = [f["max_min"] if f["max_min"] else (f["per_worker_max"] or 1) for _, _, f in rows]
    hbars(axes[0], labels, spread, cols, "acquisitions per worker, max / min (1 = even; log)")
    axes[0].set_xscale("log")
    hbars(axes[1], labels, [f["inversions_per_100"] or 0 for _, _, f in rows], cols,
          "FIFO inversions per 100 acquisitions")
    axes[0].set_title("4. Fairness, 8 workers, hold 1 ms")
    images["s4"] = save(fig, img_dir, "peers-fairness.png")

    # 5. Semaphore.
    rows = [(k, v, run(a, k, "s5", 16, 1)) for k, v in order(a, ("semaphore",)) if run(a, k, "s5", 16, 1)]
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.4 * max(1, len(rows)) + 1.8), sharey=True)
    cols = [colour(k, i) for i, (k, _, _) in enumerate(rows)]
    labels = [v["label"] for _, v, _ in rows]
    hbars(axes[0], labels, [f["throughput"] for _, _, f in rows], cols, "acquire + release per second")
    hbars(axes[1], labels, [f["max_holders"] for _, _, f in rows], cols, "most holders at once (limit 4)")
    axes[1].axvline(4, color="grey", ls="--", lw=1)
    axes[0].set_title("5. Semaphore, P = 4, N = 16, hold 1 ms")
    images["s5"] = save(fig, img_dir, "peers-semaphore.png")
    return images
