//! `keylatch bench`: the primitives' scenarios against the raw requests they need, on the store
//! the user points at (Redis: one EVALSHA round trip, and the two a lock + unlock needs;
//! ZooKeeper: one `exists`, and the create + getChildren + delete a lock + unlock needs), with
//! ratios measured in the same run. `--compare URL` runs the suite on a second store too and
//! prints both in one table.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use keylatch::redis;
use keylatch::{Client, Config, DistributedLock};
use serde::Serialize;

use crate::cli::BenchArgs;
use crate::failure::{EX_USAGE, Failure};
use crate::zk_raw;

mod metadata;
mod scale;
mod zookeeper;

use scale::scale;

/// One scenario's figures.
#[derive(Debug, Serialize)]
struct Row {
    /// `redis` or `zookeeper`.
    store: &'static str,
    scenario: String,
    ops: usize,
    p50_us: f64,
    p99_us: f64,
    ops_per_sec: f64,
    /// p50 as a multiple of one raw round trip's p50 (EVALSHA; ZooKeeper `exists`).
    p50_in_round_trips: f64,
    /// For one task's lock + unlock: p50 as a multiple of the floor's p50, the raw requests a
    /// lock + unlock needs (Redis: two EVALSHA; ZooKeeper: create + getChildren + delete).
    #[serde(skip_serializing_if = "Option::is_none")]
    p50_over_floor: Option<f64>,
}

/// The rows of one store, and which of them are the round trip and the floor.
#[derive(Debug)]
struct Suite {
    store: &'static str,
    /// What one raw round trip is on this store.
    round_trip: &'static str,
    /// What the floor of a lock + unlock is on this store.
    floor: &'static str,
    rows: Vec<Row>,
}

impl Suite {
    fn new(store: &'static str, round_trip: &'static str, floor: &'static str) -> Suite {
        Suite {
            store,
            round_trip,
            floor,
            rows: Vec::new(),
        }
    }

    fn row(&self, scenario: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.scenario == scenario)
    }

    /// The round trip's p50 (the first row).
    fn rt(&self) -> f64 {
        self.rows.first().map_or(0.0, |r| r.p50_us)
    }

    /// Adds a row: its ratio to the round trip, and (for one task's lock + unlock, when the
    /// floor row is in) to the floor.
    fn push(&mut self, mut row: Row, uncontended: bool) {
        row.store = self.store;
        let rt = self.rt();
        row.p50_in_round_trips = if self.rows.is_empty() {
            1.0
        } else if rt > 0.0 {
            row.p50_us / rt
        } else {
            0.0
        };
        if uncontended && let Some(floor) = self.row(&format!("raw {}", self.floor)) {
            row.p50_over_floor = Some(row.p50_us / floor.p50_us.max(1e-9));
        }
        self.rows.push(row);
    }
}

/// The scenario whose ratio to the floor is the headline: the reentrant lock, one task.
const LOCK_SCENARIO: &str = "reentrant lock+unlock, 1 task";
/// The hand-off scenario both stores run.
const HANDOFF_SCENARIO: &str = "reentrant hand-off gap, 16 tasks";

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
        store: "",
        scenario: scenario.to_owned(),
        ops: samples.len(),
        p50_us: p50,
        p99_us: micros(pick(0.99)),
        ops_per_sec: samples.len() as f64 / elapsed.as_secs_f64().max(1e-9),
        p50_in_round_trips: if rt_p50 > 0.0 { p50 / rt_p50 } else { 0.0 },
        p50_over_floor: None,
    }
}

/// The headline rows, sampled in turn so that a machine slowing down slows all three alike
/// (as tests/benches/zookeeper.rs does): one raw round trip, the floor (the raw requests a lock
/// + unlock needs) and the reentrant lock's lock + unlock, each path warmed up once first.
async fn headline<R, RF, F, FF>(
    suite: &mut Suite,
    lock: &dyn DistributedLock,
    args: &BenchArgs,
    mut round_trip: R,
    mut floor: F,
) -> Result<(), Failure>
where
    R: FnMut() -> RF,
    RF: std::future::Future<Output = Result<(), Failure>>,
    F: FnMut() -> FF,
    FF: std::future::Future<Output = Result<(), Failure>>,
{
    let ops = args.ops as usize;
    round_trip().await?;
    floor().await?;
    lock.lock().await?.unlock().await?;
    let label = format!("{}: round trip, floor, lock", suite.store);
    let progress = bar(ops as u64, &label, args.json);
    let (mut rt, mut raw, mut locked) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ops {
        let t = Instant::now();
        round_trip().await?;
        rt.push(t.elapsed());
        let t = Instant::now();
        floor().await?;
        raw.push(t.elapsed());
        let t = Instant::now();
        lock.lock().await?.unlock().await?;
        locked.push(t.elapsed());
        progress.inc(1);
    }
    progress.finish_and_clear();
    // Each took about a third of the loop: its rate is from its own samples' sum.
    let spent = |samples: &[Duration]| samples.iter().sum::<Duration>();
    let (rt_time, raw_time, lock_time) = (spent(&rt), spent(&raw), spent(&locked));
    let label = format!("raw {} round trip", suite.round_trip);
    suite.push(summarise(&label, rt, rt_time, 0.0), false);
    let label = format!("raw {}", suite.floor);
    suite.push(summarise(&label, raw, raw_time, 0.0), false);
    suite.push(summarise(LOCK_SCENARIO, locked, lock_time, 0.0), true);
    Ok(())
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

/// Runs every scenario on the store of `config` (and of `--compare`) and prints one table (or
/// JSON).
pub async fn bench(config: Config, args: BenchArgs) -> Result<(), Failure> {
    let mut configs = vec![config];
    if let Some(url) = &args.compare {
        if keylatch::redact_url(url).contains("***") {
            eprintln!(
                "keylatch: warning: the password in --compare is visible to every local user \
                 (ps, /proc)"
            );
        }
        let mut other = configs[0].clone();
        other.url = url.as_str().into();
        configs.push(other);
    }
    if args.scale {
        if configs.len() > 1 || configs.iter().any(zk_raw::is_zookeeper) {
            return Err(Failure::new(
                EX_USAGE,
                "--scale measures a Redis server or cluster (script calls, primaries, watchdog \
                 batches): it takes one redis:// URL, neither zk:// nor --compare",
            ));
        }
        let config = configs.remove(0);
        return scale(config, args).await;
    }
    let mut suites = Vec::new();
    for config in configs {
        suites.push(if zk_raw::is_zookeeper(&config) {
            zookeeper::suite(config, &args).await?
        } else {
            redis_suite(config, &args).await?
        });
    }
    print(&suites, args.json);
    Ok(())
}

/// The Redis scenarios.
async fn redis_suite(config: Config, args: &BenchArgs) -> Result<Suite, Failure> {
    let client = Client::connect_with(config.clone()).await?;
    let raw = client.connection().await?;
    let ops = args.ops as usize;
    let quiet = args.json;
    let prefix = format!("keylatch-bench:{}", client.id());
    let mut suite = Suite::new("redis", "EVALSHA", "2x EVALSHA");

    // The physical limit: one EVALSHA round trip; a lock + unlock needs two.
    let script = redis::Script::new("return redis.call('exists', KEYS[1])");
    let eval = |calls: usize| {
        let (script, prefix, mut conn) = (&script, &prefix, raw.clone());
        async move {
            for _ in 0..calls {
                let _: i64 = script
                    .key(prefix)
                    .invoke_async(&mut conn)
                    .await
                    .map_err(keylatch_redis::from_redis)?;
            }
            Ok(())
        }
    };
    let lock = client.lock(&format!("{prefix}:uncontended"));
    headline(&mut suite, &lock, args, || eval(1), || eval(2)).await?;
    let rt = suite.rt();

    // Reentrant lock, 16 tasks on one key: hand-off gaps.
    let reentrant: Arc<dyn DistributedLock> = Arc::new(client.lock(&format!("{prefix}:handoff")));
    suite.push(
        handoff(HANDOFF_SCENARIO, reentrant, ops, rt, quiet).await?,
        false,
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
        suite.push(
            uncontended(label, lock.as_ref(), ops, rt, quiet).await?,
            true,
        );
    }
    let semaphore = client.semaphore(&format!("{prefix}:semaphore"));
    semaphore.try_set_permits(1).await?;
    let row = uncontended(SEMAPHORE_SCENARIO, &semaphore.as_lock(), ops, rt, quiet).await?;
    suite.push(row, true);
    let expirable = client.permit_expirable_semaphore(&format!("{prefix}:expirable"));
    expirable.try_set_permits(1).await?;
    let label = "expirable permit acquire+release";
    let row = uncontended(label, &expirable.as_lock(), ops, rt, quiet).await?;
    suite.push(row, true);
    let fair: Arc<dyn DistributedLock> =
        Arc::new(client.fair_lock(&format!("{prefix}:fair-handoff")));
    let row = handoff(FAIR_HANDOFF_SCENARIO, fair, ops, rt, quiet).await?;
    suite.push(row, false);
    let permit: Arc<dyn DistributedLock> = Arc::new(semaphore.as_lock());
    let row = handoff(SEMAPHORE_HANDOFF_SCENARIO, permit, ops, rt, quiet).await?;
    suite.push(row, false);

    for row in metadata::rows(&config, &prefix, ops, rt, quiet).await? {
        suite.push(row, true);
    }

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
    let _ = client.shutdown().await;
    Ok(suite)
}

const SEMAPHORE_SCENARIO: &str = "semaphore acquire+release";
const FAIR_HANDOFF_SCENARIO: &str = "fair hand-off gap, 16 tasks";
const SEMAPHORE_HANDOFF_SCENARIO: &str = "semaphore (1 permit) hand-off, 16 tasks";

/// Prints the suites in one table (or one JSON array of rows), then the ratio lines.
fn print(suites: &[Suite], json: bool) {
    if json {
        let rows: Vec<&Row> = suites.iter().flat_map(|s| &s.rows).collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        );
        return;
    }
    println!(
        "{:<10} {:<42} {:>8} {:>10} {:>10} {:>10} {:>9} {:>9}",
        "store", "scenario", "ops", "p50 us", "p99 us", "ops/s", "p50/RT", "p50/floor"
    );
    for row in suites.iter().flat_map(|s| &s.rows) {
        let floor = row
            .p50_over_floor
            .map_or_else(|| "-".to_owned(), |r| format!("{r:.2}x"));
        println!(
            "{:<10} {:<42} {:>8} {:>10.1} {:>10.1} {:>10.0} {:>8.2}x {:>9}",
            row.store,
            row.scenario,
            row.ops,
            row.p50_us,
            row.p99_us,
            row.ops_per_sec,
            row.p50_in_round_trips,
            floor
        );
    }
    for suite in suites {
        println!(
            "{}: RT = one raw {} ({:.1} us p50), floor = raw {}, measured in the same run",
            suite.store,
            suite.round_trip,
            suite.rt(),
            suite.floor
        );
    }
    for suite in suites {
        if let Some(ratio) = suite.row(LOCK_SCENARIO).and_then(|r| r.p50_over_floor) {
            println!(
                "keylatch/raw on {}: reentrant lock+unlock p50 = {ratio:.2}x the floor ({})",
                suite.store, suite.floor
            );
        }
    }
    if let [first, second] = suites {
        // ZooKeeper over Redis, whichever was given first.
        let (a, b) = if second.store == "zookeeper" && first.store == "redis" {
            (second, first)
        } else {
            (first, second)
        };
        let ratio = |scenario: &str| match (a.row(scenario), b.row(scenario)) {
            (Some(x), Some(y)) if y.p50_us > 0.0 => format!("{:.2}x", x.p50_us / y.p50_us),
            _ => "-".to_owned(),
        };
        println!(
            "{} / {}: lock+unlock p50 {}, hand-off gap p50 {}",
            a.store,
            b.store,
            ratio(LOCK_SCENARIO),
            ratio(HANDOFF_SCENARIO)
        );
    }
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
