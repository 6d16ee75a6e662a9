//! A dropped acquisition leaves nothing held or queued on the server (`pg_locks`), and its
//! connection is not given back to the pool.

mod support;

use std::time::Duration;

use keylatch_core::DistributedLock;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_wait_leaves_no_waiter_and_no_hold() {
    let server = support::server();
    let holder = support::client(&server).await;
    let waiter = support::client(&server).await;
    let held = holder.lock("cancel").unwrap().lock().await.unwrap();
    let lock = waiter.lock("cancel").unwrap();
    // Waiting in the server's queue, then dropped.
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await.map(drop) }
    });
    support::eventually("the waiter is in the server's queue", || {
        support::advisory_rows(&server, "cancel") == vec![true, false]
            || support::advisory_rows(&server, "cancel") == vec![false, true]
    })
    .await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    waiter.wait_idle().await;
    support::eventually("the cancelled waiter left the queue", || {
        support::advisory_rows(&server, "cancel") == vec![true]
    })
    .await;
    held.unlock().await.unwrap();
    assert!(support::advisory_rows(&server, "cancel").is_empty());
    let got = lock.try_lock().await.unwrap();
    if got.is_none() {
        println!(
            "{}",
            server
                .psql("SELECT pid, state, query, wait_event FROM pg_stat_activity")
                .unwrap()
        );
        println!("{}", server.psql("SELECT * FROM pg_locks").unwrap());
    }
    assert!(got.is_some());
}

/// A storm of acquisitions cut short at every point (before the connection, while waiting,
/// after the grant, during the fencing bump): nothing held afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_storm_leaves_nothing_held() {
    let server = support::server();
    let client = support::client(&server).await;
    let lock = client.lock("storm").unwrap();
    let mut acquired = 0;
    for i in 0..60u64 {
        let cut = Duration::from_micros(i * 150);
        if let Ok(guard) = tokio::time::timeout(cut, lock.lock()).await {
            acquired += 1;
            guard.unwrap().unlock().await.unwrap();
        }
    }
    client.wait_idle().await;
    support::eventually("no advisory lock left", || {
        support::advisory_rows(&server, "storm").is_empty()
    })
    .await;
    assert!(
        lock.try_lock().await.unwrap().is_some(),
        "{acquired} acquired"
    );
}
