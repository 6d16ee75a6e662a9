#!/usr/bin/env bash
# Demo: keylatch's use cases, each across real OS processes.
#
# Starts a throwaway redis-server on a free port (unless REDIS_URL is already
# set, in which case that Redis is used), builds the keylatch command, and runs
# `keylatch demo`: FIFO-ordered jobs on the fair lock, a cache refresh with the
# read-write lock, and a semaphore capping concurrency. It ends with a summary
# saying whether each property held, and fails if one did not.
#
#   ./scripts/demo.sh             # on one throwaway redis-server
#   ./scripts/demo.sh --cluster   # on a throwaway Redis Cluster (3 primaries, 3 replicas)
set -euo pipefail

SCRIPT_NAME="demo.sh"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
cd "$ROOT"

CLUSTER=0
while [ $# -gt 0 ]; do
    case "$1" in
        --cluster) CLUSTER=1 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
    shift
done

on_exit() {
    local status=$?
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
