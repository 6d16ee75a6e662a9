//! Owners are asked for, never inferred: two acquisitions polled by one task exclude each other
//! (as with `tokio::sync::Mutex`), and reentrancy happens only for an explicit owner.
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use keylatch::{DistributedLock, Owner};
use keylatch_tests::{client, server, unique};

/// Every lock kind, for one name each.
fn locks(client: &keylatch::Client, tag: &str) -> Vec<(&'static str, Arc<dyn DistributedLock>)> {
    vec![
        ("reentrant", Arc::new(client.lock(&unique(tag)))),
        ("fair", Arc::new(client.fair_lock(&unique(tag)))),
        ("write", Arc::new(client.rw_lock(&unique(tag)).write_lock())),
    ]
}

#[tokio::test]
async fn join_in_one_task_gets_the_lock_once() {
    let server = server();
    let client = client(&server).await;
    for (kind, lock) in locks(&client, "join") {
        let (a, b) = tokio::join!(lock.try_lock(), lock.try_lock());
        let (a, b) = (a.unwrap(), b.unwrap());
        println!(
            "{kind}: join! of two try_lock: {} granted",
            u8::from(a.is_some()) + u8::from(b.is_some())
        );
        assert!(
            a.is_some() != b.is_some(),
            "{kind}: exactly one of two joined acquisitions gets the lock"
        );
        drop((a, b));
        client.wait_idle().await;

        // The second of two joined `lock()`s waits for the first one's guard.
        let first = lock.lock().await.unwrap();
        let waited = tokio::time::timeout(Duration::from_millis(300), lock.lock()).await;
        assert!(
            waited.is_err(),
            "{kind}: a second lock() in the same task waits"
        );
        first.unlock().await.unwrap();
        let second = tokio::time::timeout(Duration::from_secs(5), lock.lock())
            .await
            .expect("acquired once the first is released")
            .unwrap();
        second.unlock().await.unwrap();
    }
}

#[tokio::test]
async fn futures_unordered_in_one_task_never_overlap() {
    let server = server();
    let client = client(&server).await;
    for (kind, lock) in locks(&client, "unordered") {
        let inside = Arc::new(AtomicU32::new(0));
        let overlaps = Arc::new(AtomicU32::new(0));
        let done = Arc::new(AtomicU32::new(0));
        let mut all = FuturesUnordered::new();
        for _ in 0..6 {
            let (lock, inside, overlaps, done) =
                (lock.clone(), inside.clone(), overlaps.clone(), done.clone());
            all.push(async move {
                let guard = lock.lock().await.unwrap();
                // Read, yield, write: a second holder inside meanwhile is seen.
                let before = inside.fetch_add(1, Ordering::SeqCst);
                if before != 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await.unwrap();
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        let finished = tokio::time::timeout(Duration::from_secs(30), async {
            while all.next().await.is_some() {}
        })
        .await;
        assert!(finished.is_ok(), "{kind}: every acquisition finished");
        println!(
            "{kind}: 6 acquisitions in one task, {} overlaps",
            overlaps.load(Ordering::SeqCst)
        );
        assert_eq!(done.load(Ordering::SeqCst), 6, "{kind}");
        assert_eq!(
            overlaps.load(Ordering::SeqCst),
            0,
            "{kind}: holds overlapped"
        );
    }
}

#[tokio::test]
async fn reentrancy_is_explicit() {
    let server = server();
    let client = client(&server).await;

    // Through a held guard's owner.
    let lock = client.lock(&unique("reenter"));
    let outer = lock.lock().await.unwrap();
    assert!(
        lock.try_lock().await.unwrap().is_none(),
        "a new owner waits"
    );
    let inner = lock
        .with_owner(outer.owner())
        .try_lock()
        .await
        .unwrap()
        .expect("the holder's owner re-enters");
    assert_eq!(
        lock.with_owner(outer.owner()).hold_count().await.unwrap(),
        2
    );
    assert_eq!(
        lock.hold_count().await.unwrap(),
        0,
        "a handle without a scope has no owner"
    );
    inner.unlock().await.unwrap();
    assert!(lock.is_locked().await.unwrap(), "one hold remains");
    outer.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());

    // Inside an owner scope, joined acquisitions re-enter.
    let scoped = lock.with_owner(Owner::unique());
    let (a, b) = tokio::join!(scoped.lock(), scoped.lock());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(scoped.hold_count().await.unwrap(), 2);
    a.unlock().await.unwrap();
    b.unlock().await.unwrap();

    // The fair lock and the read-write lock follow the same rule.
    let fair = client.fair_lock(&unique("fair-reenter"));
    let held = fair.lock().await.unwrap();
    assert!(fair.try_lock().await.unwrap().is_none());
    let again = fair.with_owner(held.owner()).try_lock().await.unwrap();
    assert!(again.is_some(), "the fair holder re-enters");
    drop(again);
    held.unlock().await.unwrap();

    let rw = client.rw_lock(&unique("rw-reenter"));
    let write = rw.write().await.unwrap();
    assert!(
        rw.try_read().await.unwrap().is_none(),
        "a new reader waits for the writer"
    );
    let downgrade = rw
        .read_lock()
        .with_owner(write.owner())
        .try_lock()
        .await
        .unwrap()
        .expect("the writer may read (downgrade)");
    write.unlock().await.unwrap();
    downgrade.unlock().await.unwrap();
}

#[tokio::test]
async fn owner_numbers_are_never_shared() {
    let server = server();
    let client = client(&server).await;
    let lock = client.lock(&unique("owners"));
    let mut numbers = std::collections::HashSet::new();
    for _ in 0..20 {
        let guard = lock.lock().await.unwrap();
        assert!(
            numbers.insert(guard.owner().number()),
            "an owner number came back"
        );
        let id = guard.owner_id().to_string();
        let (uuid, number) = id.rsplit_once(':').unwrap();
        assert_eq!(uuid, client.id().to_string(), "Redisson's uuid:number form");
        assert_eq!(number.parse::<u64>().unwrap(), guard.owner().number());
        guard.unlock().await.unwrap();
    }
    for _ in 0..1000 {
        assert!(numbers.insert(Owner::unique().number()));
    }
}
