//! What the benchmarks share: percentiles, the raw EVALSHA baseline and command counts.
// Each benchmark uses a part of this module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use std::time::Instant;

use keylatch::redis::{self, aio::MultiplexedConnection};

/// A script doing as little as an acquire does to one key, for the raw baseline.
pub const RAW_SCRIPT: &str = "return redis.call('exists', KEYS[1])";

/// The `p` quantile (0..=1) of sorted samples; zero for none.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index]
}

pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// One raw EVALSHA round trip of `script` on `key`.
pub async fn raw_eval(conn: &mut MultiplexedConnection, script: &redis::Script, key: &str) {
    let _: i64 = script
        .key(key)
        .invoke_async(conn)
        .await
        .expect("raw evalsha");
}

/// Commands the server has run so far, by name (`INFO commandstats`), and the microseconds it
/// spent in each under "`name` usec".
pub async fn command_counts(conn: &mut MultiplexedConnection) -> BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
            let usec = rest.split(',').find_map(|kv| kv.strip_prefix("usec="))?;
            Some([
                (name.to_owned(), calls.parse().ok()?),
                (format!("{name} usec"), usec.parse().ok()?),
            ])
        })
        .flatten()
        .collect()
}

/// Commands per operation between two [`command_counts`], as "name calls, …", with the
/// server's time in scripts ("evalsha usec"); `INFO` itself left out.
pub fn command_delta(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    ops: usize,
) -> String {
    after
        .iter()
        .filter_map(|(name, calls)| {
            let delta = calls - before.get(name).copied().unwrap_or(0);
            (delta > 0
                && !name.starts_with("info")
                && (!name.ends_with(" usec") || name == "evalsha usec"))
                .then(|| format!("{name} {:.3}", delta as f64 / ops.max(1) as f64))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A client of `server` with the default settings, or `KEYLATCH_BENCH_CONNECTIONS` command
/// connections when that is set. The builder starts from the environment, so
/// `KEYLATCH_COALESCE=0` turns coalescing off.
pub async fn client(server: &keylatch_testkit::RedisServer) -> keylatch::Client {
    let mut builder = keylatch::Config::builder().url(server.url());
    if let Some(n) = std::env::var("KEYLATCH_BENCH_CONNECTIONS")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        builder = builder.connections(n);
    }
    keylatch::Client::connect_with(builder.build().expect("config"))
        .await
        .expect("connect")
}

/// Hand-off gaps, sorted: from each `(acquired, released)` event's release to the next
/// acquisition, in time order.
pub fn handoff_gaps(events: &[(Instant, Instant)]) -> Vec<Duration> {
    let mut events = events.to_vec();
    events.sort();
    let mut gaps: Vec<Duration> = events
        .windows(2)
        .map(|w| w[1].0.saturating_duration_since(w[0].1))
        .collect();
    gaps.sort();
    gaps
}
