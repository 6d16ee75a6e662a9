//! Exclusion under contention: tasks on two clients increment a counter with a read, a yield
//! and a write inside the fair lock; any overlap loses an increment. Most hand-overs there are
//! direct grants (the lock handed to the head of the queue on release). Plus the Send/Sync/'static
//! bounds of the fair lock's handle, futures and guards, and the trait object.
use std::sync::Arc;
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch::{DistributedLock, FairLock};
use keylatch_tests::{
    client, increments_under, raw, send_static, send_sync_static, server, unique,
};

const TASKS: usize = 8;
const ITERATIONS: u64 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_tasks_on_two_clients_never_overlap() {
    let server = server();
    let clients = [client(&server).await, client(&server).await];
    let name = unique("fair-exclusion");
    let counter = format!("{name}:counter");
    let locks: Vec<_> = (0..TASKS)
        .map(|i| clients[i % 2].fair_lock(&name))
        .collect();
    let total = increments_under(&server, locks, &counter, ITERATIONS).await;
    // Waits without an owner scope accept the lock handed over on release: most hand-overs
    // are grants, taken from the wake-up message.
    let letters: u64 = clients.iter().map(|c| c.stats().letters).sum();
    let acquisitions = TASKS as u64 * ITERATIONS;
    println!(
        "{TASKS} tasks x {ITERATIONS} iterations under the fair lock: counter = {total}, \
         {letters} taken from a letter"
    );
    assert_eq!(
        total, acquisitions,
        "an increment was lost: two holders overlapped"
    );
    assert!(
        letters >= acquisitions / 4,
        "only {letters} of {acquisitions} acquisitions were grants"
    );
    let mut conn = raw(&server).await;
    for key in [
        name.clone(),
        format!("redisson_lock_queue:{{{name}}}"),
        format!("redisson_lock_timeout:{{{name}}}"),
        format!("{{{name}}}:keylatch_waiters"),
        format!("{{{name}}}:keylatch_grants"),
    ] {
        let exists: bool = conn.exists(&key).await.expect("exists");
        assert!(!exists, "{key} remains after the last unlock");
    }
    for c in &clients {
        assert_eq!(c.stats().watchdog.holds, 0);
    }
}

#[test]
fn handle_and_waiter_are_send_sync_static() {
    fn check<T: Send + Sync + 'static>() {}
    check::<FairLock>();
    check::<Arc<dyn DistributedLock>>();
}

#[tokio::test]
async fn futures_are_send_and_the_trait_is_object_safe() {
    let server = server();
    let client = client(&server).await;
    let lock = client.fair_lock(&unique("fair-bounds"));
    let lock2 = lock.clone();
    let fut = async move { lock2.lock().await };
    send_static(&fut);
    let guard = fut.await.unwrap();
    send_sync_static(&guard);
    let lock3 = lock.clone();
    let queue = async move { lock3.queue().await };
    send_static(&queue);
    let waiters = queue.await.unwrap();
    send_sync_static(&waiters);
    let lock4 = lock.clone();
    let try_for = async move { lock4.try_lock_for(Duration::from_millis(10), None).await };
    send_static(&try_for);
    drop(try_for);
    guard.unlock().await.unwrap();

    let lock: Arc<dyn DistributedLock> = Arc::new(client.fair_lock(&unique("fair-dyn")));
    let guard = lock
        .try_lock_for(Duration::from_secs(1), None)
        .await
        .unwrap()
        .unwrap();
    assert!(lock.is_locked().await.unwrap());
    guard.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    assert!(!lock.force_unlock().await.unwrap());
}
