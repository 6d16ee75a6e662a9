//! The delayed queue, measured in one run on one throwaway redis-server: how late elements are
//! taken after their due time with a backlog pending, how long one move of due elements blocks
//! Redis (keylatch's take beside Redisson's transfer script, on the same backlog), and offer and
//! take throughput beside raw `ZADD` + `RPUSH` and `LPOP`. Prints figures and ratios; asserts
//! nothing.
//!
//! ```text
//! cargo bench -p keylatch-tests --bench queue            # full run: 10 000 pending, 100 000 backlog
//! KEYLATCH_BENCH_QUICK=1 cargo bench -p keylatch-tests --bench queue
//! ```
//!
//! Without `--bench` (as `cargo test --all-targets` runs it) this is a smoke run of a few
//! seconds that only shows the harness works.
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{micros, percentile};
use keylatch::queue::{DelayedQueue, Long};
use keylatch::redis::{self, AsyncCommands};
use keylatch_testkit::RedisServer;

/// Redisson's transfer (`QueueTransferTask` of `RedissonDelayedQueue`), as Redisson sends it.
const REDISSON_TRANSFER: &str = "local expiredValues = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, ARGV[2]); \
if #expiredValues > 0 then \
for i, v in ipairs(expiredValues) do \
local randomId, value = struct.unpack('Bc0Lc0', v);\
redis.call('rpush', KEYS[1], value);\
redis.call('lrem', KEYS[3], 1, v);\
end; \
redis.call('zrem', KEYS[2], unpack(expiredValues));\
end; \
local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); \
if v[1] ~= nil then \
return v[2]; \
end \
return nil;";

const TASKS: usize = 16;

struct Sizes {
    pending: usize,
    spread: Duration,
    backlog: usize,
    due: usize,
    ops: usize,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let smoke = !std::env::args().any(|a| a == "--bench");
    let quick = std::env::var_os("KEYLATCH_BENCH_QUICK").is_some();
    let sizes = if smoke {
        Sizes {
            pending: 200,
            spread: Duration::from_millis(500),
            backlog: 2_000,
            due: 200,
            ops: 400,
        }
    } else if quick {
        Sizes {
            pending: 10_000,
            spread: Duration::from_secs(5),
            backlog: 20_000,
            due: 2_000,
            ops: 10_000,
        }
    } else {
        Sizes {
            pending: 10_000,
            spread: Duration::from_secs(10),
            backlog: 100_000,
            due: 10_000,
            ops: 50_000,
        }
    };
    let server = RedisServer::start().expect("start redis-server (run ./scripts/setup.sh)");
    let client = common::client(&server).await;
    let raw_client = redis::Client::open(server.url()).unwrap();
    let mut raw = raw_client.get_multiplexed_async_connection().await.unwrap();
    // A transfer over a large backlog blocks the server for longer than the default.
    raw.set_response_timeout(Duration::from_secs(60));
    println!(
        "keylatch delayed queue benchmark ({} run)",
        if smoke {
            "smoke"
        } else if quick {
            "quick"
        } else {
            "full"
        }
    );

    // 1. Lateness: `pending` elements due over `spread`, taken by 4 consumers.
    let queue = client.delayed_queue::<Long>("bench-due").unwrap();
    let start = now_ms() + 1_000;
    let (pending, spread) = (sizes.pending as u64, sizes.spread.as_millis() as u64);
    offer_all(&queue, sizes.pending, move |i| {
        let due = start + (i as u64 * spread) / pending;
        (due as i64, Some(UNIX_EPOCH + Duration::from_millis(due)))
    })
    .await;
    let mut consumers = Vec::new();
    let left = Arc::new(std::sync::atomic::AtomicUsize::new(sizes.pending));
    for _ in 0..4 {
        let queue = queue.clone();
        let left = left.clone();
        consumers.push(tokio::spawn(async move {
            let mut late = Vec::new();
            while left.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                if let Some(due) = queue.poll_for(Duration::from_millis(200)).await.unwrap() {
                    late.push(Duration::from_millis(now_ms().saturating_sub(due as u64)));
                    left.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
            late
        }));
    }
    let mut late = Vec::new();
    for consumer in consumers {
        late.extend(consumer.await.unwrap());
    }
    late.sort();
    println!(
        "\nlateness of takes after the due time, {} pending over {:?}, 4 consumers:",
        sizes.pending, sizes.spread
    );
    println!(
        "  p50 {:.1} ms  p99 {:.1} ms  max {:.1} ms",
        micros(percentile(&late, 0.50)) / 1e3,
        micros(percentile(&late, 0.99)) / 1e3,
        micros(percentile(&late, 1.0)) / 1e3
    );

    // 2. A mass expiry: `due` elements due now behind `backlog - due` delayed ones (offered
    // last: every LREM scans the delay list from its head), moved 100 per call.
    let mut blocked = Vec::new();
    for who in ["keylatch", "redisson", "lean"] {
        let name = format!("bench-mass-{who}");
        let mut queue = client.delayed_queue::<Long>(&name).unwrap();
        if who == "lean" {
            queue = queue.with_lean_layout();
        }
        let later = sizes.backlog - sizes.due;
        offer_all(&queue, later, |i| (i as i64, None)).await;
        offer_all(&queue, sizes.due, |i| {
            (i as i64, Some(UNIX_EPOCH + Duration::from_millis(1)))
        })
        .await;
        let mut calls = Vec::new();
        let started = Instant::now();
        loop {
            let call = Instant::now();
            let moved = if who != "redisson" {
                queue.transfer().await.unwrap().moved
            } else {
                let before: u64 = raw.llen(&name).await.unwrap();
                let _: Option<String> = redis::Script::new(REDISSON_TRANSFER)
                    .key(&name)
                    .key(format!("redisson_delay_queue_timeout:{{{name}}}"))
                    .key(format!("redisson_delay_queue:{{{name}}}"))
                    .arg(now_ms())
                    .arg(100)
                    .invoke_async(&mut raw)
                    .await
                    .unwrap();
                let after: u64 = raw.llen(&name).await.unwrap();
                after - before
            };
            if moved == 0 {
                break;
            }
            calls.push(call.elapsed());
        }
        let total = started.elapsed();
        calls.sort();
        blocked.push((who, percentile(&calls, 1.0), total, calls.len()));
        queue.destroy().await.unwrap();
    }
    println!(
        "\nmoving {} due elements out of a backlog of {}, 100 per script call \
         (each call blocks Redis; times include one local round trip):",
        sizes.due, sizes.backlog
    );
    for (who, longest, total, calls) in &blocked {
        println!(
            "  {who:<9} longest call {:.1} ms, {calls} calls, {:.0} ms in all",
            micros(*longest) / 1e3,
            micros(*total) / 1e3
        );
    }
    println!(
        "  ratio to redisson (longest call): keylatch {:.2}, keylatch lean layout {:.3}",
        micros(blocked[0].1) / micros(blocked[1].1),
        micros(blocked[2].1) / micros(blocked[1].1)
    );

    // 3. Throughput: offers and takes beside the raw commands, `TASKS` tasks each, in both
    // layouts (the elements are all due at once, in random order of the delay list).
    let started = Instant::now();
    raw_all(&raw, sizes.ops, true).await;
    let raw_offers = started.elapsed();
    let started = Instant::now();
    raw_all(&raw, sizes.ops, false).await;
    let raw_takes = started.elapsed();
    let rate = |d: Duration| sizes.ops as f64 / d.as_secs_f64();
    println!("\nthroughput, {} operations, {TASKS} tasks:", sizes.ops);
    println!(
        "  raw ZADD+RPUSH (one round trip) {:>9.0}/s   raw LPOP {:>9.0}/s",
        rate(raw_offers),
        rate(raw_takes)
    );
    for lean in [false, true] {
        let mut queue = client.delayed_queue::<Long>("bench-ops").unwrap();
        if lean {
            queue = queue.with_lean_layout();
        }
        let started = Instant::now();
        offer_all(&queue, sizes.ops, |i| (i as i64, Some(UNIX_EPOCH))).await;
        let offers = started.elapsed();
        let started = Instant::now();
        take_all(&queue, sizes.ops).await;
        let takes = started.elapsed();
        println!(
            "  {:<8} offer {:>9.0}/s (ratio {:.2})   take {:>9.0}/s (ratio {:.2})",
            if lean { "lean" } else { "default" },
            rate(offers),
            rate(offers) / rate(raw_offers),
            rate(takes),
            rate(takes) / rate(raw_takes)
        );
    }
    client.shutdown().await.unwrap();
}

/// Offers `n` elements from `TASKS` tasks: `value(i)` gives the value and the due time (`None`:
/// an hour from now).
async fn offer_all(
    queue: &DelayedQueue<Long>,
    n: usize,
    value: impl Fn(usize) -> (i64, Option<SystemTime>) + Send + Sync + 'static,
) {
    let value = Arc::new(value);
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let queue = queue.clone();
        let value = value.clone();
        tasks.push(tokio::spawn(async move {
            for i in (t..n).step_by(TASKS) {
                match value(i) {
                    (v, Some(when)) => queue.offer_at(&v, when).await.unwrap(),
                    (v, None) => queue.offer(&v, Duration::from_secs(3600)).await.unwrap(),
                };
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

async fn take_all(queue: &DelayedQueue<Long>, n: usize) {
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            for _ in (t..n).step_by(TASKS) {
                queue.poll().await.unwrap().expect("an element");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

async fn raw_all(conn: &redis::aio::MultiplexedConnection, n: usize, offer: bool) {
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let mut conn = conn.clone();
        tasks.push(tokio::spawn(async move {
            for i in (t..n).step_by(TASKS) {
                if offer {
                    let _: () = redis::pipe()
                        .zadd("raw-z", i, i)
                        .ignore()
                        .rpush("raw-l", i)
                        .ignore()
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                } else {
                    let _: Option<String> = conn.lpop("raw-l", None).await.unwrap();
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}
