#!/usr/bin/env bash
# keylatch on a Redis Cluster against one server, side by side in one run: 256 tasks locking
# and unlocking random names out of 10 000 (beside raw EVALSHA pairs on the same topology),
# and what the watchdog sends per tick to renew 10 000 held locks. Runs `keylatch bench
# --scale` (release build) on a throwaway 3-primary cluster and a throwaway single server,
# prints both, and rewrites the section of docs/benchmarks.md between <!-- cluster:start -->
# and <!-- cluster:end -->. Called by scripts/bench.sh; runs on its own too.
#
#   ./scripts/bench-cluster.sh            # 3 rounds of 10 s per topology and side
#   ./scripts/bench-cluster.sh --quick    # 1 round of 3 s, 2 000 holds
#   ./scripts/bench-cluster.sh --no-doc   # print only
set -euo pipefail

# shellcheck disable=SC2034 # read by lib.sh
SCRIPT_NAME="bench-cluster.sh"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

ROUNDS=3 DURATION=10s HOLDS=10000 DOC=1
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) ROUNDS=1 DURATION=3s HOLDS=2000 ;;
        --no-doc) DOC=0 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
    shift
done

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/bench/target}"
"$ROOT/scripts/setup.sh" >/dev/null
section "building the keylatch command (release)"
cargo build --locked --release --quiet -p keylatch-cli --manifest-path "$ROOT/Cargo.toml"
BIN="$CARGO_TARGET_DIR/release/keylatch"

on_exit() {
    local status=$?
    stop_throwaway_cluster
    stop_throwaway_redis
    exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

section "starting a 3-primary cluster (3 replicas) and one server"
start_throwaway_cluster
start_throwaway_redis
SINGLE="redis://127.0.0.1:$THROWAWAY_REDIS_PORT"
OUT="$(mktemp -d "${TMPDIR:-/tmp}/keylatch-bench-cluster.XXXXXX")"

# Rounds alternate the topologies, so load that changes over the run hits both.
for round in $(seq 1 "$ROUNDS"); do
    for topology in single cluster; do
        if [ "$topology" = single ]; then url="$SINGLE"; else url="$THROWAWAY_CLUSTER_URL"; fi
        holds=0
        # The renewal figure does not vary by round: measure it once per topology.
        [ "$round" -eq 1 ] && holds="$HOLDS"
        section "round $round/$ROUNDS: $topology"
        "$BIN" --redis "$url" bench --scale --duration "$DURATION" --holds "$holds" --json \
            >"$OUT/$topology-$round.json"
        python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print("  raw pairs %.0f/s, lock pairs %.0f/s (%.2fx raw), p50 %.0f us, p99 %.0f us" % (
    r["raw_pairs_per_sec"], r["lock_pairs_per_sec"], r["lock_vs_raw"],
    r["lock_pair_p50_us"], r["lock_pair_p99_us"]))
if r["holds"]:
    print("  %d holds: %.0f renewed, %.0f script calls, %.1f round trips per tick" % (
        r["holds"], r["renewed_per_tick"], r["renew_calls_per_tick"], r["round_trips_per_tick"]))' \
            "$OUT/$topology-$round.json"
    done
done

section "summary"
python3 - "$OUT" "$ROUNDS" "$DURATION" "$DOC" "$ROOT/docs/benchmarks.md" "$ROOT/bench" <<'EOF'
import json, os, statistics, subprocess, sys, time
out, rounds, duration, doc, path, bench = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1", sys.argv[5], sys.argv[6]
runs = {t: [json.load(open(os.path.join(out, f"{t}-{i}.json"))) for i in range(1, rounds + 1)]
        for t in ("single", "cluster")}
med = lambda t, k: statistics.median(r[k] for r in runs[t])
first = {t: runs[t][0] for t in runs}
version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
version = version.split("v=")[-1].split()[0] if "v=" in version else "?"
tasks, keys = first["single"]["tasks"], first["single"]["keys"]
lines = [
    f"Measured {time.strftime('%Y-%m-%d')} by `./scripts/bench-cluster.sh` (part of "
    f"`./scripts/bench.sh`), Redis {version}, {os.cpu_count()} cores shared by the client "
    f"and every server: a 3-primary cluster (3 replicas) and one server, {rounds} round(s) "
    f"of {duration} per side, topologies alternating; medians of the rounds. {tasks} tasks "
    f"each lock and unlock a random name out of {keys:,} with keylatch's reentrant lock; "
    "the raw row sends the same number of round trips (two EVALSHA of a one-call script on "
    "the same random names) through the same client connection.",
    "",
    "| | one server | cluster (3 primaries) | cluster / one server |",
    "|---|---:|---:|---:|",
]
def row(label, key, fmt):
    s, c = med("single", key), med("cluster", key)
    lines.append(f"| {label} | {fmt.format(s)} | {fmt.format(c)} | {c / s:.2f}x |" if s else
                 f"| {label} | {fmt.format(s)} | {fmt.format(c)} | |")
row("raw EVALSHA pairs / s", "raw_pairs_per_sec", "{:,.0f}")
row("lock + unlock pairs / s", "lock_pairs_per_sec", "{:,.0f}")
row("lock + unlock p50 (µs)", "lock_pair_p50_us", "{:,.0f}")
row("lock + unlock p99 (µs)", "lock_pair_p99_us", "{:,.0f}")
row("keylatch / raw", "lock_vs_raw", "{:.2f}x")
s, c = first["single"], first["cluster"]
lines += [
    "",
    f"Renewing {s['holds']:,} held locks (watchdog ticking every second, {s['ticks']} and "
    f"{c['ticks']} ticks measured):",
    "",
    "| per watchdog tick | one server | cluster (3 primaries) |",
    "|---|---:|---:|",
    f"| holds renewed | {s['renewed_per_tick']:,.0f} | {c['renewed_per_tick']:,.0f} |",
    f"| renewal script calls | {s['renew_calls_per_tick']:,.0f} | {c['renew_calls_per_tick']:,.0f} |",
    f"| round trips (pipelines) | {s['round_trips_per_tick']:.1f} | {c['round_trips_per_tick']:.1f} |",
    f"| seconds to take the holds (64 tasks) | {s['holds_acquired_in_secs']:.2f} | {c['holds_acquired_in_secs']:.2f} |",
]
table = "\n".join(lines)
print(table)
if doc:
    sys.path.insert(0, bench)
    import docsection
    docsection.replace(path, "cluster", table)
    print(f"\nwrote the cluster section of {path}")
EOF
rm -rf "$OUT"
