#!/usr/bin/env bash
# Demo: two processes compete for the same keylatch lock in one Redis.
#
# Starts a throwaway redis-server on a free port (unless REDIS_URL is already
# set, in which case that Redis is used), builds the examples of the keylatch
# crate, then runs the example `two_processes`, which starts two worker
# processes (A and B) that increment a shared counter under one lock, and
# fails if any increment was lost.
set -euo pipefail

SCRIPT_NAME="demo.sh"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
cd "$ROOT"

WORKER_PIDS=()
on_exit() {
    local status=$? pid
    for pid in "${WORKER_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    stop_throwaway_redis
    exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

section "making sure Redis and the Rust tools are installed"
"$ROOT/scripts/setup.sh"

if [ -n "${REDIS_URL:-}" ]; then
    section "using the Redis you gave in REDIS_URL: $REDIS_URL"
else
    section "starting a throwaway Redis server just for this demo"
    start_throwaway_redis
    export REDIS_URL="redis://127.0.0.1:$THROWAWAY_REDIS_PORT"
    log "it listens at $REDIS_URL and is stopped when the demo ends"
fi

section "building the keylatch examples"
cargo build --locked -p keylatch --examples
bin="${CARGO_TARGET_DIR:-$ROOT/target}/debug/examples/two_processes"
[ -x "$bin" ] || die "the example binary $bin was not built (is there crates/keylatch/examples/two_processes.rs?)"

section "running two separate processes, worker A and worker B, that share one lock"
log "both talk to $REDIS_URL; only one may hold the lock at a time"
log "each adds 1 to a shared counter 50 times (read, pause, write) under the lock"
# Without arguments the example starts the two workers itself and checks the counter.
"$bin" || die "the demo failed: see above"
log "demo finished: no increment was lost, so the two processes never overlapped"
