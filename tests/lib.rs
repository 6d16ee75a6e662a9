//! Shared helpers for the workspace-level integration tests: a real redis-server per test,
//! clients with short timeouts, raw connections for checking the keyspace.
#![allow(missing_docs)]

pub mod checker;
pub mod every;
pub mod redisson;
pub mod support;
pub mod workers;
pub mod zk;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use keylatch::redis::{self, AsyncCommands};
pub use keylatch_testkit::RedisServer;
pub use support::*;

/// Starts a throwaway redis-server.
pub fn server() -> RedisServer {
    RedisServer::start().expect("start redis-server (run ./scripts/setup.sh)")
}

/// A client with the given watchdog timeout (and a fallback poll of `poll`).
pub async fn client_with(
    server: &RedisServer,
    watchdog: Duration,
    poll: Duration,
) -> keylatch::Client {
    let config = keylatch::Config::builder()
        .url(server.url())
        .watchdog_timeout(watchdog)
        .fallback_poll(poll)
        .build()
        .expect("config");
    keylatch::Client::connect_with(config)
        .await
        .expect("connect")
}

/// A client at `url` (a server or a fault proxy) that notices trouble quickly: the given
/// watchdog and response timeouts, a 500 ms connect timeout, a 200 ms fallback poll.
pub async fn client_via(
    url: String,
    watchdog: Duration,
    response_timeout: Duration,
) -> keylatch::Client {
    let config = keylatch::Config::builder()
        .url(url)
        .watchdog_timeout(watchdog)
        .response_timeout(response_timeout)
        // The shortest settle window: `3 × response_timeout + 1 s`.
        .settle_window(Duration::ZERO)
        .connect_timeout(Duration::from_millis(500))
        .fallback_poll(Duration::from_millis(200))
        .build()
        .unwrap();
    keylatch::Client::connect_with(config).await.unwrap()
}

/// A client with default timeouts.
pub async fn client(server: &RedisServer) -> keylatch::Client {
    client_with(server, Duration::from_secs(30), Duration::from_secs(2)).await
}

/// A plain connection that is not keylatch's, to look at and poke the keyspace.
pub async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("raw connection")
}

/// A pub/sub connection that is not keylatch's, to watch the messages the primitives publish.
pub async fn pubsub(server: &RedisServer) -> redis::aio::PubSub {
    redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap()
}

/// A name no other test uses.
pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Every key and its dump, sorted: equal before and after means Redis was left untouched.
pub async fn keyspace(conn: &mut redis::aio::MultiplexedConnection) -> Vec<(String, Vec<u8>, i64)> {
    let mut keys: Vec<String> = conn.keys("*").await.expect("keys");
    keys.sort();
    let mut out = Vec::new();
    for key in keys {
        let dump: Vec<u8> = redis::cmd("DUMP")
            .arg(&key)
            .query_async(conn)
            .await
            .expect("dump");
        let ttl: i64 = conn.pttl(&key).await.expect("pttl");
        // A TTL still running is compared as "has a TTL", not by its exact value.
        out.push((key, dump, ttl.signum()));
    }
    out
}

/// Polls `check` every 10 ms until it holds or `within` passes; returns whether it held.
pub async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Server-side subscriber counts of the channels whose names contain `needle`.
pub async fn server_channels(conn: &mut redis::aio::MultiplexedConnection, needle: &str) -> usize {
    let channels: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg(format!("*{needle}*"))
        .query_async(conn)
        .await
        .expect("pubsub channels");
    channels.len()
}

/// Drops every script from the server's cache (`SCRIPT FLUSH`): the next call of each must
/// load it again.
pub async fn script_flush(conn: &mut redis::aio::MultiplexedConnection) {
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(conn)
        .await
        .expect("script flush");
}

/// How many times the server has run `command` so far (`INFO commandstats`; scripts' inner
/// calls are counted under their own names). 0 for a command it never ran.
pub async fn command_calls(conn: &mut redis::aio::MultiplexedConnection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("info commandstats");
    let prefix = format!("cmdstat_{}:", command.to_ascii_lowercase());
    info.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').find_map(|kv| kv.strip_prefix("calls=")))
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(0)
}

/// Whether the long versions of the suites run (`scripts/test.sh --full` sets
/// `KEYLATCH_FULL=1`).
pub fn full() -> bool {
    std::env::var_os("KEYLATCH_FULL").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Wall-clock time in µs (the worker processes log the same clock).
pub fn now_us() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros()
}
