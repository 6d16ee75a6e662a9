//! The semaphore (Curator's `InterProcessSemaphoreV2` layout) on a real ZooKeeper server.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keylatch_core::{DistributedLock, Error};
use support::{children, client, raw, server, wait_children};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_than_max_leases_holders() {
    let clients = [client().await, client().await];
    let inside = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..10 {
        let semaphore = clients[t % 2].semaphore("capped", 3).unwrap();
        let (inside, max, acquired) = (inside.clone(), max.clone(), acquired.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..3 {
                let permit = semaphore.acquire().await.unwrap();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                acquired.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                permit.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(acquired.load(Ordering::SeqCst), 30);
    let max = max.load(Ordering::SeqCst);
    assert!(max <= 3, "{max} holders at once");
    assert!(max >= 2, "permits were never shared");
    let raw = raw(server()).await;
    assert!(children(&raw, "/keylatch/capped/leases").await.is_empty());
    assert!(children(&raw, "/keylatch/capped/locks").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_holders_permit_returns() {
    let (a, b) = (client().await, client().await);
    let raw = raw(server()).await;
    let leases = "/keylatch/crash/leases";
    let held = a.semaphore("crash", 2).unwrap();
    let first = held.acquire().await.unwrap();
    let second = held.acquire().await.unwrap();
    let waiting = b.semaphore("crash", 2).unwrap();
    assert!(waiting.try_acquire().await.unwrap().is_none());
    assert_eq!(children(&raw, leases).await.len(), 2);
    let waiter = tokio::spawn(async move { waiting.acquire().await });
    wait_children(&raw, leases, 3).await;
    // The holder "crashes": its permits are not released, its session is closed.
    first.into_guard().forget();
    second.into_guard().forget();
    drop(held);
    drop(a);
    let permit = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("the crashed holder's permits return")
        .unwrap()
        .unwrap();
    wait_children(&raw, leases, 1).await;
    permit.release().await.unwrap();
    assert!(children(&raw, leases).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_drops_and_bad_input() {
    let (a, b) = (client().await, client().await);
    let raw = raw(server()).await;
    let leases = "/keylatch/one/leases";
    assert!(matches!(
        a.semaphore("one", 0),
        Err(Error::InvalidPermits { .. })
    ));
    assert!(matches!(
        a.semaphore("a//b", 1),
        Err(Error::InvalidName { .. })
    ));
    let permit = a.semaphore("one", 1).unwrap().acquire().await.unwrap();
    let other = b.semaphore("one", 1).unwrap();
    let lock = other.as_lock();
    assert!(lock.is_locked().await.unwrap());
    assert!(
        lock.try_lock_for(Duration::from_millis(200), None)
            .await
            .unwrap()
            .is_none()
    );
    let dropped = tokio::time::timeout(Duration::from_millis(300), other.acquire()).await;
    assert!(dropped.is_err());
    b.wait_idle().await;
    assert_eq!(children(&raw, leases).await.len(), 1);
    assert!(children(&raw, "/keylatch/one/locks").await.is_empty());
    assert!(matches!(
        lock.force_unlock().await,
        Err(Error::Unsupported { .. })
    ));
    permit.release().await.unwrap();
    let guard = lock.try_lock().await.unwrap().expect("free now");
    guard.unlock().await.unwrap();
    assert!(children(&raw, leases).await.is_empty());
}
