//! Waiting writers are woken one per release, not all at once: 32 writers on one name make
//! about as many acquire scripts per acquisition as the reentrant lock's waiters (before: one
//! per waiting writer per release, a herd).
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use keylatch::redis;
use keylatch_tests::{client, raw, server};

const WRITERS: usize = 32;
const ACQUISITIONS: u64 = 320;

async fn evalsha_calls(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
        .and_then(|rest| rest.split(',').find_map(|kv| kv.strip_prefix("calls=")))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_one_waiting_writer() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let done = Arc::new(AtomicU64::new(0));
    let before = evalsha_calls(&mut conn).await;
    let mut tasks = Vec::new();
    for _ in 0..WRITERS {
        let rw = client.rw_lock("herd");
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            while done.fetch_add(1, Ordering::Relaxed) < ACQUISITIONS {
                let guard = rw.write().await.unwrap();
                tokio::task::yield_now().await;
                guard.unlock().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let calls = evalsha_calls(&mut conn).await - before;
    // Each acquisition: its successful acquire and its release, plus the failed tries of
    // writers woken for it. With every writer woken by every release that is about 32.
    let per = calls as f64 / ACQUISITIONS as f64;
    println!("{WRITERS} writers: {per:.1} EVALSHA per acquisition ({calls} for {ACQUISITIONS})");
    assert!(per < 8.0, "a herd: {per:.1} EVALSHA per acquisition");
    client.shutdown().await.unwrap();
}
