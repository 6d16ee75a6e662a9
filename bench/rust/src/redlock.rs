//! RedLock over several independent servers: keylatch's `RedLock` against rslock's
//! `LockManager`, on the same servers, interleaved so that load which drifts over the run hits
//! both alike.
//!
//! * Uncontended: one task, lock + unlock of one resource, back to back; each sample is
//!   keylatch, then rslock, then the limit (one EVALSHA on every server at once, twice).
//! * Contended hand-off: 8 tasks on one resource, each holding 1 ms, in rounds of a fixed
//!   window: keylatch, rslock, keylatch (tuned), rslock (tuned), and again.
//!
//! Every lock has the same fixed lease (10 s). Records go to `--out` as JSON lines
//! (`redlock_uncontended`, `redlock_raw`, `redlock_contended`); `bench/redlock_report.py`
//! renders them.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use redis::aio::MultiplexedConnection;
use serde_json::{Value, json};

use crate::harness::{GRACE, command_counts, contended};
use crate::libs::{self, Variant, Worker};
use crate::{Out, raw_eval, secs};

/// The lease of every lock, keylatch's and rslock's.
pub const LEASE: Duration = Duration::from_secs(10);
/// Tasks contending for the one resource.
const WORKERS: usize = 8;
/// How long each holder keeps the lock.
const HOLD: Duration = Duration::from_millis(1);
/// Lock + unlock pairs counted for the commands per pair (all servers together).
const COUNTED: usize = 100;

/// `[worker, requested, acquired, released]` in ns from a round's start.
type Event = [u64; 4];

/// Runs both scenarios over `urls` (one independent server each) and prints a table.
pub async fn run(urls: &[String], out: &mut Out, scale: f64) {
    let n = urls.len();
    let mut conns = Vec::new();
    for url in urls {
        let client = redis::Client::open(url.as_str()).expect("a redis URL");
        conns.push(
            client
                .get_multiplexed_async_connection()
                .await
                .unwrap_or_else(|e| panic!("connecting to {url}: {e}")),
        );
    }
    let variants = libs::redlock_variants(urls, LEASE)
        .await
        .unwrap_or_else(|e| panic!("connecting the libraries: {e}"));
    let base = format!("kb:{}:redlock{n}", out.run);

    // Uncontended: keylatch and rslock at their defaults (a lone caller never retries).
    eprintln!("rust: RedLock over {n} servers: uncontended lock + unlock");
    let pair = [&variants[0], &variants[1]];
    let window = secs(scale, 3.0);
    let uncontended = tokio::time::timeout(
        window + GRACE,
        side_by_side(&pair, &mut conns, &format!("{base}:s1"), window, 20_000),
    )
    .await;
    let mut table = Vec::new();
    match uncontended {
        Ok(Ok((per_lib, raw))) => {
            for (v, data) in pair.iter().zip(per_lib) {
                table.push(format!(
                    "  {:<36} lock+unlock p50 {:>7.0} us  p99 {:>7.0} us  {:.1} requests",
                    v.label,
                    data["p50_us"].as_f64().unwrap_or(0.0),
                    data["p99_us"].as_f64().unwrap_or(0.0),
                    data["requests_per_pair"].as_f64().unwrap_or(0.0),
                ));
                out.write(
                    Some(v),
                    "redlock_uncontended",
                    json!({"servers": n, "workers": 1, "lease_ms": LEASE.as_millis() as u64}),
                    data,
                );
            }
            table.push(format!(
                "  {:<36} pair    p50 {:>7.0} us  p99 {:>7.0} us",
                "raw EVALSHA on every server at once",
                raw["p50_us"].as_f64().unwrap_or(0.0),
                raw["p99_us"].as_f64().unwrap_or(0.0),
            ));
            out.write(
                None,
                "redlock_raw",
                json!({"servers": n, "lib": "raw",
                       "label": "raw EVALSHA on every server at once, twice (redis-rs)"}),
                raw,
            );
        }
        Ok(Err(e)) => eprintln!("rust: RedLock uncontended failed: {e}"),
        Err(_) => eprintln!("rust: RedLock uncontended timed out"),
    }

    // Contended: rounds, every variant once per round, in the same order.
    let rounds = if scale < 0.5 { 2 } else { 4 };
    let window = secs(scale, 1.5);
    eprintln!(
        "rust: RedLock over {n} servers: {WORKERS} workers, hold 1 ms, {rounds} rounds of {:.2} s",
        window.as_secs_f64()
    );
    let mut runs: Vec<Vec<Value>> = vec![Vec::new(); variants.len()];
    for round in 0..rounds {
        for (i, v) in variants.iter().enumerate() {
            let key = format!("{base}:s4:{}:{}:{round}", v.lib, v.variant);
            let data = contended(&v.imp, &mut conns[0], &key, WORKERS, HOLD, window, 1).await;
            runs[i].push(data);
        }
    }
    for (v, rounds) in variants.iter().zip(&runs) {
        let data = contended_figures(rounds);
        table.push(format!(
            "  {:<36} hand-off p50 {:>7.0} us  p99 {:>7.0} us  {:>5.0} acq/s  per worker {}-{}  Jain {:.3}{}",
            v.label,
            data["gap_p50_us"].as_f64().unwrap_or(f64::NAN),
            data["gap_p99_us"].as_f64().unwrap_or(f64::NAN),
            data["acq_per_s"].as_f64().unwrap_or(0.0),
            data["per_worker_min"],
            data["per_worker_max"],
            data["jain"].as_f64().unwrap_or(f64::NAN),
            match data["errors"].as_u64() {
                Some(0) | None => String::new(),
                Some(e) => format!(
                    ", {e} errors (first: {})",
                    data["first_error"].as_str().unwrap_or("?")
                ),
            },
        ));
        out.write(
            Some(v),
            "redlock_contended",
            json!({"servers": n, "workers": WORKERS, "hold_ms": 1, "rounds": rounds.len(),
                   "lease_ms": LEASE.as_millis() as u64}),
            data,
        );
    }
    eprintln!("rust: RedLock over {n} servers, same run:");
    for line in table {
        eprintln!("{line}");
    }
}

/// Sorted percentile, as `bench/analysis.py` takes it.
fn pct(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    Some(sorted[((sorted.len() - 1) as f64 * p).round() as usize])
}

fn us(v: Option<u64>) -> Value {
    v.map_or(Value::Null, |ns| json!(ns as f64 / 1e3))
}

/// Summed calls per command over every server.
async fn counts(conns: &mut [MultiplexedConnection]) -> BTreeMap<String, u64> {
    let mut total = BTreeMap::new();
    for conn in conns.iter_mut() {
        for (name, calls) in command_counts(conn).await {
            *total.entry(name).or_insert(0) += calls;
        }
    }
    total
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .map(|(name, calls)| (name.clone(), calls - before.get(name).copied().unwrap_or(0)))
        .filter(|(_, d)| *d > 0)
        .collect()
}

/// One EVALSHA on every server at once.
async fn raw_everywhere(conns: &mut [MultiplexedConnection], script: &redis::Script, key: &str) {
    join_all(conns.iter_mut().map(|c| raw_eval(c, script, key))).await;
}

/// Lock + unlock of each variant of `pair`, one after the other in every sample, with the
/// limit (two rounds of EVALSHA on every server at once) after them; for `window` or `max`
/// samples. Commands per pair come from a separate pass of each library alone.
async fn side_by_side(
    pair: &[&Variant],
    conns: &mut [MultiplexedConnection],
    key: &str,
    window: Duration,
    max: usize,
) -> Result<(Vec<Value>, Value), String> {
    let script = redis::Script::new(crate::RAW_SCRIPT);
    let mut workers: Vec<Box<dyn Worker>> = Vec::new();
    for v in pair {
        workers.push(v.imp.worker(&format!("{key}:{}", v.lib), 1).await?);
    }
    // Warm up: connections, scripts, pools.
    for _ in 0..20 {
        for w in workers.iter_mut() {
            w.acquire().await?;
            w.release().await?;
        }
        raw_everywhere(conns, &script, "kb:raw:redlock").await;
    }
    let mut commands = Vec::new();
    for w in workers.iter_mut() {
        let before = counts(conns).await;
        for _ in 0..COUNTED {
            w.acquire().await?;
            w.release().await?;
        }
        commands.push(delta(&before, &counts(conns).await));
    }
    let mut latencies: Vec<Vec<u64>> = vec![Vec::new(); workers.len()];
    let mut raw = Vec::new();
    let start = Instant::now();
    while raw.len() < max && start.elapsed() < window {
        for (w, samples) in workers.iter_mut().zip(latencies.iter_mut()) {
            let t = Instant::now();
            w.acquire().await?;
            w.release().await?;
            samples.push(t.elapsed().as_nanos() as u64);
        }
        let t = Instant::now();
        raw_everywhere(conns, &script, "kb:raw:redlock").await;
        raw_everywhere(conns, &script, "kb:raw:redlock").await;
        raw.push(t.elapsed().as_nanos() as u64);
    }
    let summary = |samples: Vec<u64>| {
        let mut sorted = samples.clone();
        sorted.sort_unstable();
        json!({
            "samples": sorted.len(),
            "p50_us": us(pct(&sorted, 0.5)),
            "p99_us": us(pct(&sorted, 0.99)),
            "latencies_ns": samples,
            "window_s": window.as_secs_f64(),
            "errors": 0,
        })
    };
    let per_lib = latencies
        .into_iter()
        .zip(commands)
        .map(|(samples, cmds)| {
            let mut data = summary(samples);
            let total: u64 = cmds.values().sum();
            let map = data.as_object_mut().unwrap();
            // Requests sent (what runs inside a script is counted by the server too).
            let requests: u64 = ["evalsha", "eval", "set"]
                .iter()
                .filter_map(|name| cmds.get(*name))
                .sum();
            map.insert(
                "commands_per_pair".into(),
                json!(total as f64 / COUNTED as f64),
            );
            map.insert(
                "requests_per_pair".into(),
                json!(requests as f64 / COUNTED as f64),
            );
            map.insert("commands".into(), json!(cmds));
            map.insert("commands_pairs".into(), json!(COUNTED));
            data
        })
        .collect();
    Ok((per_lib, summary(raw)))
}

/// Hand-offs, throughput and fairness of one variant's rounds of `contended`. As in
/// `bench/analysis.py`, a hand-off is the next acquisition by another worker, from the
/// releaser's `released` (read before its release call) to the new holder's `acquired`; a
/// worker re-taking the lock it just released is counted apart.
fn contended_figures(rounds: &[Value]) -> Value {
    let mut gaps = Vec::new();
    let (mut same, mut pairs, mut overlaps, mut in_window) = (0u64, 0u64, 0u64, 0u64);
    let mut per = vec![0u64; WORKERS];
    let (mut window_s, mut errors, mut timed_out) = (0.0, 0u64, false);
    let mut first_error: Option<String> = None;
    let mut rtts = Vec::new();
    let mut events_by_round = Vec::new();
    for r in rounds {
        let mut events: Vec<Event> =
            serde_json::from_value(r["events"].clone()).unwrap_or_default();
        events.sort_unstable_by_key(|e| e[2]);
        let window = r["window_s"].as_f64().unwrap_or(0.0);
        window_s += window;
        in_window += events
            .iter()
            .filter(|e| e[2] as f64 <= window * 1e9)
            .count() as u64;
        for e in &events {
            per[e[0] as usize % WORKERS] += 1;
        }
        for pair in events.windows(2) {
            let (prev, next) = (pair[0], pair[1]);
            pairs += 1;
            if next[2] < prev[3] {
                overlaps += 1;
            }
            if next[0] == prev[0] {
                same += 1;
            } else {
                gaps.push(next[2].saturating_sub(prev[3]));
            }
        }
        errors += r["errors"].as_u64().unwrap_or(0);
        if first_error.is_none() {
            first_error = r["first_error"].as_str().map(String::from);
        }
        timed_out |= r["timed_out"].as_bool() == Some(true);
        rtts.extend(r["rtt_p50_ns"].as_u64());
        events_by_round.push(events);
    }
    gaps.sort_unstable();
    rtts.sort_unstable();
    let sum: f64 = per.iter().map(|&c| c as f64).sum();
    let squares: f64 = per.iter().map(|&c| (c as f64).powi(2)).sum();
    let jain = (squares > 0.0).then(|| sum * sum / (WORKERS as f64 * squares));
    json!({
        "window_s": window_s,
        "acquisitions": per.iter().sum::<u64>(),
        "acquired_in_window": in_window,
        "acq_per_s": in_window as f64 / window_s.max(1e-9),
        "handoffs": gaps.len(),
        "gap_p50_us": us(pct(&gaps, 0.5)),
        "gap_p99_us": us(pct(&gaps, 0.99)),
        "reacquire_share": (pairs > 0).then(|| same as f64 / pairs as f64),
        "per_worker": per,
        "per_worker_min": per.iter().min(),
        "per_worker_max": per.iter().max(),
        "jain": jain,
        "overlaps": overlaps,
        "errors": errors,
        "first_error": first_error,
        "timed_out": timed_out,
        "rtt_p50_ns": pct(&rtts, 0.5),
        "events_by_round": events_by_round,
    })
}
