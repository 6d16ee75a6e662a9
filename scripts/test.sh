#!/usr/bin/env bash
# Runs every check CI runs: setup, fmt, clippy, tests, doc tests, docs, and
# every example (against a throwaway redis-server whose URL is in REDIS_URL).
#
# Usage: scripts/test.sh [--full]
#   --full   also run the long suites (exports KEYLATCH_FULL=1 for them)
set -euo pipefail

SCRIPT_NAME="test.sh"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

usage() { sed -n '2,6s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

for arg in "$@"; do
    case "$arg" in
        --full) export KEYLATCH_FULL=1 ;;
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

step() {
    STEP="$*"
    section "$*"
}

step "setup (scripts/setup.sh)"
"$ROOT/scripts/setup.sh"

# Free space where target/ lives, in MB (a run that fills the disk fails in the linker).
free_mb() { df -Pm "${CARGO_TARGET_DIR:-$ROOT/target}" | awk 'NR == 2 { print $4 }'; }
mkdir -p "${CARGO_TARGET_DIR:-$ROOT/target}"
FREE_AT_START="$(free_mb)"
log "free disk for target/: ${FREE_AT_START} MB (a clean run uses about 4 500)"
if [ "${FREE_AT_START:-0}" -lt 5120 ]; then
    log "warning: under 5 GB free; the build may run out of space"
fi

if [ -n "${KEYLATCH_FULL:-}" ]; then
    log "full mode: KEYLATCH_FULL=$KEYLATCH_FULL"
fi

step "format check (cargo fmt --all -- --check)"
cargo fmt --all -- --check

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
for dir in crates/*/ */; do
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

STEP="summary"
# Sum the "test result:" lines of both cargo test runs.
read -r passed failed ignored < <(
    sed -n 's/^test result: [A-Za-z]*\. \([0-9]*\) passed; \([0-9]*\) failed; \([0-9]*\) ignored.*/\1 \2 \3/p' "$TEST_LOG" |
        awk '{ p += $1; f += $2; i += $3 } END { print p + 0, f + 0, i + 0 }'
)
printf '\n%s: all checks passed\n' "$SCRIPT_NAME"
printf '%s: %s passed, %s failed, %s skipped\n' "$SCRIPT_NAME" "$passed" "$failed" "$ignored"
printf '%s: free disk for target/ %s MB at the start, %s MB now\n' "$SCRIPT_NAME" "$FREE_AT_START" "$(free_mb)"
