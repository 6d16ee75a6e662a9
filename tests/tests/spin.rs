//! The spin lock: exclusion by polling with back-off, without pub/sub: no subscription on any
//! client, no message on the lock's channel. On one server and on a cluster.
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use keylatch::{Client, DistributedLock, Error, Owner, SpinBackoff};
use keylatch_tests::{client, pubsub, server, unique};

/// Subscriptions of a client's hub: channels in use, and waiters holding one.
fn subscriptions(client: &Client) -> usize {
    let stats = client.stats();
    stats.channels + stats.subscribers
}

/// Four tasks on two clients take the lock in turn; an in-process counter of the tasks inside
/// the section records the most ever inside at once, and every hub's subscriptions are read
/// inside the section.
async fn exclusion(a: &Client, b: &Client, backoff: SpinBackoff) {
    let name = unique("spin");
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let subscribed = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..4 {
        let client = if i % 2 == 0 { a.clone() } else { b.clone() };
        let (a, b) = (a.clone(), b.clone());
        let lock = client.spin_lock(&name).with_backoff(backoff);
        let (inside, most, subscribed) = (inside.clone(), most.clone(), subscribed.clone());
        tasks.push(tokio::spawn(async move {
            let mut unlocked = Vec::new();
            for _ in 0..10 {
                let guard = lock.lock().await.expect("lock");
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                subscribed.fetch_max(subscriptions(&a) + subscriptions(&b), Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                unlocked.push(guard.unlock().await);
            }
            unlocked
        }));
    }
    let mut unlocked = Vec::new();
    for task in tasks {
        unlocked.extend(task.await.unwrap());
    }
    assert_eq!(most.load(Ordering::SeqCst), 1, "two holders at once");
    assert!(unlocked.iter().all(Result::is_ok), "{unlocked:?}");
    assert_eq!(
        subscribed.load(Ordering::SeqCst),
        0,
        "a spin lock subscribed"
    );
    assert_eq!(subscriptions(a) + subscriptions(b), 0);
    assert!(!a.spin_lock(&name).is_locked().await.unwrap());
}

async fn semantics(a: &Client, b: &Client) {
    let name = unique("spin-sem");
    let owner = Owner::unique();
    let lock = a.spin_lock(&name).with_owner(owner);
    let outer = lock.lock().await.unwrap();
    // Reentrant, as the reentrant lock.
    let inner = lock.try_lock().await.unwrap().expect("re-enters");
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    // Another owner, another client: refused, and a bounded wait times out.
    let other = b.spin_lock(&name);
    assert!(other.try_lock().await.unwrap().is_none());
    assert!(
        other
            .try_lock_for(Duration::from_millis(200), None)
            .await
            .unwrap()
            .is_none()
    );
    // A waiter polls until the lock is free.
    let waiter = tokio::spawn({
        let other = other.with_backoff(SpinBackoff::constant(Duration::from_millis(10)));
        async move { other.lock().await }
    });
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter gets the lock once it is free")
        .unwrap()
        .unwrap();
    assert!(lock.is_held_by(guard.owner_id()).await.unwrap());
    guard.unlock().await.unwrap();
    assert_eq!(subscriptions(a) + subscriptions(b), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_lock_on_one_server() {
    let server = server();
    let a = client(&server).await;
    let b = client(&server).await;
    // Someone listening on the reentrant lock's channel hears nothing from a spin lock.
    let name = unique("spin-quiet");
    let mut listener = pubsub(&server).await;
    let channel = a.lock(&name).channel().to_owned();
    listener.subscribe(&channel).await.unwrap();
    let lock = a.spin_lock(&name);
    lock.lock().await.unwrap().unlock().await.unwrap();
    lock.with_owner(Owner::unique())
        .lock()
        .await
        .unwrap()
        .forget();
    assert!(lock.force_unlock().await.unwrap());
    let mut messages = listener.on_message();
    let heard = tokio::time::timeout(Duration::from_millis(300), messages.next()).await;
    assert!(heard.is_err(), "a spin lock published {heard:?}");
    drop(messages);

    exclusion(&a, &b, SpinBackoff::default()).await;
    exclusion(&a, &b, SpinBackoff::constant(Duration::from_millis(3))).await;
    semantics(&a, &b).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_lock_on_a_cluster() {
    let (_cluster, a, b) = keylatch_tests::cluster_pair().await;
    exclusion(&a, &b, SpinBackoff::default()).await;
    semantics(&a, &b).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_bad_backoff_is_a_typed_error_and_the_trait_works() {
    let server = server();
    let client = client(&server).await;
    let name = unique("spin-bad");
    let bad = client
        .spin_lock(&name)
        .with_backoff(SpinBackoff::constant(Duration::ZERO));
    assert!(matches!(
        bad.try_lock().await,
        Err(Error::InvalidConfig {
            field: "spin_backoff",
            ..
        })
    ));
    assert!(!bad.is_locked().await.unwrap(), "nothing was sent");
    let lock: Arc<dyn DistributedLock> = Arc::new(client.spin_lock(&name));
    let guard = lock.lock().await.unwrap();
    assert!(lock.is_locked().await.unwrap());
    guard.unlock().await.unwrap();
    assert_eq!(subscriptions(&client), 0);
    client.shutdown().await.unwrap();
}
