//! Waiters are woken by pub/sub, not by the lease running out, and survive the hub's
//! connection being killed.
use std::time::Duration;

use keylatch::redis;
use keylatch_tests::{client_with, eventually, raw, server, unique};

const LEASE: Duration = Duration::from_secs(10);
// A fallback poll longer than the lease: only a message can wake the waiter early.
const POLL: Duration = Duration::from_secs(60);

#[tokio::test]
async fn unlock_wakes_the_waiter_long_before_the_lease() {
    let server = server();
    let holder = client_with(&server, Duration::from_secs(30), POLL).await;
    let waiter = client_with(&server, Duration::from_secs(30), POLL).await;
    let name = unique("wake");
    let guard = holder.lock(&name).lock_with_lease(LEASE).await.unwrap();
    let lock = waiter.lock(&name);
    let started = tokio::time::Instant::now();
    let waiting = tokio::spawn(async move { lock.lock().await.map(|g| (g, started.elapsed())) });
    tokio::time::sleep(Duration::from_millis(100)).await;
    guard.unlock().await.unwrap();
    let (guard, waited) = waiting.await.unwrap().unwrap();
    println!("waiter acquired after {waited:?} (holder unlocked after 100 ms, lease {LEASE:?})");
    assert!(
        waited < LEASE / 2,
        "the waiter was not woken by the unlock: {waited:?}"
    );
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn waiter_survives_a_killed_pubsub_connection() {
    let server = server();
    let holder = client_with(&server, Duration::from_secs(30), POLL).await;
    let waiter = client_with(&server, Duration::from_secs(30), POLL).await;
    let name = unique("wake-kill");
    let guard = holder.lock(&name).lock_with_lease(LEASE).await.unwrap();
    let lock = waiter.lock(&name);
    let started = tokio::time::Instant::now();
    let waiting = tokio::spawn(async move { lock.lock().await.map(|g| (g, started.elapsed())) });
    let waiter_subscribed = eventually(Duration::from_secs(5), || async {
        waiter.stats().subscribers == 1
    })
    .await;
    assert!(waiter_subscribed);
    let mut conn = raw(&server).await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(killed >= 1, "no pub/sub connection was killed");
    let reconnected = eventually(Duration::from_secs(5), || async {
        waiter.stats().hub_reconnects >= 1 && waiter.hub().is_connected()
    })
    .await;
    assert!(reconnected, "the hub did not reconnect");
    // Resubscribed: the channel is back on the server.
    let resubscribed = eventually(Duration::from_secs(5), || {
        let mut conn = conn.clone();
        let name = name.clone();
        async move { keylatch_tests::server_channels(&mut conn, &name).await == 1 }
    })
    .await;
    assert!(resubscribed, "the hub did not resubscribe");
    guard.unlock().await.unwrap();
    let (guard, waited) = waiting.await.unwrap().unwrap();
    println!("waiter acquired after {waited:?} despite the killed pub/sub connection");
    assert!(
        waited < LEASE / 2,
        "the waiter waited for the lease: {waited:?}"
    );
    guard.unlock().await.unwrap();
}
