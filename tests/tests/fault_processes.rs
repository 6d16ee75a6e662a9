//! Fault suite, process scenarios: worker processes take the reentrant lock while the test
//! kills, pauses, disconnects them or flushes scripts. An oracle counter on a second
//! redis-server (never faulted) shows lost updates; event logs show overlapping validity
//! windows. `KEYLATCH_FULL=1` (`scripts/test.sh --full`) runs the long versions.
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keylatch::redis::{self, AsyncCommands};
use keylatch_tests::checker::{self, Window};
use keylatch_tests::workers::{Worker, args};
use keylatch_tests::{client_with, full, raw, server, unique};
use serde_json::Value;

const WORKER: &str = env!("CARGO_BIN_EXE_keylatch-test-fault-worker");

fn spawn_workers(n: u64, common: &[(&str, String)], flags: &[&str]) -> Vec<Worker> {
    (0..n)
        .map(|id| {
            let mut pairs = common.to_vec();
            pairs.push(("id", id.to_string()));
            Worker::spawn(WORKER, &args(&pairs, flags))
        })
        .collect()
}

async fn finish_all(workers: Vec<Worker>, within: Duration) -> Vec<Value> {
    let mut events = Vec::new();
    for worker in workers {
        let (status, mut evs) = worker.finish(within).await;
        assert!(
            status.is_some_and(|s| s.success()),
            "a worker did not finish: {status:?}"
        );
        assert_eq!(
            checker::count(&evs, "done"),
            1,
            "a worker did not reach the end"
        );
        events.append(&mut evs);
    }
    events
}

/// A worker that takes the lock (watchdog 1 s) and holds it until it is killed.
fn spawn_holder(
    server: &keylatch_tests::RedisServer,
    oracle: &keylatch_tests::RedisServer,
    name: &str,
) -> Worker {
    Worker::spawn(
        WORKER,
        &args(
            &[
                ("url", server.url()),
                ("oracle", oracle.url()),
                ("name", name.to_owned()),
                ("watchdog-ms", "1000".into()),
            ],
            &["hold-forever"],
        ),
    )
}

async fn oracle_counter(oracle: &keylatch_tests::RedisServer, name: &str) -> usize {
    let mut conn = raw(oracle).await;
    let value: Option<usize> = conn.get(format!("{name}:counter")).await.unwrap();
    value.unwrap_or(0)
}

/// 1. No faults: 0 overlaps, 0 lost updates, fencing tokens strictly increasing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s01_no_faults() {
    let server = server();
    let oracle = keylatch_tests::server();
    let name = unique("s01");
    let iterations = if full() { 200 } else { 40 };
    let common = [
        ("url", server.url()),
        ("oracle", oracle.url()),
        ("name", name.clone()),
        ("iterations", iterations.to_string()),
        ("watchdog-ms", "2000".into()),
    ];
    let events = finish_all(spawn_workers(8, &common, &[]), Duration::from_secs(300)).await;
    let windows = checker::windows(&events);
    let overlaps = checker::overlaps(&windows);
    let counter = oracle_counter(&oracle, &name).await;
    println!(
        "s01: 8 processes x {iterations}: {} critical sections, {overlaps} overlaps, counter {counter}, {} errors",
        windows.len(),
        checker::count(&events, "error")
    );
    assert_eq!(checker::count(&events, "error"), 0);
    assert_eq!(windows.len(), 8 * iterations);
    assert_eq!(overlaps, 0, "overlapping validity windows");
    assert_eq!(
        counter,
        8 * iterations,
        "lost updates on the oracle counter"
    );
    assert!(
        checker::tokens_strictly_increase(&windows),
        "fencing tokens went back"
    );
}

/// 2. A holder SIGKILLed (watchdog 1 s): a waiter acquires within lease + 1 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s02_holder_sigkill() {
    let server = server();
    let oracle = keylatch_tests::server();
    let name = unique("s02");
    let holder = spawn_holder(&server, &oracle, &name);
    holder
        .wait_for(Duration::from_secs(20), |e| e["ev"] == "acquired")
        .await
        .expect("the holder acquires");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    holder.signal("KILL");
    let killed = tokio::time::Instant::now();
    let client = keylatch_tests::client(&server).await;
    let guard = client
        .lock(&name)
        .try_lock_for(Duration::from_secs(2), None)
        .await
        .unwrap();
    println!(
        "s02: acquired {:?} after the holder's SIGKILL (bound 2 s)",
        killed.elapsed()
    );
    assert!(guard.is_some(), "not acquired within lease + 1 s");
    let _ = holder.finish(Duration::from_secs(5)).await;
}

/// 3. A holder paused (SIGSTOP) for 3 x lease: a waiter gets in within lease + 1 s; on
/// SIGCONT the old holder sees its lock lost before it writes, its fenced write is rejected,
/// and the validity windows do not overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s03_holder_paused() {
    let server = server();
    let oracle = keylatch_tests::server();
    let name = unique("s03");
    let lease = Duration::from_millis(1000);
    let holder = spawn_holder(&server, &oracle, &name);
    holder
        .wait_for(Duration::from_secs(20), |e| e["ev"] == "write")
        .await
        .expect("the holder writes");
    holder.signal("STOP");
    let stopped = tokio::time::Instant::now();
    let client = client_with(&server, Duration::from_secs(30), Duration::from_millis(200)).await;
    let guard = client
        .lock(&name)
        .with_fencing(true)
        .try_lock_for(lease + Duration::from_secs(1), None)
        .await
        .unwrap()
        .expect("a waiter gets in within lease + 1 s");
    let new_start = keylatch_tests::now_us();
    println!("s03: waiter acquired {:?} after SIGSTOP", stopped.elapsed());
    // The new holder writes with its newer token.
    let mut conn = raw(&oracle).await;
    let token = guard.fencing_token().unwrap();
    let newest: Option<u64> = conn.get(format!("{name}:newest-token")).await.unwrap();
    assert!(token > newest.unwrap_or(0));
    let _: () = conn
        .set(format!("{name}:newest-token"), token)
        .await
        .unwrap();
    tokio::time::sleep((lease * 3).saturating_sub(stopped.elapsed())).await;
    let resumed = keylatch_tests::now_us();
    holder.signal("CONT");
    let first_check = holder
        .wait_for(Duration::from_secs(10), |e| {
            e["ev"] == "check" && e["t"].as_u64().is_some_and(|t| u128::from(t) > resumed)
        })
        .await
        .expect("the resumed holder checks its lock");
    assert_eq!(
        first_check["lost"], true,
        "the resumed holder did not see its lock lost before writing"
    );
    let write = holder
        .wait_for(Duration::from_secs(10), |e| {
            e["ev"] == "write" && e["t"].as_u64().is_some_and(|t| u128::from(t) > resumed)
        })
        .await
        .expect("the resumed holder tries its fenced write");
    assert_eq!(
        write["ok"], false,
        "the stale holder's fenced write was accepted"
    );
    let (_, events) = holder.finish(Duration::from_secs(10)).await;
    // The old holder's window: to the last validity deadline it knew while not lost.
    let old_end = events
        .iter()
        .filter(|e| (e["ev"] == "check" && e["lost"] == false) || e["ev"] == "acquired")
        .filter_map(|e| e["until"].as_u64())
        .max()
        .unwrap();
    println!(
        "s03: old window ends {} us before the new one starts",
        new_start.saturating_sub(u128::from(old_end))
    );
    assert!(u128::from(old_end) <= new_start, "validity windows overlap");
    guard.unlock().await.unwrap();
}

/// Runs 8 workers while `fault` injects faults, counting them in the shared counter.
async fn storm_scenario<F>(tag: &str, hold_ms: u64, mode: &str, fault: F)
where
    F: Fn(redis::aio::MultiplexedConnection, Arc<AtomicUsize>) -> tokio::task::JoinHandle<()>,
{
    let server = server();
    let oracle = keylatch_tests::server();
    let name = unique(tag);
    let iterations = if full() { 100 } else { 20 };
    let lease_ms = 2000u64;
    let common = [
        ("url", server.url()),
        ("oracle", oracle.url()),
        ("name", name.clone()),
        ("iterations", iterations.to_string()),
        ("watchdog-ms", lease_ms.to_string()),
        ("hold-ms", hold_ms.to_string()),
        ("poll-ms", "300".into()),
        ("mode", mode.into()),
    ];
    let workers = spawn_workers(8, &common, &[]);
    // The faults start once every worker has connected: they are aimed at the primitives, and
    // a connect that a storm cuts fails with a typed error by design (a loaded machine starts
    // the workers slowly enough for that to happen).
    for worker in &workers {
        let ready = worker
            .wait_for(Duration::from_secs(60), |e| e["ev"] == "ready")
            .await;
        assert!(ready.is_some(), "a worker did not connect");
    }
    let injected = Arc::new(AtomicUsize::new(0));
    let faults = fault(raw(&server).await, injected.clone());
    let events = finish_all(workers, Duration::from_secs(300)).await;
    faults.abort();
    let injected = injected.load(Ordering::Relaxed);
    let windows: Vec<Window> = checker::windows(&events);
    let overlaps = checker::overlaps(&windows);
    let gap = checker::longest_gap_us(&windows);
    let counter = oracle_counter(&oracle, &name).await;
    let errors: Vec<&Value> = events
        .iter()
        .filter(|e| e["ev"] == "error" || (e["ev"] == "unlock" && e["ok"] == false))
        .collect();
    println!(
        "{tag} ({mode}): {injected} faults injected; {} critical sections, {overlaps} overlaps, counter {counter}, longest hand-off gap {} ms, {} errors",
        windows.len(),
        gap / 1000,
        errors.len()
    );
    assert!(injected > 0, "no fault was injected");
    assert!(errors.is_empty(), "errors reached a caller: {errors:?}");
    assert_eq!(windows.len(), 8 * iterations);
    assert_eq!(overlaps, 0, "overlapping validity windows");
    assert_eq!(counter, windows.len(), "lost updates");
    assert!(
        gap <= u128::from(lease_ms) * 1000,
        "a waiter stalled beyond the lease: {gap} us"
    );
}

/// 8. `CLIENT KILL TYPE normal` and `CLIENT KILL TYPE pubsub` every 100 ms: every worker
/// finishes, no error reaches a caller, 0 overlaps, no waiter stalls beyond the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s08_client_kill_storm() {
    storm_scenario("s08", 2, "reentrant", kill_storm).await;
}

/// 8, on the fair lock, whose releases hand the lock to the head of the queue: a reply lost
/// with its connection (an attempt that may have taken a grant and been undone), a letter
/// lost with the pub/sub connection, a leave after a grant, never two holders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s08_client_kill_storm_fair() {
    storm_scenario("s08-fair", 2, "fair", kill_storm).await;
}

/// Kills every normal and pub/sub connection every 100 ms.
fn kill_storm(
    mut conn: redis::aio::MultiplexedConnection,
    kills: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            for kind in ["pubsub", "normal"] {
                let killed = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg(kind)
                    .query_async::<usize>(&mut conn)
                    .await;
                if let Ok(n) = killed {
                    kills.fetch_add(n, Ordering::Relaxed);
                }
            }
        }
    })
}

/// 9. `SCRIPT FLUSH` every 100 ms: no NOSCRIPT reaches a caller, 0 overlaps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s09_script_flush_storm() {
    storm_scenario("s09", 12, "reentrant", |mut conn, flushes| {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let flushed = redis::cmd("SCRIPT")
                    .arg("FLUSH")
                    .query_async::<()>(&mut conn)
                    .await;
                if flushed.is_ok() {
                    flushes.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    })
    .await;
}
