//! Semaphore waiters are woken by the release's pub/sub message, survive the hub's connection
//! being killed, and, when no message comes at all, by the fallback poll.
use std::time::Duration;

use keylatch::redis::{self, AsyncCommands};
use keylatch_tests::{client_with, eventually, raw, server, server_channels, unique};

const WATCHDOG: Duration = Duration::from_secs(30);
/// A fallback poll so long that only a message can explain an early wake-up.
const LONG_POLL: Duration = Duration::from_secs(60);
/// Far below the long poll: a wake-up before it was caused by a message.
const PROMPT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn release_wakes_a_waiter_through_pubsub() {
    let server = server();
    let holder = client_with(&server, WATCHDOG, LONG_POLL).await;
    let waiter = client_with(&server, WATCHDOG, LONG_POLL).await;

    // Plain: one permit, taken; the waiter needs it.
    let name = unique("sem-wake");
    holder.semaphore(&name).try_set_permits(1).await.unwrap();
    holder.semaphore(&name).acquire().await.unwrap();
    let semaphore = waiter.semaphore(&name);
    let started = tokio::time::Instant::now();
    let waiting =
        tokio::spawn(async move { semaphore.acquire().await.map(|()| started.elapsed()) });
    let subscribed = eventually(Duration::from_secs(5), || async {
        waiter.stats().subscribers == 1
    })
    .await;
    assert!(subscribed, "the waiter never subscribed");
    holder.semaphore(&name).release(1).await.unwrap();
    let waited = waiting.await.unwrap().unwrap();
    println!("plain: waiter acquired {waited:?} after it started (poll {LONG_POLL:?})");
    assert!(
        waited < PROMPT,
        "the release did not wake the waiter: {waited:?}"
    );

    // Expirable: the holder's permit has a long lease, so only the release can free it.
    let name = unique("xsem-wake");
    let xholder = holder.permit_expirable_semaphore(&name);
    xholder.try_set_permits(1).await.unwrap();
    let permit = xholder
        .acquire_with_lease(Duration::from_secs(120))
        .await
        .unwrap();
    let xsemaphore = waiter.permit_expirable_semaphore(&name);
    let started = tokio::time::Instant::now();
    let waiting = tokio::spawn(async move {
        xsemaphore
            .acquire()
            .await
            .map(|permit| (permit, started.elapsed()))
    });
    let subscribed = eventually(Duration::from_secs(5), || async {
        waiter.stats().subscribers == 1
    })
    .await;
    assert!(subscribed, "the expirable waiter never subscribed");
    permit.release().await.unwrap();
    let (permit, waited) = waiting.await.unwrap().unwrap();
    println!(
        "expirable: waiter acquired {waited:?} after it started (lease 120 s, poll {LONG_POLL:?})"
    );
    assert!(
        waited < PROMPT,
        "the release did not wake the waiter: {waited:?}"
    );
    permit.release().await.unwrap();
}

#[tokio::test]
async fn waiter_survives_a_killed_pubsub_connection() {
    let server = server();
    let holder = client_with(&server, WATCHDOG, LONG_POLL).await;
    let waiter = client_with(&server, WATCHDOG, LONG_POLL).await;
    let name = unique("sem-kill");
    let xname = unique("xsem-kill");
    holder.semaphore(&name).try_set_permits(1).await.unwrap();
    holder.semaphore(&name).acquire().await.unwrap();
    let xholder = holder.permit_expirable_semaphore(&xname);
    xholder.try_set_permits(1).await.unwrap();
    let permit = xholder
        .acquire_with_lease(Duration::from_secs(120))
        .await
        .unwrap();

    let semaphore = waiter.semaphore(&name);
    let xsemaphore = waiter.permit_expirable_semaphore(&xname);
    let started = tokio::time::Instant::now();
    let plain_waiting =
        tokio::spawn(async move { semaphore.acquire().await.map(|()| started.elapsed()) });
    let expirable_waiting = tokio::spawn(async move {
        xsemaphore
            .acquire()
            .await
            .map(|permit| (permit, started.elapsed()))
    });
    let subscribed = eventually(Duration::from_secs(5), || async {
        waiter.stats().subscribers == 2
    })
    .await;
    assert!(subscribed, "{:?}", waiter.stats());

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
    let resubscribed = eventually(Duration::from_secs(5), || {
        let mut conn = conn.clone();
        let (name, xname) = (name.clone(), xname.clone());
        async move {
            server_channels(&mut conn, &name).await == 1
                && server_channels(&mut conn, &xname).await == 1
        }
    })
    .await;
    assert!(resubscribed, "the hub did not resubscribe");

    holder.semaphore(&name).release(1).await.unwrap();
    permit.release().await.unwrap();
    let waited = plain_waiting.await.unwrap().unwrap();
    let (permit, xwaited) = expirable_waiting.await.unwrap().unwrap();
    println!(
        "after a killed pub/sub connection: plain waiter in after {waited:?}, expirable after {xwaited:?} (poll {LONG_POLL:?})"
    );
    assert!(
        waited < PROMPT && xwaited < PROMPT,
        "a waiter waited for the poll"
    );
    permit.release().await.unwrap();
}

/// Permits appear without any message (another program raises the count directly, as if the
/// message were lost): the fallback poll still lets the waiter in within its bound.
#[tokio::test]
async fn waiter_acquires_within_the_fallback_poll_when_no_message_comes() {
    let poll = Duration::from_millis(300);
    // The poll has ±20 % jitter; a retry takes a round trip or two.
    let bound = poll * 6 / 5 + Duration::from_secs(1);
    let server = server();
    let waiter = client_with(&server, WATCHDOG, poll).await;
    let name = unique("sem-lost-msg");
    let xname = unique("xsem-lost-msg");
    let xsemaphore = waiter.permit_expirable_semaphore(&xname);
    xsemaphore.try_set_permits(1).await.unwrap();
    let taken = xsemaphore.acquire().await.unwrap().forget();
    let mut conn = raw(&server).await;
    let _: () = conn.set(&name, 0).await.unwrap();

    let semaphore = waiter.semaphore(&name);
    let plain_waiting = tokio::spawn(async move { semaphore.acquire_many(2).await });
    let waiting_semaphore = xsemaphore.clone();
    let expirable_waiting = tokio::spawn(async move { waiting_semaphore.acquire().await });
    let subscribed = eventually(Duration::from_secs(5), || async {
        waiter.stats().subscribers == 2
    })
    .await;
    assert!(subscribed, "{:?}", waiter.stats());
    // Wait a poll interval, so the waiters are asleep, then add permits without a message.
    tokio::time::sleep(poll).await;
    let raised = tokio::time::Instant::now();
    let _: () = conn.incr(&name, 2).await.unwrap();
    let _: () = conn.incr(&xname, 1).await.unwrap();
    tokio::time::timeout(bound, plain_waiting)
        .await
        .expect("the plain waiter hung although permits were available")
        .unwrap()
        .unwrap();
    let plain = raised.elapsed();
    let permit = tokio::time::timeout(bound, expirable_waiting)
        .await
        .expect("the expirable waiter hung although a permit was available")
        .unwrap()
        .unwrap();
    println!(
        "no message: the plain waiter got in {plain:?} and the expirable one {:?} after the count was raised (poll {poll:?}, bound {bound:?})",
        raised.elapsed()
    );
    permit.release().await.unwrap();
    xsemaphore.release(&taken).await.unwrap();
}
