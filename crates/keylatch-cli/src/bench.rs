//! `keylatch bench`: the primitives' scenarios against a raw EVALSHA round trip, on the Redis
//! the user points at, with ratios measured in the same run.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use keylatch::redis;
use keylatch::{Client, Config, DistributedLock};
use serde::Serialize;

use crate::cli::BenchArgs;
use crate::failure::Failure;

mod scale;

use scale::scale;

/// One scenario's figures.
#[derive(Debug, Serialize)]
struct Row {
    scenario: String,
    ops: usize,
    p50_us: f64,
    p99_us: f64,
    ops_per_sec: f64,
    /// p50 as a multiple of one raw EVALSHA round trip's p50.
    p50_in_round_trips: f64,
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A task's result, or the failure of a task that panicked or was cancelled.
fn joined<T>(result: Result<T, tokio::task::JoinError>) -> Result<T, Failure> {
    result.map_err(|e| Failure::new(crate::failure::EX_SOFTWARE, e.to_string()))
}

fn summarise(scenario: &str, mut samples: Vec<Duration>, elapsed: Duration, rt_p50: f64) -> Row {
    samples.sort();
    let pick = |p: f64| {
        samples
            .get(((samples.len().saturating_sub(1)) as f64 * p).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    let p50 = micros(pick(0.5));
    Row {
        scenario: scenario.to_owned(),
        ops: samples.len(),
        p50_us: p50,
        p99_us: micros(pick(0.99)),
        ops_per_sec: samples.len() as f64 / elapsed.as_secs_f64().max(1e-9),
        p50_in_round_trips: if rt_p50 > 0.0 { p50 / rt_p50 } else { 0.0 },
    }
}

fn bar(ops: u64, label: &str, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(ops);
    bar.set_style(
        ProgressStyle::with_template("{msg:32} [{bar:30}] {pos}/{len}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(label.to_owned());
    bar
}

/// Runs every scenario and prints the table (or JSON).
pub async fn bench(config: Config, args: BenchArgs) -> Result<(), Failure> {
    if args.scale {
        return scale(config, args).await;
    }
    let client = Client::connect_with(config).await?;
    let mut raw = client.connection().await?;
    let ops = args.ops as usize;
    let quiet = args.json;
    let prefix = format!("keylatch-bench:{}", client.id());
    let mut rows = Vec::new();

    // The physical limit: one EVALSHA round trip.
    let script = redis::Script::new("return redis.call('exists', KEYS[1])");
    let progress = bar(ops as u64, "raw EVALSHA round trip", quiet);
    let mut samples = Vec::with_capacity(ops);
    let start = Instant::now();
    for _ in 0..ops {
        let t = Instant::now();
        let _: i64 = script
            .key(&prefix)
            .invoke_async(&mut raw)
            .await
            .map_err(keylatch_redis::from_redis)?;
        samples.push(t.elapsed());
        progress.inc(1);
    }
    progress.finish_and_clear();
    let raw_row = summarise("raw EVALSHA round trip", samples, start.elapsed(), 0.0);
    let rt = raw_row.p50_us;
    rows.push(Row {
        p50_in_round_trips: 1.0,
        ..raw_row
    });

    // Reentrant lock, uncontended: lock + unlock.
    let lock = client.lock(&format!("{prefix}:uncontended"));
    rows.push(uncontended("reentrant lock+unlock, 1 task", &lock, ops, rt, quiet).await?);

    // Reentrant lock, 16 tasks on one key: hand-off gaps.
    let reentrant: Arc<dyn DistributedLock> = Arc::new(client.lock(&format!("{prefix}:handoff")));
    rows.push(
        handoff(
            "reentrant hand-off gap, 16 tasks",
            reentrant,
            ops,
            rt,
            quiet,
        )
        .await?,
    );

    // The other primitives, one lock+unlock (or acquire+release) at a time, then hand-offs.
    let primitives: Vec<(&str, Arc<dyn DistributedLock>)> = vec![
        (
            "fair lock+unlock, 1 task",
            Arc::new(client.fair_lock(&format!("{prefix}:fair"))),
        ),
        (
            "read lock+unlock, 1 task",
            Arc::new(client.rw_lock(&format!("{prefix}:rw")).read_lock()),
        ),
        (
            "write lock+unlock, 1 task",
            Arc::new(client.rw_lock(&format!("{prefix}:rw")).write_lock()),
        ),
    ];
    for (label, lock) in primitives {
        rows.push(uncontended(label, lock.as_ref(), ops, rt, quiet).await?);
    }
    let semaphore = client.semaphore(&format!("{prefix}:semaphore"));
    semaphore.try_set_permits(1).await?;
    rows.push(
        uncontended(
            "semaphore acquire+release",
            &semaphore.as_lock(),
            ops,
            rt,
            quiet,
        )
        .await?,
    );
    let expirable = client.permit_expirable_semaphore(&format!("{prefix}:expirable"));
    expirable.try_set_permits(1).await?;
    rows.push(
        uncontended(
            "expirable permit acquire+release",
            &expirable.as_lock(),
            ops,
            rt,
            quiet,
        )
        .await?,
    );
    let fair: Arc<dyn DistributedLock> =
        Arc::new(client.fair_lock(&format!("{prefix}:fair-handoff")));
    rows.push(handoff("fair hand-off gap, 16 tasks", fair, ops, rt, quiet).await?);
    let permit: Arc<dyn DistributedLock> = Arc::new(semaphore.as_lock());
    rows.push(
        handoff(
            "semaphore (1 permit) hand-off, 16 tasks",
            permit,
            ops,
            rt,
            quiet,
        )
        .await?,
    );

    // Leave nothing behind on the user's Redis.
    let mut conn = client.connection().await?;
    let keys: Vec<String> = keylatch::redis::AsyncCommands::keys(&mut conn, format!("*{prefix}*"))
        .await
        .map_err(keylatch_redis::from_redis)?;
    if !keys.is_empty() {
        let _: () = keylatch::redis::AsyncCommands::del(&mut conn, &keys)
            .await
            .map_err(keylatch_redis::from_redis)?;
    }

    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        );
    } else {
        println!(
            "{:<42} {:>8} {:>10} {:>10} {:>12} {:>10}",
            "scenario", "ops", "p50 us", "p99 us", "ops/s", "p50 / RT"
        );
        for row in &rows {
            println!(
                "{:<42} {:>8} {:>10.1} {:>10.1} {:>12.0} {:>9.2}x",
                row.scenario,
                row.ops,
                row.p50_us,
                row.p99_us,
                row.ops_per_sec,
                row.p50_in_round_trips
            );
        }
        println!("RT = one raw EVALSHA round trip measured in the same run ({rt:.1} us p50)");
    }
    Ok(())
}

/// One task: lock (or acquire) then unlock, `ops` times.
async fn uncontended(
    label: &str,
    lock: &dyn DistributedLock,
    ops: usize,
    rt: f64,
    quiet: bool,
) -> Result<Row, Failure> {
    let progress = bar(ops as u64, label, quiet);
    let mut samples = Vec::with_capacity(ops);
    let start = Instant::now();
    for _ in 0..ops {
        let t = Instant::now();
        lock.lock().await?.unlock().await?;
        samples.push(t.elapsed());
        progress.inc(1);
    }
    progress.finish_and_clear();
    Ok(summarise(label, samples, start.elapsed(), rt))
}

/// 16 tasks take turns on one lock; the figure is the gap from one release to the next
/// acquisition.
async fn handoff(
    label: &str,
    lock: Arc<dyn DistributedLock>,
    ops: usize,
    rt: f64,
    quiet: bool,
) -> Result<Row, Failure> {
    let tasks = 16;
    let per_task = (ops / tasks).max(1);
    let progress = bar((per_task * tasks) as u64, label, quiet);
    let events: Arc<Mutex<Vec<(Instant, Instant)>>> = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let lock = lock.clone();
        let events = events.clone();
        let progress = progress.clone();
        handles.push(tokio::spawn(async move {
            for _ in 0..per_task {
                let guard = lock.lock().await?;
                let acquired = Instant::now();
                let released = Instant::now();
                guard.unlock().await?;
                events.lock().expect("events").push((acquired, released));
                progress.inc(1);
            }
            Ok::<(), keylatch::Error>(())
        }));
    }
    for handle in handles {
        joined(handle.await)??;
    }
    progress.finish_and_clear();
    let elapsed = start.elapsed();
    let mut events = events.lock().expect("events").clone();
    events.sort();
    let gaps = events
        .windows(2)
        .map(|w| w[1].0.saturating_duration_since(w[0].1))
        .collect();
    Ok(summarise(label, gaps, elapsed, rt))
}
