//! Curator's node lifecycle: lock directories are container nodes, which the server deletes
//! once their last child is gone, so per-entity lock names do not grow the tree. The testkit's
//! servers reap containers every second (`-Dznode.container.checkIntervalMs=1000`).
//!
//! The truth comes from the server: its own count of znodes (`mntr`'s `zk_znode_count`) and a
//! plain session's listing, before and after.
//!
//! May import: keylatch-testkit, keylatch-zookeeper, keylatch-core, zookeeper-client.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keylatch_core::DistributedLock;
use keylatch_testkit::ZooKeeperServer;
use keylatch_zookeeper::ZkClient;
use support::{children, raw, url};

/// Distinct lock names taken and released.
const NAMES: usize = 10_000;
/// Acquisitions in flight at once.
const CONCURRENCY: usize = 32;
/// A correctness bound for the server to reap every emptied container (it checks every
/// second), with slack for a loaded machine.
const REAPED: Duration = Duration::from_secs(90);

fn znode_count(server: &ZooKeeperServer) -> usize {
    let mntr = server.four_letter_word("mntr").expect("mntr");
    mntr.lines()
        .find_map(|l| l.strip_prefix("zk_znode_count"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no zk_znode_count in {mntr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_lock_names_leave_the_tree_as_it_was() {
    let server = support::server();
    let chroot = "/lifecycle";
    let client = ZkClient::connect(&format!("{}{chroot}", url(server)))
        .await
        .unwrap();
    let raw = raw(server).await;
    assert!(children(&raw, chroot).await.is_empty());
    let before = znode_count(server);

    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..CONCURRENCY {
        let (client, next) = (client.clone(), next.clone());
        workers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= NAMES {
                    return;
                }
                let lock = client.lock(&format!("order-{i}")).unwrap();
                let guard = lock.lock().await.unwrap();
                guard.unlock().await.unwrap();
            }
        });
    }
    while let Some(done) = workers.join_next().await {
        done.unwrap();
    }
    let after_use = znode_count(server);
    eprintln!(
        "containers: {NAMES} names taken and released: {before} znodes before, {after_use} just after"
    );

    let deadline = tokio::time::Instant::now() + REAPED;
    loop {
        let left = children(&raw, chroot).await;
        let count = znode_count(server);
        if left.is_empty() && count == before {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not reaped within {REAPED:?}: {count} znodes (before: {before}), {} children of {chroot}",
            left.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!(
        "containers: back to {before} znodes, {chroot} empty, {:?} after the last release",
        REAPED - (deadline - tokio::time::Instant::now())
    );

    // The recipes make the directories again: a lock, a semaphore and a read-write lock.
    let guard = client.lock("again").unwrap().lock().await.unwrap();
    let stat = raw
        .check_stat(&format!("{chroot}/keylatch/again"))
        .await
        .unwrap()
        .expect("the directory");
    assert!(stat.ephemeral_owner == 0);
    guard.unlock().await.unwrap();
    let semaphore = client.semaphore("again-permits", 2).unwrap();
    semaphore.acquire().await.unwrap().release().await.unwrap();
    let rw = client.read_write_lock("again-rw").unwrap();
    rw.write_lock()
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    rw.read_lock().lock().await.unwrap().unlock().await.unwrap();
    let deadline = tokio::time::Instant::now() + REAPED;
    while !children(&raw, chroot).await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            children(&raw, &format!("{chroot}/keylatch")).await
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(znode_count(server), before);
    client.shutdown().await.unwrap();
}
