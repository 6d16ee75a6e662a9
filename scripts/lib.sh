# shellcheck shell=bash
# Shared helpers for scripts/*.sh. Source it; don't run it.
# Needs bash. Defines: section, log, die, free_port, start_throwaway_redis,
# stop_throwaway_redis.

# Name shown in front of messages; scripts set it before sourcing.
: "${SCRIPT_NAME:=scripts}"

log() { printf '%s: %s\n' "$SCRIPT_NAME" "$*"; }
die() { printf '%s: error: %s\n' "$SCRIPT_NAME" "$*" >&2; exit 1; }
section() { printf '\n==> %s: %s\n' "$SCRIPT_NAME" "$*"; }

# Prints a TCP port on 127.0.0.1 that nobody listens on right now.
free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
        return
    fi
    local port _
    for _ in $(seq 1 200); do
        port=$((20000 + RANDOM % 12000))
        # A refused connection means the port is free.
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return
        fi
    done
    die "could not find a free port"
}

# shellcheck disable=SC2034 # read by the scripts that source this file
THROWAWAY_REDIS_PID="" THROWAWAY_REDIS_DIR="" THROWAWAY_REDIS_PORT=""

# Starts a redis-server without persistence on a free loopback port, in the
# background, and waits until it answers PING (10 s at most). Sets
# THROWAWAY_REDIS_PORT/_PID/_DIR. Call stop_throwaway_redis (e.g. from an EXIT
# trap) to stop it.
start_throwaway_redis() {
    command -v redis-server >/dev/null 2>&1 || die "redis-server not found; run ./scripts/setup.sh"
    command -v redis-cli >/dev/null 2>&1 || die "redis-cli not found; run ./scripts/setup.sh"
    THROWAWAY_REDIS_DIR="$(mktemp -d "${TMPDIR:-/tmp}/keylatch-script-redis.XXXXXX")"
    local attempt port pid _ got
    for attempt in 1 2 3 4 5; do
        port="$(free_port)"
        redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
            --daemonize no --dir "$THROWAWAY_REDIS_DIR" \
            --logfile "$THROWAWAY_REDIS_DIR/redis.log" \
            </dev/null >>"$THROWAWAY_REDIS_DIR/stdio.log" 2>&1 &
        pid=$!
        THROWAWAY_REDIS_PID="$pid"
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            # Check the pid too: another server might have grabbed the port.
            # (redis-cli has no read timeout of its own.)
            got="$(timeout 2 redis-cli -h 127.0.0.1 -p "$port" info server 2>/dev/null |
                tr -d '\r' | sed -n 's/^process_id://p')" || true
            if [ "$got" = "$pid" ]; then
                # shellcheck disable=SC2034 # read by the sourcing script
                THROWAWAY_REDIS_PORT="$port"
                log "started redis-server (pid $pid) on 127.0.0.1:$port"
                return 0
            fi
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        THROWAWAY_REDIS_PID=""
        log "redis-server did not come up on port $port (attempt $attempt); log tail:"
        tail -n 5 "$THROWAWAY_REDIS_DIR/redis.log" "$THROWAWAY_REDIS_DIR/stdio.log" 2>/dev/null || true
    done
    die "could not start a throwaway redis-server"
}

stop_throwaway_redis() {
    local pid="$THROWAWAY_REDIS_PID" _
    if [ -n "$pid" ]; then
        THROWAWAY_REDIS_PID=""
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 30); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        log "stopped redis-server (pid $pid)"
    fi
    if [ -n "$THROWAWAY_REDIS_DIR" ]; then
        rm -rf "$THROWAWAY_REDIS_DIR"
        THROWAWAY_REDIS_DIR=""
    fi
}
