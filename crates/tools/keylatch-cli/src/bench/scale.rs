//! `keylatch bench --scale`: many tasks over many names, on a cluster or one server, and
//! the watchdog's renewals in batches, each against the raw round trips it needs.

use super::*;

/// The scale suite's figures.
#[derive(Debug, Serialize)]
pub(super) struct ScaleReport {
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
pub(super) fn next_index(state: &mut u64, keys: u32) -> u32 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state % u64::from(keys)) as u32
}

/// `tasks` tasks run `op` on random names of `keys` for `duration`; how long it took and the
/// latency of each pair done.
pub(super) async fn spread<F, Fut>(
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
pub(super) async fn scale(config: Config, args: BenchArgs) -> Result<(), Failure> {
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
pub(super) async fn renewals(
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
