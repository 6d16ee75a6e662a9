//! The non-reentrant lock and non-reentrant fair lock: a second acquisition by the holder is
//! `Error::AlreadyHeld` at once (never a wait) and leaves the first hold as it was; another
//! owner still waits for it. On one server and on a cluster.
use std::time::Duration;

use keylatch::{Client, Error, FairLock, Owner, ReentrantLock};
use keylatch_tests::{client, server, unique};

/// A correctness bound, not a speed claim: an error that is "at once" comes back well within it.
const BOUND: Duration = Duration::from_secs(10);

/// What both non-reentrant locks must do, for a lock made by `make` on each client.
async fn second_acquisition_is_refused<L, F, C, Q>(a: &Client, b: &Client, make: F, count: C)
where
    F: Fn(&Client) -> L,
    L: Acquire + Clone + Send + Sync + 'static,
    C: Fn(L, Owner) -> Q,
    Q: std::future::Future<Output = u64>,
{
    let owner = Owner::unique();
    let lock = make(a).with_owner_(owner);
    let first = lock
        .acquire_(Some(Duration::ZERO))
        .await
        .unwrap()
        .expect("free");
    assert_eq!(first.owner(), owner);

    // Again by the same owner: try once, wait bounded, wait unbounded: all refused at once.
    for wait in [Some(Duration::ZERO), Some(Duration::from_secs(30)), None] {
        let again = tokio::time::timeout(BOUND, lock.acquire_(wait))
            .await
            .expect("refused at once, not a wait");
        assert!(
            matches!(&again, Err(Error::AlreadyHeld { name }) if name == lock.name_()),
            "{wait:?}: {again:?}"
        );
        assert_eq!(
            count(lock.clone(), owner).await,
            1,
            "the first hold is intact"
        );
        assert!(!first.is_lost());
    }
    // Through the guard's owner, from another handle of the same client: refused too.
    let by_guard = make(a).with_owner_(first.owner());
    assert!(matches!(
        by_guard.acquire_(Some(Duration::from_millis(200))).await,
        Err(Error::AlreadyHeld { .. })
    ));

    // Another owner (another acquisition of a handle without an owner; another client) waits.
    assert!(
        make(a)
            .acquire_(Some(Duration::from_millis(300)))
            .await
            .unwrap()
            .is_none()
    );
    let other = make(b);
    let waiter = tokio::spawn(async move { other.acquire_(None).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "another owner waits");
    assert_eq!(count(lock.clone(), owner).await, 1);
    first.unlock().await.unwrap();
    let second = tokio::time::timeout(BOUND, waiter)
        .await
        .expect("the waiter gets the lock once it is released")
        .unwrap()
        .unwrap()
        .expect("a guard");
    second.unlock().await.unwrap();
    // After the release, the owner that was refused takes it normally.
    lock.acquire_(Some(Duration::ZERO))
        .await
        .unwrap()
        .expect("free again")
        .unlock()
        .await
        .unwrap();
}

/// The two locks' common calls.
trait Acquire {
    fn with_owner_(&self, owner: Owner) -> Self;
    fn acquire_(&self, wait: Option<Duration>) -> Acquiring;
    fn name_(&self) -> &str;
}

type Acquiring = std::pin::Pin<
    Box<dyn std::future::Future<Output = keylatch::Result<Option<keylatch::LockGuard>>> + Send>,
>;

fn options(wait: Option<Duration>) -> keylatch::AcquireOptions {
    match wait {
        Some(wait) => keylatch::AcquireOptions::new().with_wait(wait),
        None => keylatch::AcquireOptions::new(),
    }
}

impl Acquire for ReentrantLock {
    fn with_owner_(&self, owner: Owner) -> Self {
        self.with_owner(owner)
    }
    fn acquire_(&self, wait: Option<Duration>) -> Acquiring {
        let lock = self.clone();
        Box::pin(async move { lock.acquire(options(wait)).await })
    }
    fn name_(&self) -> &str {
        self.name()
    }
}

impl Acquire for FairLock {
    fn with_owner_(&self, owner: Owner) -> Self {
        self.with_owner(owner)
    }
    fn acquire_(&self, wait: Option<Duration>) -> Acquiring {
        let lock = self.clone();
        Box::pin(async move { lock.acquire(options(wait)).await })
    }
    fn name_(&self) -> &str {
        self.name()
    }
}

async fn lock_scenario(a: &Client, b: &Client) {
    let name = unique("nonreentrant");
    second_acquisition_is_refused(
        a,
        b,
        |c| c.non_reentrant_lock(&name),
        |l, _| async move { l.hold_count().await.unwrap() },
    )
    .await;
    assert!(!a.lock(&name).is_locked().await.unwrap());
}

async fn fair_scenario(a: &Client, b: &Client) {
    let name = unique("nonreentrant-fair");
    second_acquisition_is_refused(
        a,
        b,
        |c| c.non_reentrant_fair_lock(&name),
        |l, _| async move { l.hold_count().await.unwrap() },
    )
    .await;
    let lock = a.non_reentrant_fair_lock(&name);
    assert!(
        lock.queue().await.unwrap().is_empty(),
        "no queue entry left"
    );
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn the_reentrant_handles_still_re_enter() {
    let server = server();
    let client = client(&server).await;
    let name = unique("still-reentrant");
    let owner = Owner::unique();
    assert!(client.lock(&name).is_reentrant());
    assert!(!client.non_reentrant_lock(&name).is_reentrant());
    assert!(!client.non_reentrant_fair_lock(&name).is_reentrant());
    let lock = client.lock(&name).with_owner(owner);
    let outer = lock.lock().await.unwrap();
    let inner = lock.try_lock().await.unwrap().expect("re-enters");
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    // A non-reentrant handle on the same name refuses the same owner.
    assert!(matches!(
        client
            .non_reentrant_lock(&name)
            .with_owner(owner)
            .try_lock()
            .await,
        Err(Error::AlreadyHeld { .. })
    ));
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn non_reentrant_locks_on_one_server() {
    let server = server();
    let a = client(&server).await;
    let b = client(&server).await;
    lock_scenario(&a, &b).await;
    fair_scenario(&a, &b).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_reentrant_locks_on_a_cluster() {
    let (_cluster, a, b) = keylatch_tests::cluster_pair().await;
    lock_scenario(&a, &b).await;
    fair_scenario(&a, &b).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}
