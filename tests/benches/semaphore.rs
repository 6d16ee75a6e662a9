//! keylatch's semaphores beside raw Redis round trips and the reentrant lock, measured in one
//! run on one throwaway redis-server. Prints figures and ratios; asserts nothing.
//!
//! ```text
//! cargo bench -p keylatch --bench semaphore            # full run
//! KEYLATCH_BENCH_QUICK=1 cargo bench -p keylatch --bench semaphore
//! ```
mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    RAW_SCRIPT, command_counts, command_delta, handoff_gaps, micros, percentile, raw_eval,
};
use keylatch::DistributedLock;
use keylatch::redis;
use keylatch_testkit::RedisServer;

struct Sizes {
    uncontended: usize,
    throughput_ops: usize,
    handoffs: usize,
}

/// One acquire + release of the thing measured.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Plain,
    PlainGuard,
    ExpirableLease,
    ExpirableWatchdog,
    Reentrant,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Plain => "semaphore acquire+release(1)",
            Kind::PlainGuard => "semaphore guard lock+unlock",
            Kind::ExpirableLease => "expirable, fixed lease",
            Kind::ExpirableWatchdog => "expirable, watchdog",
            Kind::Reentrant => "reentrant lock+unlock",
        }
    }
}

async fn cycle(client: &keylatch::Client, kind: Kind, name: &str) {
    match kind {
        Kind::Plain => {
            let permit = client.semaphore(name).acquire().await.unwrap();
            permit.release().await.unwrap();
        }
        Kind::PlainGuard => {
            let guard = client.semaphore(name).as_lock().lock().await.unwrap();
            guard.unlock().await.unwrap();
        }
        Kind::ExpirableLease => {
            let permit = client
                .permit_expirable_semaphore(name)
                .acquire_with_lease(Duration::from_secs(30))
                .await
                .unwrap();
            permit.release().await.unwrap();
        }
        Kind::ExpirableWatchdog => {
            let permit = client
                .permit_expirable_semaphore(name)
                .acquire()
                .await
                .unwrap();
            permit.release().await.unwrap();
        }
        Kind::Reentrant => {
            let guard = client.lock(name).lock().await.unwrap();
            guard.unlock().await.unwrap();
        }
    }
}

/// A handle kept for the whole loop (so settled request markers are cleaned up in passing).
enum Handle {
    Plain(keylatch::Semaphore),
    Expirable(keylatch::PermitExpirableSemaphore),
    Lock(keylatch::ReentrantLock),
}

async fn cycle_with(handle: &Handle) {
    match handle {
        Handle::Plain(s) => {
            let permit = s.acquire().await.unwrap();
            permit.release().await.unwrap();
        }
        Handle::Expirable(s) => {
            let permit = s.acquire_with_lease(Duration::from_secs(30)).await.unwrap();
            permit.release().await.unwrap();
        }
        Handle::Lock(lock) => {
            let guard = lock.lock().await.unwrap();
            guard.unlock().await.unwrap();
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` does not: then this is a smoke
    // run that only shows the harness works.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let quick = std::env::var_os("KEYLATCH_BENCH_QUICK").is_some();
    let sizes = if smoke {
        Sizes {
            uncontended: 30,
            throughput_ops: 640,
            handoffs: 48,
        }
    } else if quick {
        Sizes {
            uncontended: 1_000,
            throughput_ops: 20_000,
            handoffs: 480,
        }
    } else {
        Sizes {
            uncontended: 5_000,
            throughput_ops: 100_000,
            handoffs: 3_200,
        }
    };
    let server = RedisServer::start().expect("start redis-server (run ./scripts/setup.sh)");
    let config = keylatch::Config::builder()
        .url(server.url())
        .build()
        .expect("config");
    let client = keylatch::Client::connect_with(config)
        .await
        .expect("connect");
    let raw_client = redis::Client::open(server.url()).unwrap();
    let mut raw = raw_client.get_multiplexed_async_connection().await.unwrap();
    let script = redis::Script::new(RAW_SCRIPT);
    raw_eval(&mut raw, &script, "warm").await;
    let big = u32::try_from(sizes.throughput_ops).unwrap_or(u32::MAX);
    client
        .semaphore("bench:sem")
        .try_set_permits(big)
        .await
        .unwrap();
    client
        .semaphore("bench:sem:guard")
        .try_set_permits(big)
        .await
        .unwrap();
    for name in ["bench:xsem", "bench:xsem:watchdog"] {
        client
            .permit_expirable_semaphore(name)
            .try_set_permits(big)
            .await
            .unwrap();
    }

    println!(
        "keylatch semaphore benchmark ({} run)",
        if smoke {
            "smoke"
        } else if quick {
            "quick"
        } else {
            "full"
        }
    );
    println!(
        "machine: {} cpus, redis-server on loopback; figures are noisy when other builds run",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();

    // 1. Uncontended acquire + release, one task, interleaved with two raw EVALSHA round trips
    //    and the reentrant lock.
    let kinds = [
        (Kind::Plain, "bench:sem"),
        (Kind::PlainGuard, "bench:sem:guard"),
        (Kind::ExpirableLease, "bench:xsem"),
        (Kind::ExpirableWatchdog, "bench:xsem:watchdog"),
        (Kind::Reentrant, "bench:lock"),
    ];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); kinds.len()];
    let mut raw_times = Vec::with_capacity(sizes.uncontended);
    for _ in 0..sizes.uncontended {
        let t = Instant::now();
        raw_eval(&mut raw, &script, "bench:raw").await;
        raw_eval(&mut raw, &script, "bench:raw").await;
        raw_times.push(t.elapsed());
        for (i, (kind, name)) in kinds.iter().enumerate() {
            let t = Instant::now();
            cycle(&client, *kind, name).await;
            times[i].push(t.elapsed());
        }
    }
    raw_times.sort();
    let raw_pair = percentile(&raw_times, 0.5);
    let rt = raw_pair / 2;
    for t in &mut times {
        t.sort();
    }
    let reentrant_p50 = percentile(&times[kinds.len() - 1], 0.5);
    println!(
        "1. uncontended acquire + release, 1 task ({} samples each, interleaved)",
        sizes.uncontended
    );
    println!(
        "   {:<30} p50 {:7.1} us  p99 {:7.1} us",
        "2x raw EVALSHA",
        micros(raw_pair),
        micros(percentile(&raw_times, 0.99))
    );
    for ((kind, _), t) in kinds.iter().zip(&times) {
        let p50 = percentile(t, 0.5);
        println!(
            "   {:<30} p50 {:7.1} us  p99 {:7.1} us  = {:.2}x two raw round trips, {:.2}x the reentrant lock",
            kind.label(),
            micros(p50),
            micros(percentile(t, 0.99)),
            micros(p50) / micros(raw_pair),
            micros(p50) / micros(reentrant_p50)
        );
    }
    println!();

    // 2. Throughput: 64 tasks, each acquire + release in a loop on one semaphore with enough
    //    permits for all, against raw EVALSHA pairs from 64 tasks.
    let tasks = 64;
    let per_task = sizes.throughput_ops / tasks;
    let raw_rate = {
        let start = Instant::now();
        let mut handles = Vec::new();
        for t in 0..tasks {
            let mut conn = raw.clone();
            let script = script.clone();
            handles.push(tokio::spawn(async move {
                let key = format!("bench:raw:{t}");
                for _ in 0..per_task {
                    raw_eval(&mut conn, &script, &key).await;
                    raw_eval(&mut conn, &script, &key).await;
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        (tasks * per_task) as f64 / start.elapsed().as_secs_f64()
    };
    println!(
        "2. throughput, {tasks} tasks ({} acquire + release pairs per row)",
        tasks * per_task
    );
    println!("   {:<30} {raw_rate:10.0} /s", "raw EVALSHA pairs");
    let handles_of = |which: usize| -> Handle {
        match which {
            0 => Handle::Plain(client.semaphore("bench:sem")),
            1 => Handle::Expirable(client.permit_expirable_semaphore("bench:xsem")),
            _ => Handle::Lock(client.lock("bench:unused")),
        }
    };
    for (which, label) in [
        (0, "semaphore (one name)"),
        (1, "expirable, fixed lease (one name)"),
        (2, "reentrant, 64 names"),
    ] {
        let before = command_counts(&mut raw).await;
        let start = Instant::now();
        let handle = Arc::new(handles_of(which));
        let mut joins = Vec::new();
        for t in 0..tasks {
            let handle = if which == 2 {
                Arc::new(Handle::Lock(client.lock(&format!("bench:lock:{t}"))))
            } else {
                handle.clone()
            };
            joins.push(tokio::spawn(async move {
                for _ in 0..per_task {
                    cycle_with(&handle).await;
                }
            }));
        }
        for j in joins {
            j.await.unwrap();
        }
        let rate = (tasks * per_task) as f64 / start.elapsed().as_secs_f64();
        let after = command_counts(&mut raw).await;
        println!(
            "   {label:<30} {rate:10.0} /s = {:.2}x raw pairs; commands per pair: {}",
            rate / raw_rate,
            command_delta(&before, &after, tasks * per_task)
        );
    }
    println!();

    // 3. Hand-off: one permit, 16 waiters; the gap from a release to the next acquire.
    let waiters = 16;
    let per_waiter = sizes.handoffs / waiters;
    client
        .semaphore("bench:handoff:sem")
        .try_set_permits(1)
        .await
        .unwrap();
    client
        .permit_expirable_semaphore("bench:handoff:xsem")
        .try_set_permits(1)
        .await
        .unwrap();
    println!(
        "3. hand-off, {waiters} waiters on one permit ({} hand-offs per row)",
        per_waiter * waiters
    );
    let mut gap_p50 = Vec::new();
    for (kind, name) in [
        (Kind::Plain, "bench:handoff:sem"),
        (Kind::ExpirableLease, "bench:handoff:xsem"),
        (Kind::Reentrant, "bench:handoff:lock"),
    ] {
        let events: Arc<Mutex<Vec<(Instant, Instant)>>> = Arc::new(Mutex::new(Vec::new()));
        let before = command_counts(&mut raw).await;
        let mut joins = Vec::new();
        for _ in 0..waiters {
            let events = events.clone();
            let client = client.clone();
            joins.push(tokio::spawn(async move {
                for _ in 0..per_waiter {
                    let (acquired, released) = match kind {
                        Kind::Plain => {
                            let permit = client.semaphore(name).acquire().await.unwrap();
                            let acquired = Instant::now();
                            let released = Instant::now();
                            permit.release().await.unwrap();
                            (acquired, released)
                        }
                        Kind::ExpirableLease => {
                            let permit = client
                                .permit_expirable_semaphore(name)
                                .acquire_with_lease(Duration::from_secs(30))
                                .await
                                .unwrap();
                            let acquired = Instant::now();
                            let released = Instant::now();
                            permit.release().await.unwrap();
                            (acquired, released)
                        }
                        _ => {
                            let guard = client.lock(name).lock().await.unwrap();
                            let acquired = Instant::now();
                            let released = Instant::now();
                            guard.unlock().await.unwrap();
                            (acquired, released)
                        }
                    };
                    events.lock().unwrap().push((acquired, released));
                }
            }));
        }
        for j in joins {
            j.await.unwrap();
        }
        let after = command_counts(&mut raw).await;
        let events = events.lock().unwrap().clone();
        let gaps = handoff_gaps(&events);
        let p50 = percentile(&gaps, 0.5);
        gap_p50.push(p50);
        println!(
            "   {:<30} gap p50 {:7.1} us  p99 {:7.1} us  = {:.2} raw round trips; commands per acquisition: {}",
            kind.label(),
            micros(p50),
            micros(percentile(&gaps, 0.99)),
            micros(p50) / micros(rt),
            command_delta(&before, &after, events.len())
        );
    }
    println!(
        "   ratios: semaphore hand-off {:.2}x, expirable {:.2}x the reentrant lock's (one raw round trip p50 {:.1} us)",
        micros(gap_p50[0]) / micros(gap_p50[2]),
        micros(gap_p50[1]) / micros(gap_p50[2]),
        micros(rt)
    );
    client.wait_idle().await;
    let stats = client.stats();
    println!();
    println!(
        "client: {} pub/sub channels left, {} holds left",
        stats.channels, stats.watchdog.holds
    );
}
