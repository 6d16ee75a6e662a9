//! keylatch's read-write lock beside raw Redis round trips and the reentrant lock, measured in
//! one run on one throwaway redis-server. Prints figures and ratios; asserts nothing.
//!
//! ```text
//! cargo bench -p keylatch --bench rwlock            # full run
//! KEYLATCH_BENCH_QUICK=1 cargo bench -p keylatch --bench rwlock
//! ```
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{RAW_SCRIPT, command_counts, command_delta, micros, percentile, raw_eval};
use keylatch::redis;
use keylatch_testkit::RedisServer;

const READERS: usize = 16;

struct Sizes {
    uncontended: usize,
    reads_per_reader: usize,
    writer_samples: usize,
    handoff_ms: u64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` does not: then this is a smoke
    // run that only shows the harness works.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let quick = std::env::var_os("KEYLATCH_BENCH_QUICK").is_some();
    let sizes = if smoke {
        Sizes {
            uncontended: 50,
            reads_per_reader: 20,
            writer_samples: 5,
            handoff_ms: 200,
        }
    } else if quick {
        Sizes {
            uncontended: 2_000,
            reads_per_reader: 500,
            writer_samples: 100,
            handoff_ms: 2_000,
        }
    } else {
        Sizes {
            uncontended: 10_000,
            reads_per_reader: 3_000,
            writer_samples: 500,
            handoff_ms: 5_000,
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

    let run = if smoke {
        "smoke"
    } else if quick {
        "quick"
    } else {
        "full"
    };
    println!("keylatch read-write lock benchmark ({run} run)");
    println!(
        "machine: {} cpus, redis-server on loopback",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();

    // 1. Uncontended pairs, one task, interleaved: two raw EVALSHA, the reentrant lock, the read
    //    lock, the write lock.
    let rw = client.rw_lock("bench:rw:uncontended");
    let lock = client.lock("bench:rw:reentrant");
    let mut times: [Vec<Duration>; 4] = Default::default();
    for _ in 0..sizes.uncontended {
        let t = Instant::now();
        raw_eval(&mut raw, &script, "bench:raw").await;
        raw_eval(&mut raw, &script, "bench:raw").await;
        times[0].push(t.elapsed());
        let t = Instant::now();
        lock.lock().await.unwrap().unlock().await.unwrap();
        times[1].push(t.elapsed());
        let t = Instant::now();
        rw.read().await.unwrap().unlock().await.unwrap();
        times[2].push(t.elapsed());
        let t = Instant::now();
        rw.write().await.unwrap().unlock().await.unwrap();
        times[3].push(t.elapsed());
    }
    for t in &mut times {
        t.sort();
    }
    let raw_pair = percentile(&times[0], 0.5);
    let round_trip = raw_pair / 2;
    println!(
        "1. uncontended acquire+release, 1 task ({} samples each, interleaved)",
        sizes.uncontended
    );
    for (label, samples) in [
        ("2x raw EVALSHA  ", &times[0]),
        ("reentrant lock  ", &times[1]),
        ("read lock       ", &times[2]),
        ("write lock      ", &times[3]),
    ] {
        println!(
            "   {label} p50 {:7.1} us  p99 {:7.1} us  ratio p50 {:.2}x two raw round trips",
            micros(percentile(samples, 0.5)),
            micros(percentile(samples, 0.99)),
            micros(percentile(samples, 0.5)) / micros(raw_pair)
        );
    }
    println!();

    // 2. Read-lock throughput: 16 readers on one name, against 16 tasks of raw EVALSHA pairs
    //    and 16 tasks of reentrant lock+unlock on 16 names (no contention: what a mutex gets at
    //    best) and on one name (contended: what a mutex gets for a shared resource).
    let per = sizes.reads_per_reader;
    let ops = READERS * per;
    let raw_rate = {
        let start = Instant::now();
        let mut handles = Vec::new();
        for t in 0..READERS {
            let mut conn = raw.clone();
            let script = script.clone();
            handles.push(tokio::spawn(async move {
                let key = format!("bench:rw:raw:{t}");
                for _ in 0..per {
                    raw_eval(&mut conn, &script, &key).await;
                    raw_eval(&mut conn, &script, &key).await;
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        ops as f64 / start.elapsed().as_secs_f64()
    };
    let reentrant_rate = |shared: bool| {
        let client = client.clone();
        async move {
            let start = Instant::now();
            let mut handles = Vec::new();
            for t in 0..READERS {
                let name = if shared {
                    "bench:rw:mutex".to_owned()
                } else {
                    format!("bench:rw:mutex:{t}")
                };
                let lock = client.lock(&name);
                handles.push(tokio::spawn(async move {
                    for _ in 0..per {
                        lock.lock().await.unwrap().unlock().await.unwrap();
                    }
                }));
            }
            for h in handles {
                h.await.unwrap();
            }
            ops as f64 / start.elapsed().as_secs_f64()
        }
    };
    let mutex_spread = reentrant_rate(false).await;
    let mutex_one = reentrant_rate(true).await;
    let before = command_counts(&mut raw).await;
    let max_inside = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicU64::new(0));
    let read_rate = {
        let start = Instant::now();
        let mut handles = Vec::new();
        for _ in 0..READERS {
            let rw = client.rw_lock("bench:rw:shared");
            let (inside, max_inside) = (inside.clone(), max_inside.clone());
            handles.push(tokio::spawn(async move {
                for _ in 0..per {
                    let guard = rw.read().await.unwrap();
                    let now = inside.fetch_add(1, Ordering::Relaxed) + 1;
                    max_inside.fetch_max(now, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                    inside.fetch_sub(1, Ordering::Relaxed);
                    guard.unlock().await.unwrap();
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        ops as f64 / start.elapsed().as_secs_f64()
    };
    let after = command_counts(&mut raw).await;
    println!("2. read-lock throughput, {READERS} readers on one name ({ops} read+unlock in all)");
    println!(
        "   read lock, one name          {read_rate:9.0} /s  (up to {} readers inside at once)",
        max_inside.load(Ordering::Relaxed)
    );
    println!(
        "   redis commands per read+unlock: {}",
        command_delta(&before, &after, ops)
    );
    println!("   raw EVALSHA pairs            {raw_rate:9.0} /s");
    println!("   reentrant lock, 16 names     {mutex_spread:9.0} /s");
    println!("   reentrant lock, one name     {mutex_one:9.0} /s");
    println!(
        "   ratio: {:.2}x raw EVALSHA pairs; {:.2}x the reentrant lock on 16 names; {:.1}x the \
         reentrant lock on one name",
        read_rate / raw_rate,
        read_rate / mutex_spread,
        read_rate / mutex_one
    );
    println!();

    // 3. Writer wait under continuous read load: 16 readers loop (read, yield, unlock) without
    //    pause; a writer takes the write lock every 20 ms.
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for _ in 0..READERS {
        let rw = client.rw_lock("bench:rw:loaded");
        let (stop, reads) = (stop.clone(), reads.clone());
        readers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let guard = rw.read().await.unwrap();
                reads.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
                guard.unlock().await.unwrap();
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let writer = client.rw_lock("bench:rw:loaded");
    let mut waits = Vec::with_capacity(sizes.writer_samples);
    let mut granted = Vec::with_capacity(sizes.writer_samples);
    let loaded_start = Instant::now();
    let reads_start = reads.load(Ordering::Relaxed);
    for _ in 0..sizes.writer_samples {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let before = reads.load(Ordering::Relaxed);
        let t = Instant::now();
        let guard = writer.write().await.unwrap();
        waits.push(t.elapsed());
        granted.push(reads.load(Ordering::Relaxed) - before);
        guard.unlock().await.unwrap();
    }
    let read_rate_loaded =
        (reads.load(Ordering::Relaxed) - reads_start) as f64 / loaded_start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.await.unwrap();
    }
    waits.sort();
    granted.sort();
    println!(
        "3. writer wait under continuous read load ({READERS} readers, {} writes, one every 20 ms)",
        sizes.writer_samples
    );
    println!(
        "   wait p50 {:8.1} us  p99 {:8.1} us  max {:8.1} us",
        micros(percentile(&waits, 0.5)),
        micros(percentile(&waits, 0.99)),
        micros(*waits.last().unwrap_or(&Duration::ZERO))
    );
    println!(
        "   = p50 {:.1} raw round trips (one raw round trip p50 {:.1} us)",
        micros(percentile(&waits, 0.5)) / micros(round_trip),
        micros(round_trip)
    );
    println!(
        "   reads granted while a writer waited: p50 {}, max {}; reads meanwhile {:.0} /s",
        percentile_u64(&granted, 0.5),
        granted.last().copied().unwrap_or(0),
        read_rate_loaded
    );
    // 4. Write hand-offs under contention: W writers loop (write, yield, unlock) on one name,
    //    against W tasks doing the same with the reentrant lock, side by side in one run.
    println!();
    println!(
        "4. hand-offs under contention, one name, {handoff_ms} ms per run",
        handoff_ms = sizes.handoff_ms
    );
    for writers in [2usize, 8, 64] {
        let mut rates = Vec::new();
        for kind in ["write lock", "reentrant lock"] {
            let name = format!("bench:handoff:{kind}:{writers}").replace(' ', "-");
            let before = command_counts(&mut raw).await;
            let (count, elapsed) = contend(&client, &name, kind, writers, sizes.handoff_ms).await;
            let after = command_counts(&mut raw).await;
            let evalsha = after.get("evalsha").copied().unwrap_or(0)
                - before.get("evalsha").copied().unwrap_or(0);
            let rate = count as f64 / elapsed.as_secs_f64();
            println!(
                "   {writers:2} tasks, {kind:14}: {rate:8.0} hand-offs/s, {:.1} EVALSHA per acquisition",
                evalsha as f64 / count.max(1) as f64
            );
            rates.push(rate);
        }
        println!(
            "   {writers:2} tasks: the write lock makes {:.2}x the reentrant lock's hand-offs",
            rates[0] / rates[1]
        );
    }

    let stats = client.stats();
    println!();
    println!(
        "client: {} pub/sub channels left, {} holds left",
        stats.channels, stats.watchdog.holds
    );
}

/// `tasks` tasks take `name` (a write lock or a reentrant lock) in a loop for `ms`; returns
/// the acquisitions and the time they took.
async fn contend(
    client: &keylatch::Client,
    name: &str,
    kind: &str,
    tasks: usize,
    ms: u64,
) -> (u64, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (stop, count) = (stop.clone(), count.clone());
        let write = kind == "write lock";
        let rw = client.rw_lock(name);
        let lock = client.lock(name);
        handles.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let guard = if write {
                    rw.write().await.unwrap()
                } else {
                    lock.lock().await.unwrap()
                };
                count.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
                guard.unlock().await.unwrap();
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(ms)).await;
    stop.store(true, Ordering::Relaxed);
    let counted = count.load(Ordering::Relaxed);
    let elapsed = started.elapsed();
    for handle in handles {
        handle.await.unwrap();
    }
    (counted, elapsed)
}

fn percentile_u64(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}
