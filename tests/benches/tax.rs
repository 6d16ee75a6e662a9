//! The library tax: keylatch's reentrant lock against its own two scripts sent as raw
//! `EVALSHA` through one redis-rs multiplexed connection, at 1 to 1 024 tasks over 10 000
//! names, in alternating blocks of one run (so drifting load hits both). Prints throughput and
//! the client's CPU per lock + unlock (this process's user + system time; redis-server is
//! another process) and their ratios.
//!
//! ```sh
//! cargo bench -p keylatch-tests --bench tax                 # 4 blocks of 2 s per side and size
//! KEYLATCH_BENCH_QUICK=1 cargo bench -p keylatch-tests --bench tax
//! # for a profile of one side alone: only these task counts, only one side
//! KEYLATCH_TAX_TASKS=256 KEYLATCH_TAX_SIDE=keylatch cargo bench -p keylatch-tests --bench tax
//! # fewer blocks per side and size; and one JSON line per size appended to a file
//! KEYLATCH_TAX_BLOCKS=3 KEYLATCH_TAX_JSON=tax.jsonl cargo bench -p keylatch-tests --bench tax
//! ```
mod common;

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch::redis;
use keylatch_testkit::RedisServer;

const KEYS: u64 = 10_000;

/// This process's CPU time so far (user + system, all threads), from `/proc/self/stat`.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line: 11 and 12 after the name.
    let total = ticks(11) + ticks(12);
    // The kernel's USER_HZ is 100 on Linux.
    Duration::from_millis(total * 10)
}

struct Block {
    pairs: u64,
    elapsed: Duration,
    cpu: Duration,
}

/// `tasks` tasks run `op` on spread names for `length`.
async fn block<F, Fut>(tasks: u64, length: Duration, op: F) -> Block
where
    F: Fn(String) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let cpu_before = cpu_time();
    let start = Instant::now();
    let deadline = start + length;
    let mut handles = Vec::new();
    for t in 0..tasks {
        let op = op.clone();
        handles.push(tokio::spawn(async move {
            let mut done = 0u64;
            while Instant::now() < deadline {
                op(format!("tax:{}", (t * 7919 + done * 104_729) % KEYS)).await;
                done += 1;
            }
            done
        }));
    }
    let mut pairs = 0;
    for h in handles {
        pairs += h.await.unwrap();
    }
    Block {
        pairs,
        elapsed: start.elapsed(),
        cpu: cpu_time().saturating_sub(cpu_before),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let smoke = !std::env::args().any(|a| a == "--bench");
    let quick = std::env::var_os("KEYLATCH_BENCH_QUICK").is_some();
    let (blocks, length) = if smoke {
        (1, Duration::from_millis(100))
    } else if quick {
        (2, Duration::from_millis(1000))
    } else {
        (4, Duration::from_millis(2000))
    };
    let blocks = std::env::var("KEYLATCH_TAX_BLOCKS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(blocks);
    // Appended to, one line per size (scripts/bench.sh --scaling-only reads them).
    let json = std::env::var_os("KEYLATCH_TAX_JSON");
    let server = RedisServer::start().expect("start redis-server (run ./scripts/setup.sh)");
    let client = common::client(&server).await;
    let raw_client = redis::Client::open(server.url()).unwrap();
    let raw = raw_client.get_multiplexed_async_connection().await.unwrap();
    let acquire = Arc::new(redis::Script::new(include_str!(
        "../../crates/redis/keylatch-reentrant/src/lua/acquire.lua"
    )));
    let release = Arc::new(redis::Script::new(include_str!(
        "../../crates/redis/keylatch-reentrant/src/lua/release.lua"
    )));

    {
        let lock = client.lock("tax:sizes");
        let acquire = lock.acquire(keylatch::AcquireOptions::new());
        let guard = lock.lock().await.unwrap();
        let release_size = std::mem::size_of_val(&guard.unlock());
        println!(
            "future sizes: acquire {} bytes, unlock {} bytes",
            std::mem::size_of_val(&acquire),
            release_size
        );
    }
    println!(
        "library tax: keylatch's reentrant lock against its own scripts sent raw \
         ({blocks} blocks of {length:?} per side and size, alternating)"
    );
    println!(
        "{:>6} {:>14} {:>14} {:>7} {:>12} {:>12} {:>7} {:>10} {:>8}",
        "tasks",
        "keylatch /s",
        "raw /s",
        "ratio",
        "cpu us/pair",
        "raw us/pair",
        "ratio",
        "coalesced",
        "per call"
    );
    let sizes: Vec<u64> = std::env::var("KEYLATCH_TAX_TASKS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 16, 256, 1024]);
    // `keylatch` or `raw` runs that side alone (for a profile); both by default.
    let side = std::env::var("KEYLATCH_TAX_SIDE").unwrap_or_default();
    let (run_lib, run_raw) = (side != "raw", side != "keylatch");
    let mut coalesced_before = (0, 0);
    for tasks in sizes {
        let (mut lib, mut raw_total) = (Vec::new(), Vec::new());
        for _ in 0..blocks {
            if run_lib {
                lib.push(
                    block(tasks, length, {
                        let client = client.clone();
                        move |name: String| {
                            let client = client.clone();
                            async move {
                                let guard = client.lock(&name).lock().await.unwrap();
                                guard.unlock().await.unwrap();
                            }
                        }
                    })
                    .await,
                );
            }
            if run_raw {
                raw_total.push(
                    block(tasks, length, {
                        let (raw, acquire, release) =
                            (raw.clone(), acquire.clone(), release.clone());
                        move |name: String| {
                            let (mut conn, acquire, release) =
                                (raw.clone(), acquire.clone(), release.clone());
                            async move {
                                let owner = "raw-owner:1";
                                let token = format!("redisson_lock_token:{{{name}}}");
                                let channel = format!("redisson_lock__channel:{{{name}}}");
                                let _: redis::Value = acquire
                                    .key(&name)
                                    .key(&token)
                                    .key(format!("keylatch_meta:{{{name}}}"))
                                    .arg(30_000)
                                    .arg(owner)
                                    .arg("0")
                                    .arg("0")
                                    .arg("")
                                    .invoke_async(&mut conn)
                                    .await
                                    .unwrap();
                                let _: redis::Value = release
                                    .key(&name)
                                    .key(&channel)
                                    .key(format!("keylatch_meta:{{{name}}}"))
                                    .arg("0")
                                    .arg(owner)
                                    .invoke_async(&mut conn)
                                    .await
                                    .unwrap();
                            }
                        }
                    })
                    .await,
                );
            }
        }
        let rate = |b: &[Block]| {
            b.iter().map(|b| b.pairs).sum::<u64>() as f64
                / b.iter().map(|b| b.elapsed.as_secs_f64()).sum::<f64>()
        };
        let cpu = |b: &[Block]| {
            b.iter().map(|b| b.cpu.as_secs_f64()).sum::<f64>() * 1e6
                / b.iter().map(|b| b.pairs).sum::<u64>().max(1) as f64
        };
        let (l, r) = (rate(&lib), rate(&raw_total));
        let stats = client.stats();
        let coalesced = (
            stats.coalesced_calls - coalesced_before.0,
            stats.coalesced_requests - coalesced_before.1,
        );
        coalesced_before = (stats.coalesced_calls, stats.coalesced_requests);
        let (lc, rc) = (cpu(&lib), cpu(&raw_total));
        let pairs: u64 = lib.iter().map(|b| b.pairs).sum();
        let share = coalesced.1 as f64 / pairs.max(1) as f64;
        let per_call = coalesced.1 as f64 / coalesced.0.max(1) as f64;
        println!(
            "{tasks:>6} {l:>14.0} {r:>14.0} {:>6.2}x {lc:>12.1} {rc:>12.1} {:>6.2}x {share:>10.2} {per_call:>8.1}",
            l / r,
            lc / rc,
        );
        if let Some(path) = &json {
            // A side that did not run is NaN here, null in the line.
            let line = serde_json::json!({
                "tasks": tasks,
                "keylatch_pairs_per_s": l,
                "raw_pairs_per_s": r,
                "ratio": l / r,
                "keylatch_cpu_us_per_pair": lc,
                "raw_cpu_us_per_pair": rc,
                // Requests (acquisitions and releases) sent coalesced: per pair, of 2.
                "coalesced_per_pair": share,
                "requests_per_coalesced_call": per_call,
                "coalesce": client.config().coalesce,
                "blocks": blocks,
                "block_ms": length.as_millis() as u64,
            });
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .expect("open KEYLATCH_TAX_JSON");
            writeln!(file, "{line}").expect("write KEYLATCH_TAX_JSON");
        }
    }
    client.shutdown().await.unwrap();
}
