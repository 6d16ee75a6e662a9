//! Fault suite, network scenarios: a client talks to redis-server through a `FaultProxy`
//! that delays, blackholes or drops replies, or the server restarts without persistence.
use std::time::Duration;

use keylatch::Error;
use keylatch::redis::AsyncCommands;
use keylatch_testkit::{Fault, FaultProxy};
use keylatch_tests::{client_via, full, raw, server, unique};
use tokio::time::Instant;

/// 4. A proxy delay below lease/3 for a long hold: the hold is never lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s04_delay_below_a_third_of_the_lease_never_loses_the_hold() {
    let server = server();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let lease = Duration::from_millis(1500);
    let client = client_via(proxy.url(), lease, Duration::from_secs(2)).await;
    let name = unique("s04");
    let guard = client.lock(&name).lock().await.unwrap();
    // Each direction is delayed, so a round trip takes twice this: 240 ms < lease/3 = 500 ms.
    proxy.set(Fault::Delay(Duration::from_millis(120)));
    let hold = if full() {
        Duration::from_secs(20)
    } else {
        Duration::from_secs(4)
    };
    let mut conn = raw(&server).await;
    let started = Instant::now();
    let mut checks = 0;
    while started.elapsed() < hold {
        assert!(
            !guard.is_lost(),
            "lost after {:?} under a {lease:?} lease",
            started.elapsed()
        );
        let pttl: i64 = conn.pttl(&name).await.unwrap();
        assert!(pttl > 0, "the key expired on the server");
        checks += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let renewed = client.stats().watchdog.renewed_keys;
    println!(
        "s04: held {hold:?} through a 120 ms each-way delay: {checks} checks, {renewed} renewals, never lost"
    );
    assert!(renewed as f64 >= hold.as_secs_f64() / (lease.as_secs_f64() / 3.0) - 2.0);
    proxy.set(Fault::Pass);
    guard.unlock().await.unwrap();
}

/// 5. The holder is blackholed for 2 x lease: its lost signal fires no later than the key
/// expires on the server; after healing, its unlock returns NotHeld and the new holder is
/// untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s05_blackholed_holder_is_told_before_the_server_expires_it() {
    let server = server();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let lease = Duration::from_millis(1000);
    let client = client_via(proxy.url(), lease, Duration::from_millis(300)).await;
    let name = unique("s05");
    let guard = client.lock(&name).lock().await.unwrap();
    proxy.set(Fault::Blackhole);
    let blackholed = Instant::now();
    let lost = tokio::spawn({
        let lost = guard.lost();
        async move {
            lost.await;
            Instant::now()
        }
    });
    // Watch the key directly (not through the proxy) until it expires, and the guard's local
    // validity deadline meanwhile (it only moves forward when a renewal succeeds).
    let mut conn = raw(&server).await;
    let mut deadline = guard.valid_until().expect("valid when blackholed");
    let expired = loop {
        if let Some(until) = guard.valid_until() {
            deadline = deadline.max(until);
        }
        let exists: bool = conn.exists(&name).await.unwrap();
        if !exists {
            break Instant::now();
        }
        assert!(blackholed.elapsed() < lease * 3, "the key never expired");
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let lost = lost.await.unwrap();
    println!(
        "s05: validity deadline {:?}, lost signalled {:?}, server expiry seen {:?} after the blackhole",
        deadline - blackholed,
        lost - blackholed,
        expired - blackholed
    );
    // The guard's deadline ends no later than the server's expiry; the signal fires at that
    // deadline (give it scheduling slack on a loaded machine).
    assert!(
        deadline <= expired,
        "the local validity outlived the server's expiry"
    );
    assert!(
        lost <= deadline + Duration::from_millis(100),
        "lost fired late"
    );
    // Someone else takes the lock while the old holder is still cut off.
    let other = keylatch_tests::client(&server).await;
    let new_guard = other
        .lock(&name)
        .with_owner(keylatch::Owner::unique())
        .lock()
        .await
        .unwrap();
    let new_owner = new_guard.owner_id().to_string();
    tokio::time::sleep((lease * 2).saturating_sub(blackholed.elapsed())).await;
    proxy.set(Fault::Pass);
    let err = guard.unlock().await.unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "{err:?}");
    let count: Option<u64> = conn.hget(&name, &new_owner).await.unwrap();
    assert_eq!(count, Some(1), "the new holder was touched");
    new_guard.unlock().await.unwrap();
}

/// 6. Replies dropped after the request ran: the hold count is not doubled, and after the
/// final unlock the lock is free within the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s06_dropped_replies_do_not_double_holds() {
    let server = server();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let lease = Duration::from_millis(2000);
    let client = client_via(proxy.url(), lease, Duration::from_millis(200)).await;
    let name = unique("s06");
    let lock = client.lock(&name).with_owner(keylatch::Owner::unique());
    let mut conn = raw(&server).await;

    // The acquire runs on the server but its reply (and the undo's) never comes back.
    proxy.set(Fault::DropReplies);
    let acquiring = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await }
    });
    let applied = keylatch_tests::eventually(Duration::from_secs(3), || {
        let mut conn = conn.clone();
        let name = name.clone();
        async move { conn.exists::<_, bool>(&name).await.unwrap() }
    })
    .await;
    assert!(applied, "the acquire never reached the server");
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set(Fault::Pass);
    let guard = acquiring
        .await
        .unwrap()
        .expect("the acquire succeeds once replies flow again");
    client.wait_idle().await;
    let field = guard.owner_id().to_string();
    let count: Option<u64> = conn.hget(&name, &field).await.unwrap();
    println!("s06: after dropped replies, hold count {count:?} for one guard");
    assert_eq!(count, Some(1), "the hold count was doubled (or lost)");

    // The release's reply is dropped too.
    proxy.set(Fault::DropReplies);
    let released = Instant::now();
    let unlocking = tokio::spawn(guard.unlock());
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set(Fault::Pass);
    let _ = unlocking.await.unwrap();
    client.wait_idle().await;
    let free = keylatch_tests::eventually(lease + Duration::from_secs(1), || {
        let mut conn = conn.clone();
        let name = name.clone();
        async move { !conn.exists::<_, bool>(&name).await.unwrap() }
    })
    .await;
    println!(
        "s06: free {:?} after the unlock with a dropped reply",
        released.elapsed()
    );
    assert!(free, "the lock was not free within the lease");
    assert_eq!(client.stats().watchdog.holds, 0);
}

/// 7. redis-server restarted without persistence while held: the loss is detected within one
/// renewal interval, and new acquires work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s07_restart_without_persistence_is_detected() {
    let mut server = server();
    let watchdog = Duration::from_millis(900);
    let interval = watchdog / 3;
    let client = client_via(server.url(), watchdog, Duration::from_millis(500)).await;
    let name = unique("s07");
    let guard = client.lock(&name).lock().await.unwrap();
    let lost = guard.lost();
    server.restart().unwrap();
    let restarted = Instant::now();
    tokio::time::timeout(interval + Duration::from_millis(300), lost)
        .await
        .expect("the loss was not detected within one renewal interval");
    println!(
        "s07: loss detected {:?} after the restart (interval {interval:?})",
        restarted.elapsed()
    );
    assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));
    let again = client
        .lock(&name)
        .try_lock_for(Duration::from_secs(5), None)
        .await
        .unwrap();
    assert!(again.is_some(), "a new acquire after the restart failed");
}
