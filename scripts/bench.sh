#!/usr/bin/env bash
# keylatch against peer lock libraries (Rust, Python, Node) and the physical limit, in one
# run on one throwaway redis-server. Installs what it needs, prints tables, and rewrites the
# section of bench/results/peers.md (the full report; docs/benchmarks.md summarises it) between
# <!-- peers:start --> and <!-- peers:end --> with tables, and the plots docs/img/peers-*.png.
# With the rust runner, then keylatch's RedLock against rslock over 3 and over 5 throwaway
# redis-servers, rendered in bench/results/peers.md between <!-- redlock:start --> and
# <!-- redlock:end -->; and keylatch on a 3-primary Redis Cluster
# against one server (scripts/bench-cluster.sh), between <!-- cluster:start --> and
# <!-- cluster:end -->; and the library tax (tests/benches/tax.rs) at 1 to 1 024 tasks with
# coalescing on and off, plotted as docs/img/scaling.png between <!-- scaling:start --> and
# <!-- scaling:end -->.
#
#   ./scripts/bench.sh             # full run: about 15 minutes on 2 cores, after the first build
#   ./scripts/bench.sh --quick     # every scenario at a quarter of its duration
#   ./scripts/bench.sh --report    # re-render the doc from the last run's bench/results/
#   ./scripts/bench.sh --runners rust,node   # a subset (the report then lacks the others)
#   ./scripts/bench.sh --redlock-only [--quick]   # the RedLock step and its section alone
#   ./scripts/bench.sh --cluster-only [--quick]   # the cluster step and its section alone
#   ./scripts/bench.sh --scaling-only [--quick]   # the scaling step and its section alone
#
# Installs: redis-server, redis-cli and redis-benchmark (./scripts/setup.sh, Debian's
# packages); the Python peers and matplotlib with pip into bench/.venv; the Node peers with
# `npm ci` into bench/node/node_modules; the Rust peers from crates.io into bench/target.
# Benchmark traffic goes to 127.0.0.1 only.
set -euo pipefail

# shellcheck disable=SC2034 # read by lib.sh
SCRIPT_NAME="bench.sh"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

SCALE=1
QUICK=0
REPORT_ONLY=0
REDLOCK_ONLY=0
CLUSTER_ONLY=0
SCALING_ONLY=0
INVOCATION="./scripts/bench.sh${*:+ $*}"
RUNNERS="rust,python,node"
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) SCALE=0.25 QUICK=1 ;;
        --report) REPORT_ONLY=1 ;;
        --runners) RUNNERS="$2"; shift ;;
        --redlock-only) REDLOCK_ONLY=1 ;;
        --cluster-only) CLUSTER_ONLY=1 ;;
        --scaling-only) SCALING_ONLY=1 ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
    shift
done
wants() { case ",$RUNNERS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
CLUSTER_ARGS=()
[ "$QUICK" -eq 1 ] && CLUSTER_ARGS+=(--quick)
if [ "$CLUSTER_ONLY" -eq 1 ]; then
    exec "$ROOT/scripts/bench-cluster.sh" "${CLUSTER_ARGS[@]}"
fi

BENCH="$ROOT/bench"
RESULTS="$BENCH/results"
VENV="$BENCH/.venv"
PY="$VENV/bin/python"
export CARGO_TARGET_DIR="$BENCH/target"

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# --- install -------------------------------------------------------------------------------
section "installing what the benchmarks need"
if [ "$REPORT_ONLY" -eq 0 ]; then
    "$ROOT/scripts/setup.sh"
    command -v redis-benchmark >/dev/null 2>&1 ||
        die "redis-benchmark not found (Debian's redis-tools provides it)"
fi

command -v python3 >/dev/null 2>&1 || {
    log "python3 is missing: installing Debian's python3 and python3-venv"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y python3 python3-venv
}
# The RedLock step alone needs no venv: its renderer uses the standard library only.
if [ "$REDLOCK_ONLY" -eq 0 ]; then
    if [ ! -x "$PY" ]; then
        log "creating $VENV"
        if ! python3 -m venv "$VENV"; then
            log "python3 -m venv failed: installing Debian's python3-venv"
            as_root env DEBIAN_FRONTEND=noninteractive apt-get update
            as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv
            rm -rf "$VENV"
            python3 -m venv "$VENV"
        fi
    fi
    # Pinned versions: a no-op once they are installed.
    "$PY" -m pip install --quiet --disable-pip-version-check -r "$BENCH/python/requirements.txt"
    log "python: $("$PY" --version), $("$PY" -m pip freeze 2>/dev/null | grep -iE '^(redis|python-redis-lock|matplotlib)==' | tr '\n' ' ')"
fi

if [ "$REPORT_ONLY" -eq 0 ]; then
    if wants node && [ "$REDLOCK_ONLY" -eq 0 ] && [ "$SCALING_ONLY" -eq 0 ]; then
        if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
            log "node/npm missing: installing Debian's nodejs and npm"
            as_root env DEBIAN_FRONTEND=noninteractive apt-get update
            as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm
        fi
        if [ ! -d "$BENCH/node/node_modules/redis-semaphore" ] ||
            [ "$BENCH/node/package-lock.json" -nt "$BENCH/node/node_modules/.package-lock.json" ]; then
            log "npm ci (bench/node)"
            (cd "$BENCH/node" && npm ci --no-audit --no-fund --loglevel=error)
        fi
        log "node $(node --version): redlock, redis-semaphore, ioredis from bench/node/package-lock.json"
    fi
    # Always but for the scaling step: the raw EVALSHA baseline of every runner comes from it.
    if [ "$SCALING_ONLY" -eq 0 ]; then
        log "building bench/rust (keylatch by path + the Rust peers; target dir bench/target)"
        cargo build --release --quiet --manifest-path "$BENCH/rust/Cargo.toml"
    fi
fi

# --- RedLock over 3 and 5 servers ----------------------------------------------------------
# Five independent throwaway redis-servers: lib.sh's start_throwaway_redis, once for each.
REDLOCK_PIDS=() REDLOCK_DIRS=() REDLOCK_PORTS=()
start_redlock_servers() { # <count>
    local _
    for _ in $(seq 1 "$1"); do
        start_throwaway_redis
        REDLOCK_PIDS+=("$THROWAWAY_REDIS_PID")
        REDLOCK_DIRS+=("$THROWAWAY_REDIS_DIR")
        REDLOCK_PORTS+=("$THROWAWAY_REDIS_PORT")
        THROWAWAY_REDIS_PID="" THROWAWAY_REDIS_DIR=""
    done
}
stop_redlock_servers() {
    # One caught half-started first, then every one started.
    stop_throwaway_redis
    local i
    for i in "${!REDLOCK_PIDS[@]}"; do
        THROWAWAY_REDIS_PID="${REDLOCK_PIDS[$i]}" THROWAWAY_REDIS_DIR="${REDLOCK_DIRS[$i]}"
        stop_throwaway_redis
    done
    REDLOCK_PIDS=() REDLOCK_DIRS=() REDLOCK_PORTS=()
}
# keylatch's RedLock against rslock's LockManager over the first 3 servers, then over all 5:
# bench/results/redlock/servers-{3,5}.jsonl and meta.json.
run_redlock() {
    section "RedLock over 3 and 5 servers: keylatch against rslock"
    local out="$RESULTS/redlock" urls=() port n load_start load_end started=$SECONDS
    rm -rf "$out"
    mkdir -p "$out"
    trap stop_redlock_servers EXIT
    start_redlock_servers 5
    for port in "${REDLOCK_PORTS[@]}"; do
        urls+=("redis://127.0.0.1:$port")
    done
    load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
    for n in 3 5; do
        "$CARGO_TARGET_DIR/release/bench-rust" --out "$out/servers-$n.jsonl" --scale "$SCALE" \
            --redlock-urls "$(IFS=,; echo "${urls[*]:0:$n}")"
    done
    load_end="$(cut -d' ' -f1-3 /proc/loadavg)"
    stop_redlock_servers
    trap - EXIT
    log "RedLock step took $((SECONDS - started)) s"
    PYTHONPATH="$BENCH" python3 - "$out/meta.json" "$INVOCATION" "$SCALE" "$load_start" \
        "$load_end" "$BENCH/rust/Cargo.lock" <<'PY'
import sys, meta
path, invocation, scale, start, end, lock = sys.argv[1:]
meta.write(path, meta.common(start, end, invocation=invocation, scale=float(scale),
                             versions=meta.cargo_versions(lock, ("rslock", "keylatch"))))
PY
}

# --- scaling: the library tax at 1 to 1 024 tasks ------------------------------------------
# tests/benches/tax.rs (it starts its own redis-server) with coalescing on, then off:
# bench/results/scaling/coalesce-{on,off}.jsonl and meta.json. 3 blocks of 2 s per side and
# size (--quick: 2 of 1 s); KEYLATCH_TAX_BLOCKS overrides the count.
SCALING_TASKS=1,2,4,8,16,32,64,128,256,512,1024
run_scaling() {
    section "scaling: keylatch against its own scripts raw at 1 to 1 024 tasks"
    local out="$RESULTS/scaling" load_start load_end started=$SECONDS setting exe commit dirty
    local vars=(KEYLATCH_TAX_TASKS="$SCALING_TASKS")
    if [ "$QUICK" -eq 1 ]; then
        vars+=(KEYLATCH_BENCH_QUICK=1)
    else
        vars+=(KEYLATCH_TAX_BLOCKS="${KEYLATCH_TAX_BLOCKS:-3}")
    fi
    rm -rf "$out"
    mkdir -p "$out"
    # Built once, both settings run that binary: what it was built from is what was measured.
    commit="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "?")"
    dirty="$(git -C "$ROOT" status --porcelain -- crates 2>/dev/null || true)"
    log "building the tax bench (release; target dir bench/target)"
    exe="$(cargo bench --locked --manifest-path "$ROOT/Cargo.toml" -p keylatch-tests \
        --bench tax --no-run --message-format=json-render-diagnostics | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "tax" and m.get("executable"):
        print(m["executable"])')"
    [ -x "$exe" ] || die "the tax bench did not build"
    load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
    for setting in on off; do
        section "scaling: coalescing $setting"
        local coalesce=()
        [ "$setting" = off ] && coalesce=(KEYLATCH_COALESCE=0)
        env -u KEYLATCH_COALESCE -u KEYLATCH_TAX_SIDE -u KEYLATCH_BENCH_CONNECTIONS \
            "${vars[@]}" "${coalesce[@]}" KEYLATCH_TAX_JSON="$out/coalesce-$setting.jsonl" \
            "$exe" --bench
    done
    load_end="$(cut -d' ' -f1-3 /proc/loadavg)"
    log "scaling step took $((SECONDS - started)) s"
    PYTHONPATH="$BENCH" python3 - "$out/meta.json" "$INVOCATION" "$load_start" "$load_end" \
        "$SCALING_TASKS" "$commit" "$dirty" <<'PY'
import sys, meta
path, invocation, start, end, tasks, commit, dirty = sys.argv[1:]
# The library as built: its commit, and uncommitted changes to it then.
meta.write(path, meta.common(start, end, invocation=invocation,
                             tasks=[int(t) for t in tasks.split(",")],
                             commit=commit, dirty=[d[3:] for d in dirty.splitlines()]))
PY
}

# --- run -----------------------------------------------------------------------------------
if [ "$REPORT_ONLY" -eq 0 ] && [ "$REDLOCK_ONLY" -eq 1 ]; then
    run_redlock
elif [ "$REPORT_ONLY" -eq 0 ] && [ "$SCALING_ONLY" -eq 1 ]; then
    run_scaling
elif [ "$REPORT_ONLY" -eq 0 ]; then
    # The raw results of the last run go; the reports kept there (*.md, tracked) stay.
    mkdir -p "$RESULTS"
    find "$RESULTS" -mindepth 1 -maxdepth 1 ! -name '*.md' -exec rm -rf {} +
    trap stop_throwaway_redis EXIT
    start_throwaway_redis
    URL="redis://127.0.0.1:$THROWAWAY_REDIS_PORT"
    load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
    started=$SECONDS

    section "baseline: redis-benchmark (EVALSHA of a one-call script)"
    cli() { redis-cli -h 127.0.0.1 -p "$THROWAWAY_REDIS_PORT" "$@"; }
    sha="$(cli SCRIPT LOAD "return redis.call('exists', KEYS[1])" | tr -d '\r')"
    rb() { # <name> <redis-benchmark args...>: one CSV line → JSON
        local name="$1"; shift
        redis-benchmark -h 127.0.0.1 -p "$THROWAWAY_REDIS_PORT" --csv "$@" | tail -n 1 |
            "$PY" -c 'import csv, json, sys
row = next(csv.reader(sys.stdin))
print(json.dumps({"name": sys.argv[1], "rps": float(row[1]), "p50_ms": float(row[4]), "p99_ms": float(row[6])}))' "$name"
    }
    {
        rb c1 -c 1 -n 20000 EVALSHA "$sha" 1 kb:rb
        rb c256 -c 256 -n 200000 -r 10000 EVALSHA "$sha" 1 kb:rb:__rand_int__
        rb pipelined -c 4 -P 64 -n 1000000 EVALSHA "$sha" 1 kb:rb
    } | "$PY" -c 'import json, sys
out = {r["name"]: r for r in map(json.loads, sys.stdin)}
for r in out.values(): print("  %-10s %10.0f EVALSHA/s  p50 %.0f us" % (r["name"], r["rps"], r["p50_ms"] * 1000), file=sys.stderr)
json.dump(out, open(sys.argv[1], "w"))' "$RESULTS/redis_benchmark.json"

    if wants rust; then
        section "Rust: raw EVALSHA (redis-rs), keylatch, rslock, distkit, redisson, distributed-lock-redis"
        "$CARGO_TARGET_DIR/release/bench-rust" --url "$URL" --out "$RESULTS/rust.jsonl" --scale "$SCALE"
    fi
    # The physical limit again just before each runner, so load that changes over the
    # run does not skew the ratios.
    raw_before() {
        "$CARGO_TARGET_DIR/release/bench-rust" --url "$URL" --out "$RESULTS/raw-$1.jsonl" \
            --scale "$SCALE" --scenarios raw_rtt --tag "$1"
    }
    if wants python; then
        section "Python: redis-py Lock, python-redis-lock"
        raw_before python
        "$PY" "$BENCH/python/bench.py" --url "$URL" --out "$RESULTS/python.jsonl" --scale "$SCALE"
    fi
    if wants node; then
        section "Node: redlock, redis-semaphore"
        raw_before node
        node "$BENCH/node/bench.js" --url "$URL" --out "$RESULTS/node.jsonl" --scale "$SCALE"
    fi
    stop_throwaway_redis
    trap - EXIT

    load_end="$(cut -d' ' -f1-3 /proc/loadavg)"
    log "benchmarks took $((SECONDS - started)) s"
    if wants rust; then
        run_redlock
        section "keylatch on a Redis Cluster against one server"
        "$ROOT/scripts/bench-cluster.sh" "${CLUSTER_ARGS[@]}"
        run_scaling
    fi
    # What the doc needs to say about this run.
    PYTHONPATH="$BENCH" "$PY" - "$RESULTS/meta.json" <<EOF
import json, os, sys
from meta import cargo_versions, common, out
start, end = "$load_start", "$load_end"
meta = common(start, end, scale=float("$SCALE"), quick=$QUICK == 1,
    loaded=max(float(start.split()[0]), float(end.split()[0])) > 0.5 * (os.cpu_count() or 1),
    python=out("$PY", "--version"), node=out("node", "--version"))
# The versions each library resolved to.
versions = {}
for name, version in cargo_versions("$BENCH/rust/Cargo.lock", ("rslock", "distkit", "redisson",
                                    "distributed-lock-redis", "redis", "keylatch")).items():
    versions[name + ("-rs" if name == "redis" else "")] = version
for line in out("$PY", "-m", "pip", "freeze").splitlines():
    name, _, version = line.partition("==")
    if name.lower() in ("redis", "python-redis-lock"):
        versions["redis-py" if name.lower() == "redis" else name.lower()] = version
lock = json.load(open("$BENCH/node/package-lock.json"))
for name in ("redlock", "redis-semaphore", "ioredis"):
    entry = lock.get("packages", {}).get("node_modules/" + name)
    if entry:
        versions[name] = entry["version"]
meta["versions"] = versions
json.dump(meta, open(sys.argv[1], "w"))
EOF
fi

# --- report --------------------------------------------------------------------------------
section "report"
[ -d "$RESULTS" ] || die "no results in $RESULTS: run without --report first"
if [ "$REDLOCK_ONLY" -eq 0 ] && [ "$SCALING_ONLY" -eq 0 ]; then
    "$PY" "$BENCH/report.py" --results "$RESULTS" --doc "$RESULTS/peers.md" --img "$ROOT/docs/img"
fi
if [ "$SCALING_ONLY" -eq 0 ] && [ -f "$RESULTS/redlock/meta.json" ]; then
    python3 "$BENCH/redlock_report.py" --results "$RESULTS/redlock" --doc "$RESULTS/peers.md"
elif [ "$REDLOCK_ONLY" -eq 1 ]; then
    die "no RedLock results in $RESULTS/redlock: run with --redlock-only first"
fi
if [ "$REDLOCK_ONLY" -eq 0 ] && [ -f "$RESULTS/scaling/meta.json" ]; then
    "$PY" "$BENCH/scaling_report.py" --results "$RESULTS/scaling" --doc "$ROOT/docs/benchmarks.md" \
        --img "$ROOT/docs/img"
elif [ "$SCALING_ONLY" -eq 1 ]; then
    die "no scaling results in $RESULTS/scaling: run with --scaling-only first"
fi
