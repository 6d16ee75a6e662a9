//! Dropping an acquire at any point leaves nothing behind: no key, no watchdog entry, no
//! subscription (locally or on the server).
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch_tests::{
    Storm, Then, assert_client_unsubscribed, assert_server_unsubscribed, client, dropped_in_flight,
    eventually, poll_once, raw, server, server_channels, unique, unlock_after,
};

async fn assert_clean(client: &keylatch::Client, server: &keylatch_tests::RedisServer, name: &str) {
    client.wait_idle().await;
    let mut conn = raw(server).await;
    let exists: bool = conn.exists(name).await.unwrap();
    assert!(!exists, "a hold was left behind on {name}");
    let stats = client.stats();
    assert_eq!(stats.watchdog.holds, 0, "a watchdog entry was left behind");
    assert_client_unsubscribed(client).await;
    assert_server_unsubscribed(&conn, name).await;
}

#[tokio::test]
async fn poll_once_then_drop_leaves_nothing() {
    let server = server();
    let client = client(&server).await;
    let name = unique("poll-once");
    let lock = client.lock(&name);
    for _ in 0..50 {
        poll_once(lock.lock());
        poll_once(lock.try_lock());
        poll_once(lock.lock_with_lease(Duration::from_secs(5)));
    }
    // And while another owner holds it, so the drop happens mid-wait.
    let holder = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await.unwrap() }
    })
    .await
    .unwrap();
    for _ in 0..50 {
        let waiting = tokio::spawn({
            let lock = lock.clone();
            async move { lock.lock().await }
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
        waiting.abort();
        let _ = waiting.await;
    }
    holder.unlock().await.unwrap();
    assert_clean(&client, &server, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_storms_leave_nothing() {
    let server = server();
    let client = client(&server).await;
    let other = keylatch_tests::client(&server).await;
    let name = unique("storm");
    let lock = client.lock(&name);
    let mut storm = Storm::default();
    // Uncontended: the drop lands before, during or after the acquire's round trip.
    storm
        .run(400, Duration::ZERO, Then::Unlock, || lock.lock())
        .await;
    // Contended: another client holds it for a while, so drops land mid-wait too; it lets go
    // half-way through.
    let held = other
        .lock(&name)
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    let release = unlock_after(held, Duration::from_millis(300));
    storm
        .run(400, Duration::ZERO, Then::Drop, || lock.lock())
        .await;
    release.await.unwrap();
    println!(
        "storm: {} acquired, {} cancelled",
        storm.acquired, storm.cancelled
    );
    assert!(
        storm.cancelled > 0 && storm.acquired > 0,
        "the storm did not exercise both outcomes"
    );
    assert_clean(&client, &server, &name).await;
    assert_eq!(other.stats().watchdog.holds, 0);
}

#[tokio::test]
async fn many_waiters_share_one_subscription_and_leave_none() {
    let server = server();
    let client = client(&server).await;
    let name = unique("shared-sub");
    let holder = client
        .lock(&name)
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    let mut waiters = Vec::new();
    for _ in 0..20 {
        let lock = client.lock(&name);
        waiters.push(tokio::spawn(async move {
            lock.try_lock_for(Duration::from_secs(30), None).await
        }));
    }
    let all_waiting = eventually(Duration::from_secs(5), || async {
        client.stats().subscribers == 20
    })
    .await;
    assert!(all_waiting, "{:?}", client.stats());
    assert_eq!(
        client.stats().channels,
        1,
        "20 waiters on one lock share one channel"
    );
    let mut conn = raw(&server).await;
    assert_eq!(server_channels(&mut conn, &name).await, 1);
    for waiter in &waiters {
        waiter.abort();
    }
    for waiter in waiters {
        let _ = waiter.await;
    }
    holder.unlock().await.unwrap();
    assert_clean(&client, &server, &name).await;
}

/// Pauses the server so a request is sent but not answered, drops the future meanwhile, and
/// lets the server run it afterwards: the undo must cancel its effect.
#[tokio::test]
async fn acquire_dropped_in_flight_is_undone_after_the_server_runs_it() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("in-flight");
    let lock = client.lock(&name).with_owner(keylatch::Owner::unique());

    // A fresh acquire, dropped while the server is paused.
    assert!(
        dropped_in_flight(&mut conn, lock.lock()).await,
        "the acquire should still be waiting for the paused server"
    );
    client.wait_idle().await;
    let exists: bool = conn.exists(&name).await.unwrap();
    assert!(!exists, "the dropped acquire left a hold behind");
    assert_eq!(client.stats().watchdog.holds, 0);

    // A re-entry, dropped the same way: the count goes back to what the guards account for.
    let g1 = lock.lock().await.unwrap();
    let g2 = lock.lock().await.unwrap();
    assert!(dropped_in_flight(&mut conn, lock.lock()).await);
    client.wait_idle().await;
    assert_eq!(
        lock.hold_count().await.unwrap(),
        2,
        "the dropped re-entry doubled the count"
    );

    // An unlock dropped in flight still releases exactly once.
    assert!(dropped_in_flight(&mut conn, g2.unlock()).await);
    client.wait_idle().await;
    assert_eq!(
        lock.hold_count().await.unwrap(),
        1,
        "the dropped unlock released twice or not at all"
    );
    g1.unlock().await.unwrap();
    assert_clean(&client, &server, &name).await;
}

/// The storm of the cluster suite (`cluster_faults.rs`), on one server: one body, two
/// topologies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_over_every_primitive_leaves_nothing() {
    let server = server();
    let holder = client(&server).await;
    let storm = client(&server).await;
    let names = vec![unique("every-storm-a"), unique("every-storm-b")];
    let tally =
        keylatch_tests::every::cancellation_storm(&holder, &storm, &names, &[&server]).await;
    // Every wait was still waiting (the lock was held) when it was aborted.
    assert_eq!(
        tally.finished,
        Vec::<String>::new(),
        "waits that were not cancelled"
    );
    assert_eq!(tally.cancelled, 2 * 6 * 10);
    holder.shutdown().await.unwrap();
    storm.shutdown().await.unwrap();
}
