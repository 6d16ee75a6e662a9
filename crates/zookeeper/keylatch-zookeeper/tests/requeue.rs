//! A waiter whose own node vanishes creates it again and keeps its place in the contention
//! (Curator's `LockInternals.attemptLock` retry of a `NoNode`), a bounded number of times; a
//! held node that vanishes is not re-created. On a real ZooKeeper server, the nodes deleted
//! through a raw session. A waiter watches its predecessor only (as in Curator), so it sees its
//! own node gone when the predecessor changes: the tests write the holder's node's data to wake
//! it (a data watch fires on that), or release the holder.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use keylatch_core::{DistributedLock, Error};
use keylatch_zookeeper::NodeGone;
use support::{children, client, raw, server, wait_children};
use zookeeper_client as zk;

/// The children of `path` in sequence order (what follows the last `lock-`).
async fn in_order(raw: &zk::Client, path: &str) -> Vec<String> {
    let mut nodes = children(raw, path).await;
    nodes.sort_by_key(|n| n.rsplit("lock-").next().unwrap_or_default().to_owned());
    nodes
}

/// Wakes the waiters watching `node` (their data watch fires) without releasing it.
async fn poke(raw: &zk::Client, node: &str) {
    raw.set_data(node, b"poke", None).await.unwrap();
}

/// Waits (a correctness bound) until `path` has two children and the second is not `old`:
/// the waiter's node, created again after `old` was deleted.
async fn wait_new_waiter(raw: &zk::Client, path: &str, old: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let nodes = in_order(raw, path).await;
        if nodes.len() == 2 && nodes[1] != old {
            return nodes[1].clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path}: no new waiter node after {old}: {nodes:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_node_is_deleted_queues_again_and_gets_the_lock() {
    let (a, b) = (client().await, client().await);
    let raw = raw(server()).await;
    let path = "/keylatch/requeue";
    let holder = a.lock("requeue").unwrap().lock().await.unwrap();
    let acquired = Arc::new(AtomicBool::new(false));
    let waiter = tokio::spawn({
        let lock = b.lock("requeue").unwrap();
        let acquired = acquired.clone();
        async move {
            let guard = lock.lock().await;
            acquired.store(true, Ordering::SeqCst);
            guard
        }
    });
    wait_children(&raw, path, 2).await;
    let [first, old] = <[String; 2]>::try_from(in_order(&raw, path).await).unwrap();
    raw.delete(&format!("{path}/{old}"), None).await.unwrap();
    poke(&raw, &format!("{path}/{first}")).await;

    // The waiter's node appears again (a new one), behind the holder; it still waits.
    let new = wait_new_waiter(&raw, path, &old).await;
    assert_ne!(new, old);
    assert!(!acquired.load(Ordering::SeqCst), "acquired while held");
    assert!(!holder.is_lost());

    // The holder releases: the waiter gets the lock on its new node.
    holder.unlock().await.unwrap();
    let guard = waiter.await.unwrap().expect("the waiter re-queued");
    assert_eq!(in_order(&raw, path).await, vec![new]);
    guard.unlock().await.unwrap();
    a.wait_idle().await;
    b.wait_idle().await;
    assert!(children(&raw, path).await.is_empty(), "nothing left behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_sees_its_node_gone_when_the_holder_releases_and_takes_the_lock() {
    let (a, b) = (client().await, client().await);
    let raw = raw(server()).await;
    let path = "/keylatch/requeue-release";
    let holder = a.lock("requeue-release").unwrap().lock().await.unwrap();
    let waiter = tokio::spawn({
        let lock = b.lock("requeue-release").unwrap();
        async move { lock.lock().await }
    });
    wait_children(&raw, path, 2).await;
    let old = in_order(&raw, path).await[1].clone();
    raw.delete(&format!("{path}/{old}"), None).await.unwrap();
    holder.unlock().await.unwrap();
    let guard = waiter.await.unwrap().expect("the waiter re-queued");
    let now = in_order(&raw, path).await;
    assert_eq!(now.len(), 1);
    assert_ne!(now[0], old, "a new node");
    guard.unlock().await.unwrap();
    assert!(children(&raw, path).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_keeps_vanishing_fails_the_acquisition_after_the_bound() {
    let (a, b) = (client().await, client().await);
    let raw = raw(server()).await;
    let path = "/keylatch/requeue-bound";
    let holder = a.lock("requeue-bound").unwrap().lock().await.unwrap();
    let waiter = tokio::spawn({
        let lock = b.lock("requeue-bound").unwrap();
        async move { lock.lock().await.map(drop) }
    });
    wait_children(&raw, path, 2).await;
    let first = format!("{path}/{}", in_order(&raw, path).await[0]);
    let mut old = String::new();
    let mut deleted = 0;
    while !waiter.is_finished() {
        let nodes = in_order(&raw, path).await;
        if nodes.len() == 2 && nodes[1] != old {
            old = nodes[1].clone();
            match raw.delete(&format!("{path}/{old}"), None).await {
                Ok(()) => {
                    deleted += 1;
                    poke(&raw, &first).await;
                }
                Err(zk::Error::NoNode) => {}
                Err(err) => panic!("delete {old}: {err}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let err = waiter.await.unwrap().unwrap_err();
    let Error::Store(source) = &err else {
        panic!("{err:?}");
    };
    assert!(source.downcast_ref::<NodeGone>().is_some(), "{err:?}");
    // The first node and three re-created ones.
    assert_eq!(deleted, 4);
    assert_eq!(children(&raw, path).await.len(), 1, "only the holder's");
    holder.unlock().await.unwrap();
    assert!(children(&raw, path).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_node_that_vanishes_is_not_created_again() {
    let (a, b) = (client().await, client().await);
    let raw = raw(server()).await;
    let path = "/keylatch/requeue-held";
    let holder = a.lock("requeue-held").unwrap().lock().await.unwrap();
    let node = in_order(&raw, path).await[0].clone();
    raw.delete(&format!("{path}/{node}"), None).await.unwrap();
    // Someone else can take the lock: the holder's node was not put back.
    let other = b.lock("requeue-held").unwrap().lock().await.unwrap();
    assert_eq!(children(&raw, path).await.len(), 1);
    assert!(matches!(holder.unlock().await, Err(Error::NotHeld { .. })));
    other.unlock().await.unwrap();
    assert!(children(&raw, path).await.is_empty());
}
