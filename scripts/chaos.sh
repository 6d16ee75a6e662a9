#!/usr/bin/env bash
# Chaos runs of keylatch (crates/tools/keylatch-chaos). Needs root: it creates network namespaces,
# veths, a bridge and nftables rules (all named klc-*, on 10.213.7.0/24 inside its own
# namespaces only) and removes them at the end. Installs iproute2, nftables and a C compiler
# from Debian when missing, and ZooKeeper (the zk3 topology) through scripts/setup-zookeeper.sh.
#
# Usage: scripts/chaos.sh [--debug] [--ci | -- ARGS...]
#   --ci      the cleanup tests, then seeded 90-second runs in watchdog mode (the default) of
#             each safe topology under every fault (single-aof-everysec, redlock5,
#             sentinel-ack, cluster-ack, and zk3, a three-node ZooKeeper ensemble, without
#             client pauses; each fails on any violation, lost updates included), and single (no persistence) under kills
#             for 90 seconds in lease mode (fails unless the checker finds a double holder AND
#             lost updates in the unfenced counter); prints each part's time
#   --debug   a debug build instead of --release
#   ARGS      passed to keylatch-chaos, e.g. -- --seed 7 --minutes 3 --topology single-aof
#   cleanup   (as ARGS) removes what an interrupted run left behind
set -euo pipefail

SCRIPT_NAME="chaos.sh"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

usage() { sed -n '2,18s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

CI_MODE=0
PROFILE=release
ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --ci) CI_MODE=1 ;;
        --debug) PROFILE=debug ;;
        -h | --help) usage; exit 0 ;;
        --) shift; ARGS=("$@"); break ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
    shift
done

[ "$(id -u)" = 0 ] || die "needs root (network namespaces and nftables)"
missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v nft >/dev/null 2>&1 || missing+=(nftables)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
if [ ${#missing[@]} -gt 0 ]; then
    section "installing ${missing[*]}"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi
command -v redis-server >/dev/null 2>&1 || die "redis-server is not installed (scripts/setup.sh)"
# The zk3 topology runs Debian's ZooKeeper (java and its jar); installed as scripts/setup.sh does.
if ! command -v java >/dev/null 2>&1 || [ ! -f /usr/share/java/zookeeper.jar ]; then
    section "installing ZooKeeper (the zk3 topology)"
    "$ROOT/scripts/setup-zookeeper.sh"
fi

cd "$ROOT"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
build_flags=(-p keylatch-chaos)
[ "$PROFILE" = release ] && build_flags+=(--release)
section "building keylatch-chaos ($PROFILE)"
cargo build "${build_flags[@]}"
BIN="$TARGET/$PROFILE/keylatch-chaos"

if [ "$CI_MODE" = 0 ]; then
    exec "$BIN" "${ARGS[@]}"
fi

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

CI_START=$SECONDS
PART_START=$SECONDS
# Prints how long the part that just ended took, and the total so far.
part_done() {
    log "ci: $1 took $((SECONDS - PART_START)) s (total $((SECONDS - CI_START)) s)"
    PART_START=$SECONDS
}

section "cleanup tests (SIGINT, panic, a fault-free run)"
cargo test "${build_flags[@]}" -- --include-ignored
part_done "the cleanup tests"

# The safe configurations, each in watchdog mode under every fault of the slice (kills,
# partitions, pauses; failovers on the cluster; zk3 without client pauses, see below) for
# 90 s: no violation allowed (lost updates in the unfenced counter and the liveness checks
# included).
safe_run() {
    local name="$1" nemesis="$2"
    shift 2
    section "$name, faults: $nemesis, watchdog mode: no violation allowed"
    set +e
    "$BIN" "$@" --mode watchdog --nemesis "$nemesis" --out "$OUT/$name.json"
    local rc=$?
    set -e
    [ "$rc" = 0 ] || die "$name under faults: exit $rc (1: a violation, shown above; 2: the harness failed)"
    grep -q '"lost_updates": 0,' "$OUT/$name.json" || die "$name: lost updates in the unfenced counter"
    part_done "$name"
}
safe_run single-aof-everysec all --seed 1 --minutes 1.5 --topology single-aof-everysec
safe_run redlock5 all --seed 1 --minutes 1.5 --topology redlock5 --workload redlock
safe_run sentinel-ack all --seed 1 --minutes 1.5 --topology sentinel-ack
safe_run cluster-ack all --seed 1 --minutes 1.5 --topology cluster-ack
# A ZooKeeper ensemble, every fault but pause-client on one server of three (the leader half
# the time). Not pause-client: a ZooKeeper hold's guard has no local deadline (the session
# watcher marks it lost when the client hears of the expiry), so a holder stopped for longer
# than the session timeout still sees itself holding when it runs again, writes back, and
# the unfenced counter loses updates (docs/reliability.md, "Evidence v2"; seed 1 in watchdog
# mode: 3 lost updates in 90 s). That run is the defect's evidence, not a slice that passes.
safe_run zk3 partition,loss,pause-server,kill --seed 1 --minutes 1.5 --topology zk3

# The unsafe configuration: a restart without persistence forgets the lock; the damage must
# show in the unfenced counter, not only as overlapping holds. In lease mode, with holds of up
# to 2.8 s: a holder writes back by its own clock, so a double holder loses updates (measured:
# 2 in 90 s, seed 4). In watchdog mode the worker's check before the write-back sees most such
# losses and skips the write (1 lost update in 90 s, 0 with 2.8 s holds), too rare to require.
section "single (no persistence), kills, lease mode: the checker must find a double holder and lost updates"
set +e
"$BIN" --seed 4 --minutes 1.5 --topology single --mode lease --max-hold-ms 2800 --nemesis kill --out "$OUT/unsafe.json"
rc=$?
set -e
case "$rc" in
    1) ;;
    0) die "single with kills: no violation found; the checker (or the nemesis) missed the double holder" ;;
    *) die "single with kills: the harness failed (exit $rc)" ;;
esac
grep -q '"mutual-exclusion"' "$OUT/unsafe.json" || die "single with kills: no mutual exclusion violation"
grep -q '"lost-update"' "$OUT/unsafe.json" || die "single with kills: no lost update in the unfenced counter"
if grep -q '"stale-write"' "$OUT/unsafe.json"; then
    die "single with kills: the fenced register accepted a stale write"
fi
part_done "single (unsafe)"
log "ci: the safe runs found nothing, the unsafe run found its double holder and its lost updates; chaos took $((SECONDS - CI_START)) s"
