//! A request sent during a partition whose reply never came (the client gave up after its
//! response timeout and undid what it may have done) and that reaches the server only after
//! the undo, as TCP retransmits it after the heal: it must change nothing. The proxy holds the
//! requests of the connections open when it stalls (`Fault::Stall`) and delivers them when it
//! passes again; the client meanwhile opened a new connection for its undo, which is not held.
//! Each test then reads the state the late request would have left: a queue entry, a hold, a
//! permit taken.
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch_testkit::{Fault, FaultProxy};
use keylatch_tests::{client, client_via, raw, server, unique};

const RESPONSE_TIMEOUT: Duration = Duration::from_millis(300);

/// Lets the held requests go, and waits until every one is through: written to the server and
/// run (the server closed the connection after them), or dropped because the server had closed
/// the connection first.
async fn deliver_late(proxy: &FaultProxy) {
    proxy.set(Fault::Pass);
    for _ in 0..1000 {
        if proxy.stalled_connections() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the held requests were neither delivered nor dropped");
}

/// A waiter's enqueue, held past the response timeout: its wait ends on the lost reply and
/// leaves the queue; the enqueue arrives after that. No queue entry (nor deadline, nor offer)
/// may be left: one would keep the lock idle on its release until the entry's deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_enqueue_after_the_wait_gave_up_leaves_no_queue_entry() {
    let server = server();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let waiter = client_via(proxy.url(), Duration::from_secs(30), RESPONSE_TIMEOUT).await;
    let holder_client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("late-enqueue");
    let holder = holder_client
        .fair_lock(&name)
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();

    proxy.set(Fault::Stall);
    // A bound no longer than the response timeout: the wait ends on the lost reply.
    let err = waiter
        .fair_lock(&name)
        .with_direct_grant(true)
        .try_lock_for(RESPONSE_TIMEOUT, None)
        .await
        .unwrap_err();
    assert!(err.is_ambiguous(), "{err:?}");
    waiter.wait_idle().await;
    deliver_late(&proxy).await;

    let queue: Vec<String> = conn
        .lrange(format!("redisson_lock_queue:{{{name}}}"), 0, -1)
        .await
        .unwrap();
    let deadlines: Vec<String> = conn
        .zrange(format!("{{{name}}}:keylatch_waiters"), 0, -1)
        .await
        .unwrap();
    let offers: Vec<String> = conn
        .hkeys(format!("{{{name}}}:keylatch_grants"))
        .await
        .unwrap();
    assert!(
        queue.is_empty() && deadlines.is_empty() && offers.is_empty(),
        "the late enqueue was applied after the waiter left: queue {queue:?}, deadlines \
         {deadlines:?}, offers {offers:?}"
    );
    // And the release leaves the lock free, handed to nobody.
    holder.unlock().await.unwrap();
    let exists: bool = conn.exists(&name).await.unwrap();
    assert!(!exists, "the lock was handed to a waiter that gave up");
}

/// The acquire of a free fair lock, held past the response timeout: the client undoes the hold
/// it may have granted and reports the lost reply; the acquire arrives after that. No hold may
/// be left (nobody would release it before its lease ends).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_fair_acquire_after_its_undo_leaves_no_hold() {
    let server = server();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let client = client_via(proxy.url(), Duration::from_secs(30), RESPONSE_TIMEOUT).await;
    let mut conn = raw(&server).await;
    let name = unique("late-fair-hold");

    proxy.set(Fault::Stall);
    let err = client.fair_lock(&name).try_lock().await.unwrap_err();
    assert!(err.is_ambiguous(), "{err:?}");
    client.wait_idle().await;
    deliver_late(&proxy).await;

    let holders: Vec<String> = conn.hkeys(&name).await.unwrap();
    assert!(
        holders.is_empty(),
        "the late acquire left a hold nobody owns: {holders:?}"
    );
}

/// The same for the reentrant lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_reentrant_acquire_after_its_undo_leaves_no_hold() {
    let server = server();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let client = client_via(proxy.url(), Duration::from_secs(30), RESPONSE_TIMEOUT).await;
    let mut conn = raw(&server).await;
    let name = unique("late-hold");

    proxy.set(Fault::Stall);
    let err = client.lock(&name).try_lock().await.unwrap_err();
    assert!(err.is_ambiguous(), "{err:?}");
    client.wait_idle().await;
    deliver_late(&proxy).await;

    let holders: Vec<String> = conn.hkeys(&name).await.unwrap();
    assert!(
        holders.is_empty(),
        "the late acquire left a hold nobody owns: {holders:?}"
    );
}

/// The same for a read-write lock's write hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_acquire_after_its_undo_leaves_no_hold() {
    let server = server();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let client = client_via(proxy.url(), Duration::from_secs(30), RESPONSE_TIMEOUT).await;
    let mut conn = raw(&server).await;
    let name = unique("late-write");

    proxy.set(Fault::Stall);
    let err = client.rw_lock(&name).try_write().await.unwrap_err();
    assert!(err.is_ambiguous(), "{err:?}");
    client.wait_idle().await;
    deliver_late(&proxy).await;

    let exists: bool = conn.exists(&name).await.unwrap();
    assert!(!exists, "the late acquire left a write hold nobody owns");
}

/// The same for a read-write lock's read hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_read_acquire_after_its_undo_leaves_no_hold() {
    let server = server();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let client = client_via(proxy.url(), Duration::from_secs(30), RESPONSE_TIMEOUT).await;
    let mut conn = raw(&server).await;
    let name = unique("late-read");

    proxy.set(Fault::Stall);
    let err = client.rw_lock(&name).try_read().await.unwrap_err();
    assert!(err.is_ambiguous(), "{err:?}");
    client.wait_idle().await;
    deliver_late(&proxy).await;

    let exists: bool = conn.exists(&name).await.unwrap();
    assert!(!exists, "the late acquire left a read hold nobody owns");
}

/// The same for a semaphore's permits (its undo leaves a tombstone the late acquire respects): none may stay taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_permit_acquire_after_its_undo_takes_no_permit() {
    let server = server();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let client = client_via(proxy.url(), Duration::from_secs(30), RESPONSE_TIMEOUT).await;
    let checker = keylatch_tests::client(&server).await;
    let name = unique("late-permit");
    let semaphore = client.semaphore(&name);
    semaphore.try_set_permits(3).await.unwrap();

    proxy.set(Fault::Stall);
    let err = semaphore.try_acquire().await.unwrap_err();
    assert!(err.is_ambiguous(), "{err:?}");
    client.wait_idle().await;
    deliver_late(&proxy).await;

    assert_eq!(
        checker.semaphore(&name).available_permits().await.unwrap(),
        3,
        "the late acquire took a permit for good"
    );
}

/// The same for an expirable semaphore's permits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_expirable_permit_acquire_after_its_undo_takes_no_permit() {
    let server = server();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let client = client_via(proxy.url(), Duration::from_secs(30), RESPONSE_TIMEOUT).await;
    let checker = keylatch_tests::client(&server).await;
    let name = unique("late-exp-permit");
    let semaphore = client.permit_expirable_semaphore(&name);
    semaphore.try_set_permits(3).await.unwrap();

    proxy.set(Fault::Stall);
    let err = semaphore.try_acquire().await.unwrap_err();
    assert!(err.is_ambiguous(), "{err:?}");
    client.wait_idle().await;
    deliver_late(&proxy).await;

    assert_eq!(
        checker
            .permit_expirable_semaphore(&name)
            .available_permits()
            .await
            .unwrap(),
        3,
        "the late acquire took a permit"
    );
}
