//! keylatch's ZooKeeper mutex beside the raw ZooKeeper round trips it needs, and the Redis
//! reentrant lock beside its own raw round trips, measured in one run on one machine (a
//! throwaway standalone ZooKeeper and a throwaway redis-server, both on loopback). Prints a
//! table of figures and ratios; asserts nothing.
//!
//! ```text
//! cargo bench -p keylatch-tests --bench zookeeper            # full run
//! KEYLATCH_BENCH_QUICK=1 cargo bench -p keylatch-tests --bench zookeeper
//! KEYLATCH_ZK_FORCE_SYNC=yes KEYLATCH_BENCH_QUICK=1 cargo bench -p keylatch-tests --bench zookeeper
//! ```
//!
//! The ZooKeeper server runs with `forceSync=no` unless `KEYLATCH_ZK_FORCE_SYNC=yes`
//! (ZooKeeper's default: an fsync of the transaction log per write).
//!
//! May import: keylatch, keylatch-zookeeper, keylatch-testkit, zookeeper-client, `common`.
mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{RAW_SCRIPT, handoff_gaps, micros, percentile, raw_eval};
use keylatch::redis;
use keylatch_core::DistributedLock;
use keylatch_testkit::{RedisServer, ZooKeeperServer};
use keylatch_zookeeper::ZkClient;
use zookeeper_client as zk;

struct Row {
    store: &'static str,
    lock_p50: Duration,
    lock_p99: Duration,
    floor_p50: Duration,
    floor: &'static str,
    gap_p50: Duration,
    gap_p99: Duration,
    round_trip_p50: Duration,
}

/// Hand-off: `waiters` tasks on one lock; the gap from a release to the next acquire.
async fn handoff(locks: Vec<Arc<dyn DistributedLock>>, per_waiter: usize) -> Vec<Duration> {
    let events: Arc<Mutex<Vec<(Instant, Instant)>>> = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for lock in locks {
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
    handoff_gaps(&events.lock().unwrap()[..])
}

async fn zookeeper(uncontended: usize, handoffs: usize, waiters: usize) -> Row {
    let server =
        ZooKeeperServer::start().expect("start ZooKeeper (run ./scripts/setup-zookeeper.sh)");
    let url = format!("zk://{}", server.connect_string());
    let raw = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(&server.connect_string())
        .await
        .expect("raw session");
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let ephemeral = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    raw.mkdir("/bench/raw", &persistent).await.unwrap();
    let client = ZkClient::connect(&url).await.expect("connect");
    let lock = client.lock("bench-uncontended").unwrap();
    // Warm up both paths (the lock's parent node is created on first use).
    lock.lock().await.unwrap().unlock().await.unwrap();
    let (mut lock_times, mut floor_times, mut rt_times) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..uncontended {
        let t = Instant::now();
        let (_, seq) = raw
            .create("/bench/raw/lock-", b"", &ephemeral)
            .await
            .unwrap();
        raw.list_children("/bench/raw").await.unwrap();
        raw.delete(&format!("/bench/raw/lock-{seq}"), None)
            .await
            .unwrap();
        floor_times.push(t.elapsed());
        let t = Instant::now();
        raw.check_stat("/bench").await.unwrap();
        rt_times.push(t.elapsed());
        let t = Instant::now();
        let guard = lock.lock().await.unwrap();
        guard.unlock().await.unwrap();
        lock_times.push(t.elapsed());
    }
    let locks = (0..waiters)
        .map(|_| Arc::new(client.lock("bench-handoff").unwrap()) as Arc<dyn DistributedLock>)
        .collect();
    let gaps = handoff(locks, handoffs / waiters).await;
    client.shutdown().await.unwrap();
    row(
        "zookeeper",
        "create+getChildren+delete",
        lock_times,
        floor_times,
        rt_times,
        &gaps,
    )
}

async fn redis_store(uncontended: usize, handoffs: usize, waiters: usize) -> Row {
    let server = RedisServer::start().expect("start redis-server (run ./scripts/setup.sh)");
    let client = common::client(&server).await;
    let raw_client = redis::Client::open(server.url()).unwrap();
    let mut raw = raw_client.get_multiplexed_async_connection().await.unwrap();
    let script = redis::Script::new(RAW_SCRIPT);
    raw_eval(&mut raw, &script, "warm").await;
    let lock = client.lock("bench:zk-side:uncontended");
    lock.lock().await.unwrap().unlock().await.unwrap();
    let (mut lock_times, mut floor_times, mut rt_times) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..uncontended {
        let t = Instant::now();
        raw_eval(&mut raw, &script, "bench:raw").await;
        raw_eval(&mut raw, &script, "bench:raw").await;
        floor_times.push(t.elapsed());
        let t = Instant::now();
        raw_eval(&mut raw, &script, "bench:raw").await;
        rt_times.push(t.elapsed());
        let t = Instant::now();
        let guard = lock.lock().await.unwrap();
        guard.unlock().await.unwrap();
        lock_times.push(t.elapsed());
    }
    let locks = (0..waiters)
        .map(|_| Arc::new(client.lock("bench:zk-side:handoff")) as Arc<dyn DistributedLock>)
        .collect();
    let gaps = handoff(locks, handoffs / waiters).await;
    row(
        "redis",
        "2x EVALSHA",
        lock_times,
        floor_times,
        rt_times,
        &gaps,
    )
}

fn row(
    store: &'static str,
    floor: &'static str,
    mut lock_times: Vec<Duration>,
    mut floor_times: Vec<Duration>,
    mut rt_times: Vec<Duration>,
    gaps: &[Duration],
) -> Row {
    lock_times.sort();
    floor_times.sort();
    rt_times.sort();
    Row {
        store,
        lock_p50: percentile(&lock_times, 0.5),
        lock_p99: percentile(&lock_times, 0.99),
        floor_p50: percentile(&floor_times, 0.5),
        floor,
        gap_p50: percentile(gaps, 0.5),
        gap_p99: percentile(gaps, 0.99),
        round_trip_p50: percentile(&rt_times, 0.5),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes `--bench`; without it (`cargo test --all-targets`) this is a smoke
    // run that only shows the harness works.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let quick = std::env::var_os("KEYLATCH_BENCH_QUICK").is_some();
    let (uncontended, handoffs) = match (smoke, quick) {
        (true, _) => (20, 40),
        (false, true) => (300, 400),
        (false, false) => (3_000, 4_000),
    };
    let waiters = 8;
    let rows = [
        zookeeper(uncontended, handoffs, waiters).await,
        redis_store(uncontended, handoffs, waiters).await,
    ];
    let kind = if smoke {
        "smoke"
    } else if quick {
        "quick"
    } else {
        "full"
    };
    println!(
        "keylatch ZooKeeper vs Redis ({kind} run, {uncontended} uncontended samples, {waiters} waiters)"
    );
    println!(
        "machine: {} cpus, servers on loopback",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!(
        "{:<10} {:>13} {:>13} {:>13} {:>9}   {:>11} {:>11} {:>9} {:>11}",
        "store",
        "lock p50 us",
        "lock p99 us",
        "floor p50 us",
        "ratio",
        "gap p50 us",
        "gap p99 us",
        "1 rt us",
        "gap/rt"
    );
    for r in &rows {
        println!(
            "{:<10} {:>13.1} {:>13.1} {:>13.1} {:>8.2}x   {:>11.1} {:>11.1} {:>9.1} {:>10.2}x",
            r.store,
            micros(r.lock_p50),
            micros(r.lock_p99),
            micros(r.floor_p50),
            micros(r.lock_p50) / micros(r.floor_p50),
            micros(r.gap_p50),
            micros(r.gap_p99),
            micros(r.round_trip_p50),
            micros(r.gap_p50) / micros(r.round_trip_p50),
        );
    }
    println!();
    for r in &rows {
        println!("floor of {}: {}", r.store, r.floor);
    }
    println!(
        "zookeeper / redis: lock p50 {:.2}x, hand-off gap p50 {:.2}x",
        micros(rows[0].lock_p50) / micros(rows[1].lock_p50),
        micros(rows[0].gap_p50) / micros(rows[1].gap_p50)
    );
}
