#!/usr/bin/env bash
# Installs Apache ZooKeeper for keylatch's ZooKeeper tests: Debian's `zookeeper`
# package and the Java runtime it depends on. Idempotent: does nothing when
#   java -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar \
#       org.apache.zookeeper.server.ZooKeeperServerMain
# can already be started (the testkit starts servers exactly this way).
#
# It starts no server: tests start their own throwaway servers and ensembles (see
# crates/keylatch-testkit/src/zookeeper.rs). If the package starts a system
# zookeeper service, that is left alone and nothing relies on it.
set -euo pipefail

SCRIPT_NAME="setup-zookeeper.sh"
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ZK_CONF_DIR="/etc/zookeeper/conf"
ZK_JAR="/usr/share/java/zookeeper.jar"
ZK_MAIN="org.apache.zookeeper.server.ZooKeeperServerMain"

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

# Whether java runs and finds the server's main class. Run without arguments it prints
# its usage and exits with status 2; a missing class or jar fails differently.
zookeeper_available() {
    command -v java >/dev/null 2>&1 || return 1
    [ -f "$ZK_JAR" ] && [ -d "$ZK_CONF_DIR" ] || return 1
    local out
    out="$(timeout 60 java -cp "$ZK_CONF_DIR:$ZK_JAR" "$ZK_MAIN" 2>&1 </dev/null)" || true
    printf '%s\n' "$out" | grep -q 'Usage: ZooKeeperServerMain'
}

if zookeeper_available; then
    log "zookeeper already installed: $ZK_JAR ($(java -version 2>&1 | head -n 1))"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 ||
    die "zookeeper is missing and apt-get is not available; install ZooKeeper 3.x with a Java runtime so that $ZK_JAR and $ZK_CONF_DIR exist"
log "zookeeper is missing: installing the Debian package zookeeper (with its Java runtime)"
log "running: apt-get update"
as_root env DEBIAN_FRONTEND=noninteractive apt-get update
log "running: apt-get install -y --no-install-recommends zookeeper default-jre-headless"
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    zookeeper default-jre-headless
zookeeper_available || die "java still cannot start $ZK_MAIN from $ZK_JAR after installing"
log "installed: $ZK_JAR ($(java -version 2>&1 | head -n 1))"
