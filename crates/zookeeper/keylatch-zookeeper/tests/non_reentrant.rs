//! The non-reentrant mode of the mutex on a real ZooKeeper server: the holder's second
//! acquisition is refused at once, without a node; other owners are excluded as usual.

mod support;

use keylatch_core::{DistributedLock, Error, Owner};
use support::{children, client, raw, server, wait_children};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holder_asking_again_is_already_held_and_others_wait() {
    let client = client().await;
    let raw = raw(server()).await;
    let path = "/keylatch/non-reentrant";
    let lock = client.lock("non-reentrant").unwrap().non_reentrant();
    assert!(!lock.is_reentrant());
    let owner = Owner::unique();
    let mine = lock.with_owner(owner);
    let guard = mine.lock().await.unwrap();
    assert_eq!(children(&raw, path).await.len(), 1);

    // The same owner again: refused at once, no node, the first hold intact.
    for _ in 0..2 {
        let again = mine.try_lock().await;
        assert!(
            matches!(&again, Err(Error::AlreadyHeld { name }) if name == "non-reentrant"),
            "{again:?}"
        );
        let again = mine.lock().await;
        assert!(matches!(again, Err(Error::AlreadyHeld { .. })), "{again:?}");
    }
    assert_eq!(children(&raw, path).await.len(), 1);
    assert!(!guard.is_lost());

    // Another owner (a fresh one per acquisition, or an explicit one) is excluded.
    assert!(lock.try_lock().await.unwrap().is_none());
    assert!(
        lock.with_owner(Owner::unique())
            .try_lock()
            .await
            .unwrap()
            .is_none()
    );
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await.unwrap() }
    });
    wait_children(&raw, path, 2).await;

    // A single release frees it (no count kept), and the waiter gets it.
    guard.unlock().await.unwrap();
    let next = waiter.await.unwrap();
    assert_eq!(children(&raw, path).await.len(), 1);
    next.unlock().await.unwrap();

    // Once released, the owner acquires again normally.
    let guard = mine.lock().await.unwrap();
    guard.unlock().await.unwrap();
    client.wait_idle().await;
    assert!(children(&raw, path).await.is_empty());
    client.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentrant_handle_still_reenters() {
    let client = client().await;
    let lock = client.lock("still-reentrant").unwrap();
    assert!(lock.is_reentrant());
    let mine = lock.with_owner(Owner::unique());
    let first = mine.lock().await.unwrap();
    let second = mine.try_lock().await.unwrap().expect("re-entered");
    second.unlock().await.unwrap();
    first.unlock().await.unwrap();
    client.shutdown().await.unwrap();
}
