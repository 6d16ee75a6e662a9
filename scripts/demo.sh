#!/usr/bin/env bash
# Demo: keylatch's use cases, each across real OS processes.
#
# Starts a throwaway redis-server on a free port (unless REDIS_URL is already
# set, in which case that Redis is used), builds the keylatch command, and runs
# `keylatch demo`: FIFO-ordered jobs on the fair lock, a cache refresh with the
# read-write lock, and a semaphore capping concurrency. It ends with a summary
# saying whether each property held, and fails if one did not.
#
# Then, when ZooKeeper can be started (./scripts/setup-zookeeper.sh installs it),
# the same story on a throwaway standalone ZooKeeper: `keylatch --url zk://… demo`
# (exclusion, FIFO, read-write, fencing tokens, a lost session, the semaphore).
# Without ZooKeeper that part is skipped with a note; every server it started is
# stopped when the script ends, on failure and interruption too.
#
#   ./scripts/demo.sh             # on one throwaway redis-server
#   ./scripts/demo.sh --cluster   # on a throwaway Redis Cluster (3 primaries, 3 replicas)
#   ./scripts/demo.sh --no-zookeeper   # the Redis part only
set -euo pipefail

SCRIPT_NAME="demo.sh"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
cd "$ROOT"

CLUSTER=0
ZOOKEEPER=1
while [ $# -gt 0 ]; do
    case "$1" in
        --cluster) CLUSTER=1 ;;
        --no-zookeeper) ZOOKEEPER=0 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
    shift
done

ZK_CONF_DIR="/etc/zookeeper/conf"
ZK_JAR="/usr/share/java/zookeeper.jar"
ZK_PID="" ZK_DIR="" ZK_PORT=""

# Whether a standalone ZooKeeper can be started here (as the testkit starts one).
zookeeper_installed() {
    command -v java >/dev/null 2>&1 && [ -f "$ZK_JAR" ]
}

# Waits (60 s at most: a JVM starts slowly on a busy machine) until the ZooKeeper with pid
# $1 serves on 127.0.0.1:$2 (`srvr` answers with its mode); fails if it exits first. Each
# probe gets 2 s: a server still starting may accept a connection and not answer.
zookeeper_answers() {
    local pid="$1" port="$2" _
    for _ in $(seq 1 120); do
        kill -0 "$pid" 2>/dev/null || return 1
        # shellcheck disable=SC2016 # expanded by the inner shell
        if timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf srvr >&3 &&
            grep -q "^Mode" <&3' _ "$port" 2>/dev/null; then
            return 0
        fi
        sleep 0.5
    done
    return 1
}

# Starts a throwaway standalone ZooKeeper on a free port (short ticks, so a paused session
# ends within seconds; no fsync: nothing in it is kept). Sets ZK_PORT.
start_throwaway_zookeeper() {
    ZK_DIR="$(mktemp -d "${TMPDIR:-/tmp}/keylatch-script-zookeeper.XXXXXX")"
    local attempt port
    for attempt in 1 2 3; do
        port="$(free_port)"
        mkdir -p "$ZK_DIR/data"
        cat >"$ZK_DIR/zoo.cfg" <<CFG
tickTime=500
dataDir=$ZK_DIR/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr
forceSync=no
CFG
        # A small, quick-starting JVM (the testkit's flags).
        java -Xms16m -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
            -cp "$ZK_CONF_DIR:$ZK_JAR" org.apache.zookeeper.server.ZooKeeperServerMain \
            "$ZK_DIR/zoo.cfg" </dev/null >>"$ZK_DIR/zookeeper.log" 2>&1 &
        ZK_PID=$!
        if zookeeper_answers "$ZK_PID" "$port"; then
            ZK_PORT="$port"
            log "started ZooKeeper (pid $ZK_PID) on 127.0.0.1:$port"
            return 0
        fi
        kill -9 "$ZK_PID" 2>/dev/null || true
        wait "$ZK_PID" 2>/dev/null || true
        ZK_PID=""
        log "ZooKeeper did not come up on port $port (attempt $attempt); log tail:"
        tail -n 5 "$ZK_DIR/zookeeper.log" 2>/dev/null || true
    done
    die "could not start a throwaway ZooKeeper"
}

stop_throwaway_zookeeper() {
    local pid="$ZK_PID"
    if [ -n "$pid" ]; then
        ZK_PID=""
        kill "$pid" 2>/dev/null || true
        reap "$pid"
        log "stopped ZooKeeper (pid $pid)"
    fi
    if [ -n "$ZK_DIR" ]; then
        rm -rf "$ZK_DIR"
        ZK_DIR=""
    fi
}

on_exit() {
    local status=$?
    stop_throwaway_zookeeper
    stop_throwaway_redis
    stop_throwaway_cluster
    exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

section "making sure Redis and the Rust tools are installed"
"$ROOT/scripts/setup.sh"

if [ "$CLUSTER" -eq 1 ]; then
    section "starting a throwaway Redis Cluster just for this demo"
    start_throwaway_cluster
    export REDIS_URL="$THROWAWAY_CLUSTER_URL"
    log "its nodes are stopped when the demo ends"
elif [ -n "${REDIS_URL:-}" ]; then
    section "using the Redis you gave in REDIS_URL: $REDIS_URL"
else
    section "starting a throwaway Redis server just for this demo"
    start_throwaway_redis
    export REDIS_URL="redis://127.0.0.1:$THROWAWAY_REDIS_PORT"
    log "it listens at $REDIS_URL and is stopped when the demo ends"
fi

section "building the keylatch command"
cargo build --locked -p keylatch-cli
bin="${CARGO_TARGET_DIR:-$ROOT/target}/debug/keylatch"
[ -x "$bin" ] || die "the keylatch binary $bin was not built"

section "running keylatch demo: FIFO jobs, cache refresh, capped concurrency, each across real processes"
"$bin" --redis "$REDIS_URL" demo || die "the demo failed: a property did not hold (see above)"
log "demo finished: every property held"

if [ "$ZOOKEEPER" -eq 0 ]; then
    exit 0
fi
if ! zookeeper_installed; then
    log "ZooKeeper is not installed (java and $ZK_JAR): skipping its part; ./scripts/setup-zookeeper.sh installs it"
    exit 0
fi
section "starting a throwaway ZooKeeper just for this demo"
start_throwaway_zookeeper
log "it listens at zk://127.0.0.1:$ZK_PORT and is stopped when the demo ends"

section "running keylatch demo on ZooKeeper: exclusion, FIFO, read-write, fencing tokens, a lost session, the semaphore"
"$bin" --url "zk://127.0.0.1:$ZK_PORT" demo || die "the ZooKeeper demo failed: a property did not hold (see above)"
log "ZooKeeper demo finished: every property held"
