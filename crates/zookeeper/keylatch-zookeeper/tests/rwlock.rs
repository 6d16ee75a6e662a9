//! The read-write lock (Curator's `InterProcessReadWriteLock` layout) on a real server.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keylatch_core::{DistributedLock, Error};
use support::{children, client, raw, server, wait_children};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_a_writer_excludes() {
    let (a, b) = (client().await, client().await);
    let (ra, rb) = (
        a.read_write_lock("rw-share").unwrap(),
        b.read_write_lock("rw-share").unwrap(),
    );
    let r1 = ra.read_lock().lock().await.unwrap();
    let r2 = rb
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("readers share");
    let r3 = ra
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("readers share");
    assert!(rb.write_lock().try_lock().await.unwrap().is_none());
    for r in [r1, r2, r3] {
        r.unlock().await.unwrap();
    }
    let w = rb.write_lock().try_lock().await.unwrap().expect("free");
    assert!(ra.read_lock().try_lock().await.unwrap().is_none());
    assert!(ra.write_lock().try_lock().await.unwrap().is_none());
    w.unlock().await.unwrap();
    let raw = raw(server()).await;
    assert!(children(&raw, "/keylatch/rw-share").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_writer_is_not_starved_by_later_readers() {
    let (a, b) = (client().await, client().await);
    let raw = raw(server()).await;
    let path = "/keylatch/rw-starve";
    let first = a
        .read_write_lock("rw-starve")
        .unwrap()
        .read_lock()
        .lock()
        .await
        .unwrap();
    let writer_side = b.read_write_lock("rw-starve").unwrap().write_lock();
    let writer = tokio::spawn(async move { writer_side.lock().await.unwrap() });
    wait_children(&raw, path, 2).await;
    // A reader that comes after the waiting writer waits for it.
    let late = a.read_write_lock("rw-starve").unwrap().read_lock();
    assert!(
        late.try_lock_for(Duration::from_millis(300), None)
            .await
            .unwrap()
            .is_none()
    );
    let late_task = tokio::spawn(async move { late.lock().await.unwrap() });
    wait_children(&raw, path, 3).await;
    first.unlock().await.unwrap();
    let w = tokio::time::timeout(Duration::from_secs(20), writer)
        .await
        .unwrap()
        .unwrap();
    assert!(!late_task.is_finished());
    w.unlock().await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(20), late_task)
        .await
        .unwrap()
        .unwrap();
    r.unlock().await.unwrap();
    assert!(children(&raw, path).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_readers_and_writers_never_overlap_a_writer() {
    let clients = [client().await, client().await];
    let readers = Arc::new(AtomicUsize::new(0));
    let writers = Arc::new(AtomicUsize::new(0));
    let violations = Arc::new(AtomicUsize::new(0));
    let max_readers = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..8 {
        let rw = clients[t % 2].read_write_lock("rw-mixed").unwrap();
        let (readers, writers, violations, max_readers) = (
            readers.clone(),
            writers.clone(),
            violations.clone(),
            max_readers.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for i in 0..4 {
                if (t + i) % 3 == 0 {
                    let g = rw.write_lock().lock().await.unwrap();
                    if writers.fetch_add(1, Ordering::SeqCst) != 0
                        || readers.load(Ordering::SeqCst) != 0
                    {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    writers.fetch_sub(1, Ordering::SeqCst);
                    g.unlock().await.unwrap();
                } else {
                    let g = rw.read_lock().lock().await.unwrap();
                    let now = readers.fetch_add(1, Ordering::SeqCst) + 1;
                    max_readers.fetch_max(now, Ordering::SeqCst);
                    if writers.load(Ordering::SeqCst) != 0 {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    readers.fetch_sub(1, Ordering::SeqCst);
                    g.unlock().await.unwrap();
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(violations.load(Ordering::SeqCst), 0, "a writer overlapped");
    let raw = raw(server()).await;
    assert!(children(&raw, "/keylatch/rw-mixed").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_may_read_a_reader_may_not_write() {
    let a = client().await;
    let raw = raw(server()).await;
    let path = "/keylatch/rw-grade";
    let rw = a.read_write_lock("rw-grade").unwrap();
    let w = rw.write_lock().lock().await.unwrap();
    let mine = rw.with_owner(w.owner());
    let r = tokio::time::timeout(Duration::from_secs(10), mine.read_lock().lock())
        .await
        .expect("a writer reads at once")
        .unwrap();
    assert_eq!(children(&raw, path).await.len(), 2);
    // Downgrade: the write hold ends, the read hold stays and excludes writers.
    w.unlock().await.unwrap();
    assert!(rw.write_lock().try_lock().await.unwrap().is_none());
    assert!(rw.read_lock().try_lock().await.unwrap().is_some_and(|g| {
        drop(g);
        true
    }));
    assert!(matches!(
        mine.write_lock().try_lock().await,
        Err(Error::UpgradeRefused { .. })
    ));
    r.unlock().await.unwrap();
    a.wait_idle().await;
    assert!(children(&raw, path).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_owner_reading_twice_at_once_keeps_one_node() {
    let a = client().await;
    let raw = raw(server()).await;
    let path = "/keylatch/rw-twice";
    let rw = a.read_write_lock("rw-twice").unwrap();
    let owner = keylatch_core::Owner::unique();
    let mine = rw.with_owner(owner);
    let (one, two) = (mine.read_lock(), mine.read_lock());
    let (x, y) = tokio::join!(one.lock(), two.lock());
    let (x, y) = (x.unwrap(), y.unwrap());
    a.wait_idle().await;
    assert_eq!(children(&raw, path).await.len(), 1);
    x.unlock().await.unwrap();
    assert_eq!(children(&raw, path).await.len(), 1);
    y.unlock().await.unwrap();
    assert!(children(&raw, path).await.is_empty());
}
