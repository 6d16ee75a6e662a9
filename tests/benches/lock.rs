//! keylatch's reentrant lock beside raw Redis round trips, measured in one run on one
//! throwaway redis-server. Prints figures and ratios; asserts nothing.
//!
//! ```text
//! cargo bench -p keylatch --bench lock            # full run
//! KEYLATCH_BENCH_QUICK=1 cargo bench -p keylatch --bench lock
//! ```
mod common;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use common::{
    RAW_SCRIPT, command_counts, command_delta, handoff_gaps, micros, percentile, raw_eval,
};
use keylatch::redis;
use keylatch_testkit::RedisServer;

struct Sizes {
    uncontended: usize,
    keys_ops: usize,
    handoffs: usize,
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
            keys_ops: 512,
            handoffs: 64,
        }
    } else if quick {
        Sizes {
            uncontended: 2_000,
            keys_ops: 20_000,
            handoffs: 500,
        }
    } else {
        Sizes {
            uncontended: 20_000,
            keys_ops: 200_000,
            handoffs: 5_000,
        }
    };
    let server = RedisServer::start().expect("start redis-server (run ./scripts/setup.sh)");
    let client = common::client(&server).await;
    let raw_client = redis::Client::open(server.url()).unwrap();
    let mut raw = raw_client.get_multiplexed_async_connection().await.unwrap();
    let script = redis::Script::new(RAW_SCRIPT);
    raw_eval(&mut raw, &script, "warm").await;

    println!(
        "keylatch benchmark ({} run)",
        if quick { "quick" } else { "full" }
    );
    println!(
        "machine: {} cpus, redis-server on loopback",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();

    // 1. Uncontended lock + unlock, one task, interleaved with two raw EVALSHA round trips.
    let lock = client.lock("bench:uncontended");
    let mut lock_times = Vec::with_capacity(sizes.uncontended);
    let mut raw_times = Vec::with_capacity(sizes.uncontended);
    for _ in 0..sizes.uncontended {
        let t = Instant::now();
        raw_eval(&mut raw, &script, "bench:raw").await;
        raw_eval(&mut raw, &script, "bench:raw").await;
        raw_times.push(t.elapsed());
        let t = Instant::now();
        let guard = lock.lock().await.unwrap();
        guard.unlock().await.unwrap();
        lock_times.push(t.elapsed());
    }
    lock_times.sort();
    raw_times.sort();
    let raw_pair_p50 = percentile(&raw_times, 0.5);
    let rt_p50 = raw_pair_p50 / 2;
    println!(
        "1. uncontended lock+unlock, 1 task ({} samples)",
        sizes.uncontended
    );
    println!(
        "   keylatch   p50 {:7.1} us  p99 {:7.1} us",
        micros(percentile(&lock_times, 0.5)),
        micros(percentile(&lock_times, 0.99))
    );
    println!(
        "   2x EVALSHA p50 {:7.1} us  p99 {:7.1} us",
        micros(raw_pair_p50),
        micros(percentile(&raw_times, 0.99))
    );
    println!(
        "   ratio p50: {:.2}x two raw round trips (target <= 1.2x)",
        micros(percentile(&lock_times, 0.5)) / micros(raw_pair_p50)
    );
    println!();

    // 2. 256 tasks over 10 000 keys: lock+unlock pairs vs raw EVALSHA pairs.
    let tasks = 256;
    let keys = 10_000;
    let per_task = sizes.keys_ops / tasks;
    let raw_rate = {
        let start = Instant::now();
        let mut handles = Vec::new();
        for t in 0..tasks {
            let mut conn = raw.clone();
            let script = script.clone();
            handles.push(tokio::spawn(async move {
                for i in 0..per_task {
                    let key = format!("bench:raw:{}", (t * 7919 + i * 104_729) % keys);
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
    let before = command_counts(&mut raw).await;
    let lock_rate = {
        let start = Instant::now();
        let mut handles = Vec::new();
        for t in 0..tasks {
            let client = client.clone();
            handles.push(tokio::spawn(async move {
                for i in 0..per_task {
                    let key = format!("bench:keys:{}", (t * 7919 + i * 104_729) % keys);
                    let guard = client.lock(&key).lock().await.unwrap();
                    guard.unlock().await.unwrap();
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        (tasks * per_task) as f64 / start.elapsed().as_secs_f64()
    };
    let after = command_counts(&mut raw).await;
    // The same scripts keylatch runs, sent raw: separates the library's cost from the scripts'.
    let acquire = redis::Script::new(include_str!(
        "../../crates/redis/keylatch-reentrant/src/lua/acquire.lua"
    ));
    let release = redis::Script::new(include_str!(
        "../../crates/redis/keylatch-reentrant/src/lua/release.lua"
    ));
    let own_rate = {
        let start = Instant::now();
        let mut handles = Vec::new();
        for t in 0..tasks {
            let mut conn = raw.clone();
            let (acquire, release) = (acquire.clone(), release.clone());
            handles.push(tokio::spawn(async move {
                let owner = format!("raw-owner:{t}");
                for i in 0..per_task {
                    let key = format!("bench:own:{}", (t * 7919 + i * 104_729) % keys);
                    let channel = format!("redisson_lock__channel:{{{key}}}");
                    let token = format!("redisson_lock_token:{{{key}}}");
                    let _: redis::Value = acquire
                        .key(&key)
                        .key(&token)
                        .key(format!("keylatch_meta:{{{key}}}"))
                        .arg(30_000)
                        .arg(&owner)
                        .arg("0")
                        .arg("0")
                        .arg("")
                        .invoke_async(&mut conn)
                        .await
                        .unwrap();
                    let _: redis::Value = release
                        .key(&key)
                        .key(&channel)
                        .key(format!("keylatch_meta:{{{key}}}"))
                        .arg("0")
                        .arg(&owner)
                        .invoke_async(&mut conn)
                        .await
                        .unwrap();
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        (tasks * per_task) as f64 / start.elapsed().as_secs_f64()
    };
    println!(
        "2. {tasks} tasks over {keys} keys, one client ({} pairs in all)",
        tasks * per_task
    );
    println!("   keylatch lock+unlock  {lock_rate:10.0} /s");
    println!(
        "   redis commands per lock+unlock: {}",
        command_delta(&before, &after, tasks * per_task)
    );
    println!("   raw EVALSHA pairs     {raw_rate:10.0} /s");
    println!("   keylatch's scripts, sent raw {own_rate:10.0} /s");
    println!(
        "   ratio: {:.2}x raw EVALSHA pairs (target >= 0.7x); {:.2}x keylatch's scripts sent raw",
        lock_rate / raw_rate,
        lock_rate / own_rate
    );
    println!();

    // 3. Hand-off: 16 waiters on one key; gap from the release to the next acquire.
    let waiters = 16;
    let per_waiter = sizes.handoffs / waiters;
    let events: Arc<Mutex<Vec<(Instant, Instant)>>> = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for _ in 0..waiters {
        let lock = client.lock("bench:handoff");
        let events = events.clone();
        handles.push(tokio::spawn(async move {
            for _ in 0..per_waiter {
                let guard = lock.lock().await.unwrap();
                let acquired = Instant::now();
                let released = Instant::now();
                guard.unlock().await.unwrap();
                events.lock().unwrap().push((acquired, released));
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let gaps = handoff_gaps(&events.lock().unwrap()[..]);
    let gap_p50 = percentile(&gaps, 0.5);
    println!(
        "3. hand-off, {waiters} waiters on one key ({} hand-offs)",
        gaps.len()
    );
    println!(
        "   gap p50 {:7.1} us  p99 {:7.1} us  (one raw round trip p50 {:5.1} us)",
        micros(gap_p50),
        micros(percentile(&gaps, 0.99)),
        micros(rt_p50)
    );
    println!(
        "   ratio p50: {:.2} raw round trips (target <= 4)",
        micros(gap_p50) / micros(rt_p50)
    );
    let stats = client.stats();
    println!();
    println!(
        "client: {} pub/sub channels left, {} holds left",
        stats.channels, stats.watchdog.holds
    );
}
