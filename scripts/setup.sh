#!/usr/bin/env bash
# Installs what keylatch's tests, examples, benches and CI need. Idempotent:
# installs only what is missing, and only from Debian's packages (redis-server)
# and rustup components (rustfmt, clippy).
#
# It does not start Redis: tests start their own throwaway servers (see
# crates/keylatch-testkit). If the Debian package starts a system redis
# service on 6379, that is left alone and nothing relies on it.
set -euo pipefail

SCRIPT_NAME="setup.sh"
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Runs a command as root: directly if we are root, else through sudo.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root or sudo to run: $*"
    fi
}

# --- Redis (server, redis-cli, redis-benchmark) ------------------------------
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
    log "redis-server already installed: $(redis-server --version)"
else
    command -v apt-get >/dev/null 2>&1 ||
        die "redis-server is missing and apt-get is not available; install Redis 7+ (redis-server, redis-cli) with your package manager"
    log "redis-server is missing: installing the Debian package redis-server"
    log "running: apt-get update"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update
    log "running: apt-get install -y redis-server"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server
    command -v redis-server >/dev/null 2>&1 || die "redis-server still not on PATH after installing"
    log "installed: $(redis-server --version)"
fi

redis_major="$(redis-server --version | sed -n 's/.* v=\([0-9]*\)\..*/\1/p')"
if [ -n "$redis_major" ] && [ "$redis_major" -lt 7 ]; then
    log "warning: redis-server $redis_major.x found; tests that use DEBUG need Redis 7+"
fi

# --- Rust components -----------------------------------------------------------
command -v cargo >/dev/null 2>&1 || die "cargo not found; install a Rust toolchain with rustup"

ensure_component() { # <cargo subcommand> <rustup component>
    if cargo "$1" --version >/dev/null 2>&1; then
        log "cargo $1 available: $(cargo "$1" --version)"
    else
        command -v rustup >/dev/null 2>&1 || die "cargo $1 is missing and rustup is not available"
        log "cargo $1 is missing: running rustup component add $2"
        rustup component add "$2"
    fi
}
ensure_component fmt rustfmt
ensure_component clippy clippy

"$(dirname "${BASH_SOURCE[0]}")/setup-zookeeper.sh" # ZooKeeper (Java) for the ZooKeeper tests
log "setup complete"
