#!/usr/bin/env bash
# Installs Apache ZooKeeper for keylatch's ZooKeeper tests: Debian's `zookeeper`
# package and the Java runtime it depends on, Apache Curator's recipes
# (`libcurator-recipes-java`) and a JDK for the Curator driver. Idempotent: installs
# nothing when
#   java -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar \
#       org.apache.zookeeper.server.ZooKeeperServerMain
# can already be started (the testkit starts servers exactly this way), the Curator jar is
# there and javac runs.
#
# It starts no server: tests start their own throwaway servers and ensembles (see
# crates/tools/keylatch-testkit/src/zookeeper.rs). If the package starts a system
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

# Apache Curator's recipes (Debian's libcurator-recipes-java, 5.4) and a JDK: the
# interoperability tests compile a small Java driver with javac at test time and run it
# against keylatch (crates/tools/keylatch-testkit/src/curator.rs).
CURATOR_JAR="/usr/share/java/curator-recipes.jar"

packages=()
if zookeeper_available; then
    log "zookeeper already installed: $ZK_JAR ($(java -version 2>&1 | head -n 1))"
else
    packages+=(zookeeper default-jre-headless)
fi
if [ -f "$CURATOR_JAR" ]; then
    log "curator already installed: $CURATOR_JAR"
else
    packages+=(libcurator-recipes-java)
fi
if command -v javac >/dev/null 2>&1; then
    log "javac already installed: $(javac -version 2>&1 | head -n 1)"
else
    packages+=(default-jdk-headless)
fi
if [ "${#packages[@]}" -eq 0 ]; then
    exit 0
fi

command -v apt-get >/dev/null 2>&1 ||
    die "missing ${packages[*]} and apt-get is not available; install ZooKeeper 3.x with a Java runtime so that $ZK_JAR and $ZK_CONF_DIR exist, Curator 5 so that $CURATOR_JAR exists, and a JDK (javac)"
log "installing the Debian packages: ${packages[*]}"
log "running: apt-get update"
as_root env DEBIAN_FRONTEND=noninteractive apt-get update
log "running: apt-get install -y --no-install-recommends ${packages[*]}"
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    "${packages[@]}"
zookeeper_available || die "java still cannot start $ZK_MAIN from $ZK_JAR after installing"
[ -f "$CURATOR_JAR" ] || die "$CURATOR_JAR is still missing after installing"
command -v javac >/dev/null 2>&1 || die "javac is still missing after installing"
log "installed: $ZK_JAR ($(java -version 2>&1 | head -n 1)), $CURATOR_JAR, $(javac -version 2>&1 | head -n 1)"
