#!/usr/bin/env bash
# Runs every check CI runs: stray root files, setup, fmt, the docs-vs-code check, clippy,
# tests, doc tests, docs, and
# every example (against a throwaway redis-server whose URL is in REDIS_URL).
#
# Usage: scripts/test.sh [--full] [--matrix] [--servers] [--chaos]
#   --full      also run the long suites (exports KEYLATCH_FULL=1 for them)
#   --matrix    also run the primitive, Redisson interoperability, topology and fault
#               suites against Valkey 9.1 and Redis 8.2 (what CI runs; see
#               "Supported servers" in docs/deployment.md)
#   --servers   also run the whole test suite once per server build in .servers/
#               (scripts/setup.sh --servers provides them)
#   --chaos     also run the chaos slice (scripts/chaos.sh --ci: network namespaces,
#               needs root): a safe configuration under faults must show no violation,
#               an unsafe one must be caught
set -euo pipefail

SCRIPT_NAME="test.sh"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

usage() { sed -n '2,14s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

MATRIX="" ALL_SERVERS="" CHAOS=""
for arg in "$@"; do
    case "$arg" in
        --full) export KEYLATCH_FULL=1 ;;
        --matrix) MATRIX=1 ;;
        --servers) ALL_SERVERS=1 ;;
        --chaos) CHAOS=1 ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $arg" ;;
    esac
done

cd "$ROOT"
if [ "${CI:-}" = "true" ] || [ "${CI:-}" = "1" ]; then
    export CARGO_TERM_COLOR=never
fi

# Incremental artifacts only pay off on the next edit; a one-shot check does not make
# one, and they took a fifth of the disk a run used. `CARGO_INCREMENTAL=1` keeps them.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

STEP="starting"
TEST_LOG="$(mktemp "${TMPDIR:-/tmp}/keylatch-test-log.XXXXXX")"
on_exit() {
    local status=$?
    stop_throwaway_redis
    rm -f "$TEST_LOG"
    if [ "$status" -ne 0 ]; then
        printf '\n%s: FAILED during: %s (exit status %s)\n' "$SCRIPT_NAME" "$STEP" "$status" >&2
    fi
    exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Each step's time, printed when it ends and again in the summary, against the budgets CI
# keeps to (the whole of .ci/run must end within 90 minutes): the checks ≤ 30 minutes, the
# server matrix ≤ 10, the chaos slice ≤ 15. A part over its budget is named in the summary;
# what does not fit belongs behind --full.
STEP_STARTED=""
STEP_TIMES=()
declare -A PART_SECONDS=([checks]=0 [matrix]=0 [chaos]=0)
declare -A PART_BUDGET=([checks]=1800 [matrix]=600 [chaos]=900)
part_of() {
    case "$1" in
        "server matrix"*) echo matrix ;;
        "chaos slice"*) echo chaos ;;
        *) echo checks ;;
    esac
}
end_step() {
    [ -n "$STEP_STARTED" ] || return 0
    local took=$((SECONDS - STEP_STARTED)) part
    part="$(part_of "$STEP_NAME")"
    PART_SECONDS[$part]=$((PART_SECONDS[$part] + took))
    STEP_TIMES+=("$(printf '%6d s  %s' "$took" "$STEP_NAME")")
    log "took ${took} s: $STEP_NAME"
    STEP_STARTED=""
}
step() {
    end_step
    STEP="$*"
    STEP_NAME="$*"
    STEP_STARTED=$SECONDS
    section "$*"
}

step "stray files (every tracked file at the repository's root is one the project means to have)"
# What the root holds on purpose: the workspace's manifest and lock file, the README, the
# CHANGELOG, the licences, clippy's settings and dot-files (.gitignore, .github/…). Anything
# else there (a shell's scratch output, a log) fails the run; add a file here when it belongs.
ROOT_ALLOWED='^(Cargo\.toml|Cargo\.lock|README\.md|CHANGELOG\.md|LICENSE-[A-Z]+|clippy\.toml|rustfmt\.toml|rust-toolchain\.toml|\..+)$'
stray="$(git -C "$ROOT" ls-files | grep -v / | grep -Ev "$ROOT_ALLOWED" || true)"
if [ -n "$stray" ]; then
    {
        log "tracked files at the repository's root that are not in scripts/test.sh's ROOT_ALLOWED:"
        printf '%s\n' "$stray" | sed 's/^/  /'
        log "remove them (git rm), or add them to ROOT_ALLOWED if the project means to ship them"
    } >&2
    exit 1
fi

if [ -n "$MATRIX$ALL_SERVERS" ]; then
    step "setup (scripts/setup.sh --servers --browser)"
    "$ROOT/scripts/setup.sh" --servers --browser
else
    step "setup (scripts/setup.sh --browser)"
    "$ROOT/scripts/setup.sh" --browser
fi

# Free space where target/ lives, in MB (a run that fills the disk fails in the linker).
free_mb() { df -Pm "${CARGO_TARGET_DIR:-$ROOT/target}" | awk 'NR == 2 { print $4 }'; }
mkdir -p "${CARGO_TARGET_DIR:-$ROOT/target}"
FREE_AT_START="$(free_mb)"
log "free disk for target/: ${FREE_AT_START} MB (a fresh clone's run used about 8 400, with --matrix --chaos)"
if [ "${FREE_AT_START:-0}" -lt 7168 ]; then
    log "warning: under 7 GB free; the build may run out of space"
fi

if [ -n "${KEYLATCH_FULL:-}" ]; then
    log "full mode: KEYLATCH_FULL=$KEYLATCH_FULL"
fi

step "format check (cargo fmt --all -- --check)"
cargo fmt --all -- --check

step "docs against the code (scripts/check-docs.py: crate and docs lists, CLI flags, exit codes)"
python3 "$ROOT/scripts/check-docs.py"

step "layers (scripts/check-layers.py: no import circles, crates depend only on lower layers, the core on no store library)"
python3 "$ROOT/scripts/check-layers.py"

step "lint (cargo clippy --workspace --all-targets --locked -- -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "lint without optional features (cargo clippy -p keylatch --lib --no-default-features --locked -- -D warnings)"
cargo clippy -p keylatch --lib --no-default-features --locked -- -D warnings

step "tests (cargo test --workspace --all-targets --locked)"
cargo test --workspace --all-targets --locked 2>&1 | tee -a "$TEST_LOG"

step "tests without optional features (cargo test -p keylatch --no-default-features --test no_tls --locked)"
cargo test -p keylatch --no-default-features --test no_tls --locked 2>&1 | tee -a "$TEST_LOG"

step "doc tests (cargo test --workspace --doc --locked)"
cargo test --workspace --doc --locked 2>&1 | tee -a "$TEST_LOG"

step "docs (RUSTDOCFLAGS=\"-D warnings\" cargo doc --workspace --no-deps --locked)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

step "packaging (cargo publish --workspace --dry-run: each published crate builds from its package alone)"
# The dry run verifies each package against the others through a local overlay registry,
# whose unpacked sources cargo reuses by name and version: drop those of an earlier run, or it
# would build stale sources of this version.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/keylatch*-[0-9]*
# Cargo also takes a registry crate's build as final (it never looks at its sources again):
# forget the builds an earlier dry run made of ours, found by the sources their dep-info
# names, or a package would be verified against a stale build of the one it depends on.
for depinfo in target/debug/deps/keylatch*-*.d; do
    [ -e "$depinfo" ] || continue
    if grep -q "registry/src/[^/]*/keylatch" "$depinfo"; then
        unit="$(basename "$depinfo" .d)"
        rm -rf "target/debug/.fingerprint/${unit//_/-}" "$depinfo"
    fi
done
cargo publish --workspace --dry-run --locked --allow-dirty

step "examples (each examples/*.rs, with REDIS_URL set)"
# Prints the [package] name of the Cargo.toml given.
package_name() {
    awk -F'"' '/^\[/ { in_pkg = ($0 == "[package]") } in_pkg && /^name *=/ { print $2; exit }' "$1"
}
examples=()
for dir in crates/*/*/ */; do
    dir="${dir%/}"
    if [ ! -f "$dir/Cargo.toml" ] || [ ! -d "$dir/examples" ]; then
        continue
    fi
    crate="$(package_name "$dir/Cargo.toml")"
    [ -n "$crate" ] || continue
    for file in "$dir"/examples/*.rs "$dir"/examples/*/main.rs; do
        [ -f "$file" ] || continue
        case "$file" in
            */main.rs) name="$(basename "$(dirname "$file")")" ;;
            *) name="$(basename "$file" .rs)" ;;
        esac
        examples+=("$crate $name")
    done
done
if [ "${#examples[@]}" -eq 0 ]; then
    log "no examples found"
else
    start_throwaway_redis
    export REDIS_URL="redis://127.0.0.1:$THROWAWAY_REDIS_PORT"
    log "REDIS_URL=$REDIS_URL"
    for entry in "${examples[@]}"; do
        read -r crate name <<<"$entry"
        STEP="example $name of $crate"
        log "running example $name (crate $crate)"
        timeout --kill-after=10s "${KEYLATCH_EXAMPLE_TIMEOUT:-300}" \
            cargo run --locked -p "$crate" --all-features --example "$name"
    done
    stop_throwaway_redis
    unset REDIS_URL
    log "${#examples[@]} example(s) ran fine"
fi

# The executable of the server build in the folder $1 (its one *-server file).
build_server() {
    local exe
    for exe in "$1"/*-server; do
        [ -x "$exe" ] && { echo "$exe"; return 0; }
    done
    return 1
}

# The suites run against each other build by --matrix: every primitive, the Redisson
# interoperability and layout suites, the topologies (Sentinel, Cluster, TLS) and the
# fault and failover suites.
MATRIX_TESTS=(
    exclusion reentrancy lease watchdog lost wakeup multilock redlock owners
    fair_exclusion fair_grant fair_order fair_liveness
    rwlock_exclusion rwlock_semantics rwlock_crash
    semaphore_exclusion semaphore_permits semaphore_semantics semaphore_wakeup semaphore_crash
    redisson_fair redisson_semaphore layout fair_layout rwlock_layout
    sentinel cluster cluster_keys tls script_flush replica_ack
    fault_memory fault_network fault_primitives fault_processes fault_replies fault_restart
    failover_single failover_sentinel failover_cluster
)
# The builds --matrix runs them against: one Valkey 9.x, one Redis 8.x.
MATRIX_BUILDS=(valkey-9.1 redis-8.2)

if [ -n "$MATRIX" ] && [ -z "$ALL_SERVERS" ]; then
    matrix_args=()
    for t in "${MATRIX_TESTS[@]}"; do matrix_args+=(--test "$t"); done
    for name in "${MATRIX_BUILDS[@]}"; do
        exe="$(build_server "$ROOT/.servers/$name")" ||
            die "server build $name is missing from .servers/ (scripts/setup.sh --servers provides it)"
        step "server matrix: ${#MATRIX_TESTS[@]} suites against $name ($("$exe" --version | cut -d' ' -f1-3))"
        started=$SECONDS
        # --workspace, as the tests above, so that nothing is built again (features unify
        # the same way); it also runs keylatch-cli's suites of the same names.
        KEYLATCH_TEST_SERVER="$exe" cargo test --locked --workspace "${matrix_args[@]}" 2>&1 | tee -a "$TEST_LOG"
        log "server matrix on $name took $((SECONDS - started)) s"
    done
fi

if [ -n "$ALL_SERVERS" ]; then
    found=0
    for dir in "$ROOT"/.servers/*/; do
        exe="$(build_server "${dir%/}")" || continue
        found=$((found + 1))
        step "whole suite against $(basename "$dir") ($("$exe" --version | cut -d' ' -f1-3))"
        started=$SECONDS
        KEYLATCH_TEST_SERVER="$exe" cargo test --workspace --all-targets --locked 2>&1 | tee -a "$TEST_LOG"
        log "whole suite on $(basename "$dir") took $((SECONDS - started)) s"
    done
    [ "$found" -gt 0 ] || die "no server build in .servers/ (scripts/setup.sh --servers provides them)"
fi

if [ -n "$CHAOS" ]; then
    if [ "$(id -u)" = 0 ]; then
        step "chaos slice (scripts/chaos.sh --ci --debug)"
        started=$SECONDS
        "$ROOT/scripts/chaos.sh" --ci --debug 2>&1 | tee -a "$TEST_LOG"
        log "chaos slice took $((SECONDS - started)) s"
    else
        log "chaos slice: skipped: needs root (network namespaces and nftables)"
    fi
fi

end_step
STEP="summary"
printf '\n%s: time per step\n' "$SCRIPT_NAME"
printf '  %s\n' "${STEP_TIMES[@]}"
over=0
for part in checks matrix chaos; do
    budget="${PART_BUDGET[$part]}"
    spent="${PART_SECONDS[$part]}"
    if [ "$spent" -gt "$budget" ]; then
        over=1
        printf '%s: %s took %d s, over its budget of %d s\n' "$SCRIPT_NAME" "$part" "$spent" "$budget"
    else
        printf '%s: %s took %d s (budget %d s)\n' "$SCRIPT_NAME" "$part" "$spent" "$budget"
    fi
done
[ "$over" = 0 ] || log "warning: a part went over its budget: move what does not fit behind --full"
# Sum the "test result:" lines of every cargo test run.
read -r passed failed ignored < <(
    sed -n 's/^test result: [A-Za-z]*\. \([0-9]*\) passed; \([0-9]*\) failed; \([0-9]*\) ignored.*/\1 \2 \3/p' "$TEST_LOG" |
        awk '{ p += $1; f += $2; i += $3 } END { print p + 0, f + 0, i + 0 }'
)
# A test that returned early for a capability its server build lacks printed a
# "<test>: skipped: <reason>" line (and counted as passed).
capability_skips="$(grep -c ': skipped: ' "$TEST_LOG" || true)"
if [ "$capability_skips" -gt 0 ]; then
    printf '\n%s: skipped for a capability the server build lacks:\n' "$SCRIPT_NAME"
    grep ': skipped: ' "$TEST_LOG" | sed 's/ (\/[^)]*)$//' | sort | uniq -c | sed 's/^/  /'
fi
printf '\n%s: all checks passed\n' "$SCRIPT_NAME"
printf '%s: %s passed, %s failed, %s skipped\n' "$SCRIPT_NAME" "$((passed - capability_skips))" "$failed" "$((ignored + capability_skips))"
printf '%s: free disk for target/ %s MB at the start, %s MB now\n' "$SCRIPT_NAME" "$FREE_AT_START" "$(free_mb)"
