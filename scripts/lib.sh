# shellcheck shell=bash
# Shared helpers for scripts/*.sh. Source it; don't run it.
# Needs bash. Defines: section, log, die, free_port, start_throwaway_redis,
# stop_throwaway_redis, redis_answers, reap, start_throwaway_cluster, stop_throwaway_cluster.

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

# Waits (10 s at most) until the redis-server with pid $1 answers on 127.0.0.1:$2; fails if
# it exits first or never answers. The pid is checked too: another server might have the
# port. (redis-cli has no read timeout of its own, hence `timeout`.)
redis_answers() {
    local pid="$1" port="$2" got _
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || return 1
        got="$(timeout 2 redis-cli -h 127.0.0.1 -p "$port" info server 2>/dev/null |
            tr -d '\r' | sed -n 's/^process_id://p')" || true
        [ "$got" = "$pid" ] && return 0
        sleep 0.1
    done
    return 1
}

# Starts a redis-server without persistence on a free loopback port, in the
# background, and waits until it answers PING (10 s at most). Sets
# THROWAWAY_REDIS_PORT/_PID/_DIR. Call stop_throwaway_redis (e.g. from an EXIT
# trap) to stop it.
start_throwaway_redis() {
    command -v redis-server >/dev/null 2>&1 || die "redis-server not found; run ./scripts/setup.sh"
    command -v redis-cli >/dev/null 2>&1 || die "redis-cli not found; run ./scripts/setup.sh"
    THROWAWAY_REDIS_DIR="$(mktemp -d "${TMPDIR:-/tmp}/keylatch-script-redis.XXXXXX")"
    local attempt port pid
    for attempt in 1 2 3 4 5; do
        port="$(free_port)"
        redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
            --daemonize no --dir "$THROWAWAY_REDIS_DIR" \
            --logfile "$THROWAWAY_REDIS_DIR/redis.log" \
            </dev/null >>"$THROWAWAY_REDIS_DIR/stdio.log" 2>&1 &
        pid=$!
        THROWAWAY_REDIS_PID="$pid"
        if redis_answers "$pid" "$port"; then
            # shellcheck disable=SC2034 # read by the sourcing script
            THROWAWAY_REDIS_PORT="$port"
            log "started redis-server (pid $pid) on 127.0.0.1:$port"
            return 0
        fi
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        THROWAWAY_REDIS_PID=""
        log "redis-server did not come up on port $port (attempt $attempt); log tail:"
        tail -n 5 "$THROWAWAY_REDIS_DIR/redis.log" "$THROWAWAY_REDIS_DIR/stdio.log" 2>/dev/null || true
    done
    die "could not start a throwaway redis-server"
}

# Waits (3 s at most) for the process $1, already told to stop, to exit; then kills it.
reap() {
    local pid="$1" _
    for _ in $(seq 1 30); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

stop_throwaway_redis() {
    local pid="$THROWAWAY_REDIS_PID"
    if [ -n "$pid" ]; then
        THROWAWAY_REDIS_PID=""
        kill "$pid" 2>/dev/null || true
        reap "$pid"
        log "stopped redis-server (pid $pid)"
    fi
    if [ -n "$THROWAWAY_REDIS_DIR" ]; then
        rm -rf "$THROWAWAY_REDIS_DIR"
        THROWAWAY_REDIS_DIR=""
    fi
}

# shellcheck disable=SC2034 # read by the scripts that source this file
THROWAWAY_CLUSTER_PIDS=() THROWAWAY_CLUSTER_PORTS=() THROWAWAY_CLUSTER_DIR="" THROWAWAY_CLUSTER_URL=""

# A port for a cluster node: free, with its cluster bus port (+10000) free too. Both stay
# below the kernel's ephemeral range (32768 up), so an outgoing connection cannot take one
# between the check and the bind. Random, so two runs at once rarely meet.
cluster_port() {
    local port _
    for _ in $(seq 1 500); do
        port=$((20000 + RANDOM % 2700))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null &&
            ! (exec 3<>"/dev/tcp/127.0.0.1/$((port + 10000))") 2>/dev/null; then
            echo "$port"
            return
        fi
    done
    die "could not find a free port for a cluster node"
}

# Starts one cluster node on a free port (5 attempts); appends it to
# THROWAWAY_CLUSTER_PORTS/_PIDS.
start_cluster_node() {
    local attempt port pid
    for attempt in 1 2 3 4 5; do
        port="$(cluster_port)" || exit 1
        mkdir -p "$THROWAWAY_CLUSTER_DIR/$port"
        redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
            --daemonize no --dir "$THROWAWAY_CLUSTER_DIR/$port" \
            --cluster-enabled yes --cluster-config-file nodes.conf \
            --cluster-node-timeout 2000 --repl-diskless-sync-delay 0 \
            --logfile "$THROWAWAY_CLUSTER_DIR/$port/redis.log" \
            </dev/null >>"$THROWAWAY_CLUSTER_DIR/$port/stdio.log" 2>&1 &
        pid=$!
        if redis_answers "$pid" "$port"; then
            THROWAWAY_CLUSTER_PIDS+=("$pid")
            THROWAWAY_CLUSTER_PORTS+=("$port")
            return 0
        fi
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        log "a cluster node did not come up on port $port (attempt $attempt); log tail:"
        tail -n 3 "$THROWAWAY_CLUSTER_DIR/$port/redis.log" 2>/dev/null || true
    done
    die "could not start a cluster node"
}

# Starts a Redis Cluster of 3 primaries and 3 replicas on loopback, without persistence,
# and waits until every node says cluster_state:ok (30 s at most). Sets
# THROWAWAY_CLUSTER_URL (redis+cluster:// with the three first nodes as seeds),
# THROWAWAY_CLUSTER_PORTS/_PIDS/_DIR. Call stop_throwaway_cluster (e.g. from an EXIT trap).
start_throwaway_cluster() {
    command -v redis-server >/dev/null 2>&1 || die "redis-server not found; run ./scripts/setup.sh"
    command -v redis-cli >/dev/null 2>&1 || die "redis-cli not found; run ./scripts/setup.sh"
    THROWAWAY_CLUSTER_DIR="$(mktemp -d "${TMPDIR:-/tmp}/keylatch-script-cluster.XXXXXX")"
    local _ ok port
    for _ in 1 2 3 4 5 6; do
        start_cluster_node
    done
    log "started 6 redis-server nodes on 127.0.0.1 ports ${THROWAWAY_CLUSTER_PORTS[*]}"
    local nodes=()
    for port in "${THROWAWAY_CLUSTER_PORTS[@]}"; do nodes+=("127.0.0.1:$port"); done
    timeout 60 redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes \
        >"$THROWAWAY_CLUSTER_DIR/create.log" 2>&1 || {
        tail -n 20 "$THROWAWAY_CLUSTER_DIR/create.log"
        die "redis-cli --cluster create failed"
    }
    for _ in $(seq 1 300); do
        ok=0
        for port in "${THROWAWAY_CLUSTER_PORTS[@]}"; do
            if timeout 2 redis-cli -h 127.0.0.1 -p "$port" cluster info 2>/dev/null |
                tr -d '\r' | grep -qx 'cluster_state:ok'; then
                ok=$((ok + 1))
            fi
        done
        [ "$ok" -eq 6 ] && break
        sleep 0.1
    done
    [ "$ok" -eq 6 ] || die "the cluster did not reach cluster_state:ok on every node"
    local p=("${THROWAWAY_CLUSTER_PORTS[@]}")
    # shellcheck disable=SC2034 # read by the sourcing script
    THROWAWAY_CLUSTER_URL="redis+cluster://127.0.0.1:${p[0]},127.0.0.1:${p[1]},127.0.0.1:${p[2]}"
    log "cluster ready: 3 primaries, 3 replicas ($THROWAWAY_CLUSTER_URL)"
}

stop_throwaway_cluster() {
    local pid
    for pid in "${THROWAWAY_CLUSTER_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${THROWAWAY_CLUSTER_PIDS[@]}"; do
        reap "$pid"
    done
    if [ "${#THROWAWAY_CLUSTER_PIDS[@]}" -gt 0 ]; then
        log "stopped the cluster's ${#THROWAWAY_CLUSTER_PIDS[@]} redis-server nodes"
    fi
    THROWAWAY_CLUSTER_PIDS=() THROWAWAY_CLUSTER_PORTS=()
    if [ -n "$THROWAWAY_CLUSTER_DIR" ]; then
        rm -rf "$THROWAWAY_CLUSTER_DIR"
        THROWAWAY_CLUSTER_DIR=""
    fi
}
