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

/// The scale suite's figures.
#[derive(Debug, Serialize)]
struct ScaleReport {
    /// `cluster` or `single`.
    topology: &'static str,
    /// Primaries serving the keys (1 off a cluster).
    primaries: usize,
    tasks: u32,
    keys: u32,
    seconds: f64,
    /// Two raw EVALSHA calls of a one-call script on a random name, per second.
    raw_pairs_per_sec: f64,
    /// Reentrant lock + unlock of a random name, per second.
    lock_pairs_per_sec: f64,
    /// `lock_pairs_per_sec / raw_pairs_per_sec`, in the same run.
    lock_vs_raw: f64,
    lock_pair_p50_us: f64,
    lock_pair_p99_us: f64,
    /// Locks held at once for the renewal figures.
    holds: u32,
    /// Seconds to take them (64 tasks).
    holds_acquired_in_secs: f64,
    /// Watchdog ticks measured.
    ticks: u64,
    /// Holds renewed per tick (every one, when the watchdog keeps up).
    renewed_per_tick: f64,
    /// Renewal script calls per tick (up to 100 holds per call, one slot per call).
    renew_calls_per_tick: f64,
    /// Pipelined round trips per tick (one per node).
    round_trips_per_tick: f64,
}

/// A small deterministic generator: which name each task takes next.
fn next_index(state: &mut u64, keys: u32) -> u32 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state % u64::from(keys)) as u32
}

/// `tasks` tasks run `op` on random names of `keys` for `duration`; how long it took and the
/// latency of each pair done.
async fn spread<F, Fut>(
    args: &BenchArgs,
    prefix: &str,
    label: &str,
    op: F,
) -> Result<(Duration, Vec<Duration>), Failure>
where
    F: Fn(String) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), keylatch::Error>> + Send,
{
    let progress = bar(args.duration.as_millis() as u64, label, args.json);
    let start = Instant::now();
    let deadline = start + args.duration;
    let mut handles = Vec::new();
    for task in 0..args.tasks {
        let op = op.clone();
        let prefix = prefix.to_owned();
        let keys = args.keys;
        handles.push(tokio::spawn(async move {
            let mut state = 0x9E37_79B9_7F4A_7C15u64
                ^ (u64::from(task) + 1).wrapping_mul(0xA24B_AED4_963E_E407);
            let mut samples = Vec::new();
            while Instant::now() < deadline {
                let name = format!("{prefix}:k{}", next_index(&mut state, keys));
                let t = Instant::now();
                op(name).await?;
                samples.push(t.elapsed());
            }
            Ok::<_, keylatch::Error>(samples)
        }));
    }
    let ticker = {
        let progress = progress.clone();
        tokio::spawn(async move {
            while Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
                progress.set_position(start.elapsed().as_millis() as u64);
            }
        })
    };
    let mut samples = Vec::new();
    for handle in handles {
        samples.extend(joined(handle.await)??);
    }
    let elapsed = start.elapsed();
    ticker.abort();
    progress.finish_and_clear();
    Ok((elapsed, samples))
}

/// The scale suite (`keylatch bench --scale`).
async fn scale(config: Config, args: BenchArgs) -> Result<(), Failure> {
    let client = Client::connect_with(config.clone()).await?;
    let raw = client.connection().await?;
    let cluster = raw.is_cluster();
    let prefix = format!("keylatch-bench:{}", client.id());

    // Raw pairs: the same number of round trips as a lock + unlock, doing nothing.
    let script = Arc::new(redis::Script::new("return redis.call('exists', KEYS[1])"));
    let (raw_elapsed, raw_samples) = spread(&args, &prefix, "raw EVALSHA pairs", {
        let script = script.clone();
        move |name: String| {
            let script = script.clone();
            let mut conn = raw.clone();
            async move {
                for _ in 0..2 {
                    let _: i64 = script
                        .key(&name)
                        .invoke_async(&mut conn)
                        .await
                        .map_err(keylatch_redis::from_redis)?;
                }
                Ok(())
            }
        }
    })
    .await?;
    let (lock_elapsed, lock_samples) = spread(&args, &prefix, "lock + unlock pairs", {
        let client = client.clone();
        move |name: String| {
            let client = client.clone();
            async move {
                client.lock(&name).lock().await?.unlock().await?;
                Ok(())
            }
        }
    })
    .await?;
    let raw_rate = raw_samples.len() as f64 / raw_elapsed.as_secs_f64().max(1e-9);
    let lock = summarise("lock + unlock pairs", lock_samples, lock_elapsed, 0.0);

    // Renewals: holds taken by a client whose watchdog ticks every second.
    let mut report = ScaleReport {
        topology: if cluster { "cluster" } else { "single" },
        primaries: 1,
        tasks: args.tasks,
        keys: args.keys,
        seconds: args.duration.as_secs_f64(),
        raw_pairs_per_sec: raw_rate,
        lock_pairs_per_sec: lock.ops_per_sec,
        lock_vs_raw: lock.ops_per_sec / raw_rate.max(1e-9),
        lock_pair_p50_us: lock.p50_us,
        lock_pair_p99_us: lock.p99_us,
        holds: args.holds,
        holds_acquired_in_secs: 0.0,
        ticks: 0,
        renewed_per_tick: 0.0,
        renew_calls_per_tick: 0.0,
        round_trips_per_tick: 0.0,
    };
    client.shutdown().await?;
    if args.holds > 0 {
        renewals(config, &args, &prefix, &mut report).await?;
    }

    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        let r = &report;
        println!(
            "{} ({} primar{}), {} tasks over {} names, {:.0} s each:",
            r.topology,
            r.primaries,
            if r.primaries == 1 { "y" } else { "ies" },
            r.tasks,
            r.keys,
            r.seconds
        );
        println!("  raw EVALSHA pairs      {:>10.0} /s", r.raw_pairs_per_sec);
        println!(
            "  lock + unlock pairs    {:>10.0} /s  ({:.2}x raw; p50 {:.0} us, p99 {:.0} us)",
            r.lock_pairs_per_sec, r.lock_vs_raw, r.lock_pair_p50_us, r.lock_pair_p99_us
        );
        if r.holds > 0 {
            println!(
                "  {} holds (taken in {:.1} s): per watchdog tick {:.0} renewed, {:.0} script \
                 calls, {:.1} round trips ({} ticks)",
                r.holds,
                r.holds_acquired_in_secs,
                r.renewed_per_tick,
                r.renew_calls_per_tick,
                r.round_trips_per_tick,
                r.ticks
            );
        }
    }
    Ok(())
}

/// Takes `args.holds` locks with a watchdog that ticks every second, counts what three
/// ticks send, and releases them.
async fn renewals(
    mut config: Config,
    args: &BenchArgs,
    prefix: &str,
    report: &mut ScaleReport,
) -> Result<(), Failure> {
    config.watchdog_timeout = Duration::from_secs(3);
    let client = Client::connect_with(config).await?;
    let holds = args.holds as usize;
    let progress = bar(holds as u64, "taking the holds", args.json);
    let start = Instant::now();
    let workers = 64.min(holds);
    let mut handles = Vec::new();
    for worker in 0..workers {
        let client = client.clone();
        let prefix = prefix.to_owned();
        let progress = progress.clone();
        handles.push(tokio::spawn(async move {
            let mut guards = Vec::new();
            for i in (worker..holds).step_by(workers) {
                guards.push(client.lock(&format!("{prefix}:held{i}")).lock().await?);
                progress.inc(1);
            }
            Ok::<_, keylatch::Error>(guards)
        }));
    }
    let mut guards = Vec::with_capacity(holds);
    for handle in handles {
        guards.extend(joined(handle.await)??);
    }
    report.holds_acquired_in_secs = start.elapsed().as_secs_f64();
    progress.finish_and_clear();

    let before = client.stats();
    // Ticks are 1 s apart; three of them fall in this window.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let after = client.stats();
    let ticks = after.watchdog.ticks - before.watchdog.ticks;
    let per_tick = |n: u64| n as f64 / ticks.max(1) as f64;
    report.ticks = ticks;
    report.renewed_per_tick = per_tick(after.watchdog.renewed_keys - before.watchdog.renewed_keys);
    report.renew_calls_per_tick =
        per_tick(after.watchdog.renew_calls - before.watchdog.renew_calls);
    report.round_trips_per_tick = per_tick(after.batch_round_trips - before.batch_round_trips);
    report.primaries = after.cluster_primaries.max(1);

    let progress = bar(holds as u64, "releasing the holds", args.json);
    let mut releases = tokio::task::JoinSet::new();
    let mut guards = guards.into_iter();
    loop {
        let chunk: Vec<_> = guards
            .by_ref()
            .take(holds.div_ceil(workers).max(1))
            .collect();
        if chunk.is_empty() {
            break;
        }
        let progress = progress.clone();
        releases.spawn(async move {
            for guard in chunk {
                guard.unlock().await?;
                progress.inc(1);
            }
            Ok::<_, keylatch::Error>(())
        });
    }
    while let Some(done) = releases.join_next().await {
        joined(done)??;
    }
    progress.finish_and_clear();
    client.shutdown().await?;
    Ok(())
}
