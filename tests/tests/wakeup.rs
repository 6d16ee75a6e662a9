//! Waiters are woken by pub/sub, not by the lease running out, and survive the hub's
//! connection being killed.
use std::time::Duration;

use keylatch::redis;
use keylatch_tests::{
    client_with, command_calls, eventually, kill_pubsub_and_await_reconnect, raw, server, unique,
};

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
    kill_pubsub_and_await_reconnect(&mut conn, &waiter).await;
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

/// A waiter that joins a channel while the hub is unsubscribing it (the last waiter just left)
/// must not start waiting until the server has it subscribed again: a message published in
/// between would otherwise be lost and the waiter would sleep until its fallback poll. Each
/// round leaves a channel and joins it again at once, with a varying pause between, and checks
/// on the server that the channel is subscribed when the join returns. The client unsubscribes
/// unused channels at once (no linger), so the `UNSUBSCRIBE` is on its way when the join comes.
#[tokio::test]
async fn a_channel_joined_while_it_is_being_unsubscribed_is_subscribed_when_the_join_returns() {
    use keylatch_redis::WakeMode;
    const ROUNDS: usize = 300;
    let server = server();
    let config = keylatch::Config::builder()
        .url(server.url())
        .fallback_poll(POLL)
        .subscription_linger(Duration::ZERO)
        .build()
        .unwrap();
    // The hub itself, as the Redis layer's client exposes it to the primitives.
    let client = keylatch_redis::Client::connect(config).await.unwrap();
    let mut conn = raw(&server).await;
    let hub = client.hub();
    let channel = unique("rejoin");
    let mut missing = 0;
    for round in 0..ROUNDS {
        let first = hub
            .subscribe(&channel, WakeMode::One, Duration::from_secs(5))
            .await;
        drop(first);
        // Let the hub get the UNSUBSCRIBE on its way, or not, by a varying margin.
        for _ in 0..round % 16 {
            tokio::task::yield_now().await;
        }
        let second = hub
            .subscribe(&channel, WakeMode::One, Duration::from_secs(5))
            .await;
        let (_, subscribers): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&channel)
            .query_async(&mut conn)
            .await
            .unwrap();
        if subscribers != 1 {
            missing += 1;
        }
        drop(second);
    }
    println!("{missing} of {ROUNDS} joins returned while the server had the channel unsubscribed");
    assert_eq!(
        missing, 0,
        "a join returned before the channel was subscribed again"
    );
    let idle = eventually(Duration::from_secs(5), || async {
        client.stats().channels == 0
    })
    .await;
    assert!(idle, "the hub kept a channel nobody uses");
}

/// After its last waiter leaves, a channel stays subscribed for the client's linger: a waiter
/// that comes back within it joins without a `SUBSCRIBE` (and can join before its first
/// attempt); after it, the hub unsubscribes.
#[tokio::test]
async fn an_unused_channel_lingers_then_is_unsubscribed() {
    use keylatch_redis::WakeMode;
    const LINGER: Duration = Duration::from_millis(400);
    let server = server();
    let config = keylatch::Config::builder()
        .url(server.url())
        .fallback_poll(POLL)
        .subscription_linger(LINGER)
        .build()
        .unwrap();
    // The hub itself, as the Redis layer's client exposes it to the primitives.
    let client = keylatch_redis::Client::connect(config).await.unwrap();
    let mut conn = raw(&server).await;
    let hub = client.hub();
    let channel = unique("linger");
    let numsub = |mut conn: redis::aio::MultiplexedConnection, channel: String| async move {
        let (_, subscribers): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&channel)
            .query_async(&mut conn)
            .await
            .unwrap();
        subscribers
    };

    assert!(hub.join_if_subscribed(&channel, WakeMode::One).is_none());
    let first = hub
        .subscribe(&channel, WakeMode::One, Duration::from_secs(5))
        .await;
    let subscribes = command_calls(&mut conn, "subscribe").await;
    let left = tokio::time::Instant::now();
    drop(first);
    // Back well within the linger: the channel is still subscribed, and joining it costs
    // nothing on the server.
    let again = hub
        .join_if_subscribed(&channel, WakeMode::One)
        .expect("the channel lingers after its last waiter left");
    assert!(
        left.elapsed() < LINGER,
        "the test itself was too slow to check the linger"
    );
    assert_eq!(numsub(conn.clone(), channel.clone()).await, 1);
    drop(again);
    let unsubscribed = eventually(Duration::from_secs(5), || async {
        numsub(conn.clone(), channel.clone()).await == 0 && client.stats().channels == 0
    })
    .await;
    let waited = left.elapsed();
    println!(
        "the channel was unsubscribed {waited:?} after its last waiter left (linger {LINGER:?})"
    );
    assert!(
        unsubscribed,
        "the hub never unsubscribed the unused channel"
    );
    assert!(
        waited >= LINGER,
        "unsubscribed before the linger ended: {waited:?}"
    );
    assert_eq!(
        command_calls(&mut conn, "subscribe").await,
        subscribes,
        "joining a lingering channel sent a SUBSCRIBE"
    );
}

/// A subscription asked for while the hub has no connection (lost, and new ones refused for a
/// while) returns once the hub is connected again with the channel subscribed, not at once
/// with nothing on the server.
#[tokio::test]
async fn a_join_while_the_hub_reconnects_returns_subscribed() {
    use keylatch_redis::WakeMode;
    use keylatch_testkit::{Fault, FaultProxy};
    let server = server();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let config = keylatch::Config::builder()
        .url(proxy.url())
        .fallback_poll(POLL)
        .build()
        .unwrap();
    let client = keylatch_redis::Client::connect(config).await.unwrap();
    let mut conn = raw(&server).await;
    assert!(
        eventually(Duration::from_secs(5), || async {
            client.stats().hub_connected
        })
        .await
    );
    proxy.set(Fault::Refuse);
    proxy.reset_connections();
    assert!(
        eventually(Duration::from_secs(5), || async {
            !client.stats().hub_connected
        })
        .await,
        "the hub never noticed its connection was gone"
    );
    let channel = unique("reconnecting");
    let subscribe = client
        .hub()
        .subscribe(&channel, WakeMode::One, Duration::from_secs(10));
    tokio::pin!(subscribe);
    // New connections get through again half a second into the wait.
    let subscription = tokio::select! {
        s = &mut subscribe => s,
        () = tokio::time::sleep(Duration::from_millis(500)) => {
            proxy.set(Fault::Pass);
            subscribe.await
        }
    }
    .unwrap();
    let (_, subscribers): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(&channel)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(subscribers, 1, "the join returned with nothing subscribed");
    drop(subscription);
}
