//! Dropping semaphore futures at any point leaves nothing behind: every permit is back, no
//! timeout-zset entry, no subscription (locally or on the server), no watchdog entry, and —
//! once the request window has passed — no request marker. A request dropped in flight is
//! undone (an acquire) or finished exactly once (a release), also when the server runs it
//! after the drop, and when its reply is lost.
use std::future::Future;
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch::{Client, DistributedLock};
use keylatch_testkit::{Fault, FaultProxy, RedisServer};
use keylatch_tests::{
    TakeUnguarded, assert_client_unsubscribed, assert_server_unsubscribed, client_via,
    command_calls, dropped_in_flight, eventually, poll_once, raw, server, unique,
};

const TOTAL: u32 = 3;
/// The clients' watchdog timeout (the default).
const WATCHDOG: Duration = Duration::from_secs(30);
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(300);
/// The request window of a client with that response timeout (3 × it + 1 s).
const WINDOW: Duration = Duration::from_millis(1900);

/// Bounds a wait that only ends if permits come back: a leak fails the test instead of
/// hanging it.
async fn bounded<F: Future>(fut: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .expect("waited 10 s for permits that never came back")
}

/// Every key whose name contains `name`, sorted.
async fn keys_of(server: &RedisServer, name: &str) -> Vec<String> {
    let mut conn = raw(server).await;
    let mut keys: Vec<String> = conn.keys(format!("*{name}*")).await.unwrap();
    keys.sort();
    keys
}

/// Nothing left behind by `client` on `name`: no subscription, no watchdog entry, and only
/// the semaphore's own keys (`expected`) once the request markers' window has passed.
async fn assert_clean(client: &Client, server: &RedisServer, name: &str, expected: &[String]) {
    client.wait_idle().await;
    assert_eq!(
        client.stats().watchdog.holds,
        0,
        "a watchdog entry was left"
    );
    assert_client_unsubscribed(client).await;
    let mut conn = raw(server).await;
    assert_server_unsubscribed(&conn, name).await;
    // Request markers carry a TTL of the request window.
    let markers: Vec<String> = conn.keys(format!("*{name}*:req:*")).await.unwrap();
    for marker in &markers {
        // -1: no expiry (what must not be); 0 or -2: it expired between the two calls.
        let pttl: i64 = conn.pttl(marker).await.unwrap();
        assert_ne!(pttl, -1, "marker {marker} has no ttl");
    }
    let only_own = eventually(WINDOW + Duration::from_secs(2), || async {
        keys_of(server, name).await == expected
    })
    .await;
    assert!(
        only_own,
        "keys left behind: {:?} (expected {expected:?})",
        keys_of(server, name).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_once_then_drop_leaves_every_permit_in_place() {
    let server = server();
    let client = client_via(server.url(), WATCHDOG, RESPONSE_TIMEOUT).await;
    let name = unique("sem-poll-once");
    let semaphore = client.semaphore(&name);
    semaphore.try_set_permits(TOTAL).await.unwrap();
    let lock = semaphore.as_lock();
    // An acquire completed by its one poll took its permits for good (they are not owned):
    // count them, to give them back.
    let mut completed = 0;
    for _ in 0..40 {
        completed += poll_once(semaphore.take(1)).map_or(0, |r| r.map(|()| 1).unwrap());
        completed += poll_once(semaphore.take(2)).map_or(0, |r| r.map(|()| 2).unwrap());
        completed += poll_once(semaphore.try_take(1)).map_or(0, |r| u32::from(r.unwrap()));
        // A guard completed by its one poll is dropped, which gives its permit back.
        drop(poll_once(lock.lock()));
    }
    println!("poll once: {completed} permits taken by acquires that one poll completed");
    if completed > 0 {
        client.wait_idle().await;
        semaphore.release(completed).await.unwrap();
    }
    // A release polled once is finished in the background, exactly once each.
    for _ in 0..10 {
        drop(poll_once(semaphore.release(1)));
    }
    client.wait_idle().await;
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        u64::from(TOTAL) + 10,
        "a dropped acquire kept permits, or a dropped release applied other than once"
    );
    assert_eq!(
        semaphore.drain_permits().await.unwrap(),
        u64::from(TOTAL) + 10
    );
    semaphore.release(TOTAL).await.unwrap();
    assert_clean(&client, &server, &name, std::slice::from_ref(&name)).await;

    let xname = unique("xsem-poll-once");
    let xsemaphore = client.permit_expirable_semaphore(&xname);
    xsemaphore.try_set_permits(TOTAL).await.unwrap();
    let xlock = xsemaphore.as_lock();
    // Permits completed by their one poll are dropped, which gives them back.
    for _ in 0..40 {
        drop(poll_once(xsemaphore.acquire()));
        drop(poll_once(
            xsemaphore.acquire_with_lease(Duration::from_secs(60)),
        ));
        drop(poll_once(
            xsemaphore.acquire_many(2, keylatch::AcquireOptions::new()),
        ));
        drop(poll_once(xlock.lock()));
    }
    // A permit's release polled once still releases, once.
    let permit = bounded(xsemaphore.acquire()).await.unwrap();
    drop(poll_once(permit.release()));
    client.wait_idle().await;
    assert_eq!(
        xsemaphore.available_permits().await.unwrap(),
        u64::from(TOTAL)
    );
    assert_eq!(xsemaphore.acquired_permits().await.unwrap(), 0);
    let mut expected = vec![xname.clone()];
    expected.sort();
    assert_clean(&client, &server, &xname, &expected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_storms_leave_nothing_behind() {
    let server = server();
    let client = client_via(server.url(), WATCHDOG, RESPONSE_TIMEOUT).await;
    let other = client_via(server.url(), WATCHDOG, RESPONSE_TIMEOUT).await;
    let name = unique("sem-storm");
    let semaphore = client.semaphore(&name);
    semaphore.try_set_permits(TOTAL).await.unwrap();
    let lock = semaphore.as_lock();
    let (mut acquired, mut cancelled) = (0, 0);
    // Uncontended, then contended: another client holds every permit for a while.
    for round in 0..2 {
        let holder = other.semaphore(&name);
        if round == 1 {
            bounded(holder.take(TOTAL)).await.unwrap();
        }
        let release = tokio::spawn(async move {
            if round == 1 {
                tokio::time::sleep(Duration::from_millis(200)).await;
                holder.release(TOTAL).await.unwrap();
            }
        });
        for i in 0..200u64 {
            let wait = Duration::from_nanos(i * 5_000);
            if i % 2 == 0 {
                match tokio::time::timeout(wait, semaphore.take(2)).await {
                    Ok(result) => {
                        result.unwrap();
                        acquired += 1;
                        semaphore.release(2).await.unwrap();
                    }
                    Err(_) => cancelled += 1,
                }
            } else {
                match tokio::time::timeout(wait, lock.lock()).await {
                    Ok(guard) => {
                        acquired += 1;
                        drop(guard.unwrap());
                    }
                    Err(_) => cancelled += 1,
                }
            }
        }
        release.await.unwrap();
    }
    // Releases dropped at any point apply exactly once each.
    let mut storms = 0;
    for i in 0..100u64 {
        let _ = tokio::time::timeout(Duration::from_nanos(i * 5_000), semaphore.release(1)).await;
        storms += 1;
    }
    client.wait_idle().await;
    other.wait_idle().await;
    println!(
        "plain storm: {acquired} acquired, {cancelled} cancelled, {storms} releases dropped at any point"
    );
    assert!(
        acquired > 0 && cancelled > 0,
        "the storm did not exercise both outcomes"
    );
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        u64::from(TOTAL) + storms,
        "permits were lost or doubled"
    );
    assert_eq!(
        semaphore.drain_permits().await.unwrap(),
        u64::from(TOTAL) + storms
    );
    semaphore.release(TOTAL).await.unwrap();
    assert_clean(&client, &server, &name, std::slice::from_ref(&name)).await;
    assert_clean(&other, &server, &name, std::slice::from_ref(&name)).await;

    // The permit-expirable semaphore, the same way.
    let xname = unique("xsem-storm");
    let xsemaphore = client.permit_expirable_semaphore(&xname);
    xsemaphore.try_set_permits(TOTAL).await.unwrap();
    let xlock = xsemaphore.as_lock();
    let (mut acquired, mut cancelled) = (0, 0);
    for round in 0..2 {
        let holder = other.permit_expirable_semaphore(&xname);
        let held = if round == 1 {
            bounded(holder.acquire_many(TOTAL, keylatch::AcquireOptions::new()))
                .await
                .unwrap()
        } else {
            None
        };
        let release = tokio::spawn(async move {
            if let Some(permits) = held {
                tokio::time::sleep(Duration::from_millis(200)).await;
                for permit in permits {
                    permit.release().await.unwrap();
                }
            }
        });
        for i in 0..200u64 {
            let wait = Duration::from_nanos(i * 5_000);
            match i % 3 {
                0 => match tokio::time::timeout(wait, xsemaphore.acquire()).await {
                    Ok(permit) => {
                        acquired += 1;
                        permit.unwrap().release().await.unwrap();
                    }
                    Err(_) => cancelled += 1,
                },
                1 => match tokio::time::timeout(
                    wait,
                    xsemaphore.acquire_many(2, keylatch::AcquireOptions::new()),
                )
                .await
                {
                    Ok(permits) => {
                        acquired += 1;
                        drop(permits.unwrap());
                    }
                    Err(_) => cancelled += 1,
                },
                _ => {
                    match tokio::time::timeout(wait, xlock.lock_with_lease(Duration::from_secs(60)))
                        .await
                    {
                        Ok(guard) => {
                            acquired += 1;
                            guard.unwrap().unlock().await.unwrap();
                        }
                        Err(_) => cancelled += 1,
                    }
                }
            }
        }
        release.await.unwrap();
    }
    client.wait_idle().await;
    other.wait_idle().await;
    println!("expirable storm: {acquired} acquired, {cancelled} cancelled");
    assert!(
        acquired > 0 && cancelled > 0,
        "the storm did not exercise both outcomes"
    );
    assert_eq!(
        xsemaphore.available_permits().await.unwrap(),
        u64::from(TOTAL)
    );
    assert_eq!(xsemaphore.acquired_permits().await.unwrap(), 0);
    let mut expected = vec![xname.clone()];
    expected.sort();
    assert_clean(&client, &server, &xname, &expected).await;
    assert_clean(&other, &server, &xname, &expected).await;
}

/// The server is paused so a request is sent but not answered; the future is dropped
/// meanwhile and the server runs the request afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_dropped_in_flight_are_undone_or_finished_exactly_once() {
    let server = server();
    let client = client_via(server.url(), WATCHDOG, Duration::from_secs(5)).await;
    let mut conn = raw(&server).await;
    let name = unique("sem-in-flight");
    let semaphore = client.semaphore(&name);
    semaphore.try_set_permits(TOTAL).await.unwrap();

    assert!(
        dropped_in_flight(&mut conn, semaphore.take(2)).await,
        "the acquire should wait for the paused server"
    );
    client.wait_idle().await;
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        u64::from(TOTAL),
        "the acquire dropped in flight kept its permits"
    );

    bounded(semaphore.take(1)).await.unwrap();
    assert!(
        dropped_in_flight(&mut conn, semaphore.release(1)).await,
        "the release should wait for the paused server"
    );
    client.wait_idle().await;
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        u64::from(TOTAL),
        "the release dropped in flight applied other than once"
    );

    let guard = bounded(semaphore.as_lock().lock()).await.unwrap();
    assert!(dropped_in_flight(&mut conn, guard.unlock()).await);
    client.wait_idle().await;
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        u64::from(TOTAL)
    );

    let xname = unique("xsem-in-flight");
    let xsemaphore = client.permit_expirable_semaphore(&xname);
    xsemaphore.try_set_permits(TOTAL).await.unwrap();
    assert!(
        dropped_in_flight(
            &mut conn,
            xsemaphore.acquire_many(2, keylatch::AcquireOptions::new())
        )
        .await
    );
    client.wait_idle().await;
    assert_eq!(
        xsemaphore.available_permits().await.unwrap(),
        u64::from(TOTAL)
    );
    assert_eq!(xsemaphore.acquired_permits().await.unwrap(), 0);

    let permit = bounded(xsemaphore.acquire()).await.unwrap();
    assert!(dropped_in_flight(&mut conn, permit.release()).await);
    client.wait_idle().await;
    assert_eq!(
        xsemaphore.available_permits().await.unwrap(),
        u64::from(TOTAL)
    );
    assert_eq!(xsemaphore.acquired_permits().await.unwrap(), 0);
    assert_eq!(client.stats().watchdog.holds, 0);
}

/// Replies dropped after the server ran the request (a fault proxy): an acquire is not
/// doubled and a release is not applied twice, although each is sent more than once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_replies_neither_leak_nor_double_permits() {
    let server = server();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let client = client_via(proxy.url(), WATCHDOG, Duration::from_millis(200)).await;
    let name = unique("sem-lost-reply");
    let xname = unique("xsem-lost-reply");
    let semaphore = client.semaphore(&name);
    let xsemaphore = client.permit_expirable_semaphore(&xname);
    semaphore.try_set_permits(TOTAL).await.unwrap();
    xsemaphore.try_set_permits(TOTAL).await.unwrap();
    let mut conn = raw(&server).await;
    let evalsha = || async { command_calls(&mut raw(&server).await, "evalsha").await };

    // Acquires whose replies are dropped: each attempt runs and is undone; once replies flow
    // again one attempt succeeds.
    let before = evalsha().await;
    proxy.set(Fault::DropReplies);
    let plain = tokio::spawn({
        let semaphore = semaphore.clone();
        async move { semaphore.take(1).await }
    });
    let expirable = tokio::spawn({
        let xsemaphore = xsemaphore.clone();
        async move { xsemaphore.acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.set(Fault::Pass);
    bounded(plain).await.unwrap().unwrap();
    let permit = bounded(expirable).await.unwrap().unwrap();
    client.wait_idle().await;
    let during = evalsha().await - before;
    let available: Option<u64> = conn.get(&name).await.unwrap();
    println!(
        "lost replies: {during} script calls ran while acquiring; plain available {available:?}, expirable acquired {}",
        xsemaphore.acquired_permits().await.unwrap()
    );
    assert!(during > 2, "no request was sent more than once");
    assert_eq!(
        available,
        Some(u64::from(TOTAL) - 1),
        "an acquire was doubled or leaked"
    );
    assert_eq!(xsemaphore.acquired_permits().await.unwrap(), 1);

    // Releases whose replies are dropped: retried with the same marker / id, applied once.
    let before = evalsha().await;
    proxy.set(Fault::DropReplies);
    let plain = tokio::spawn({
        let semaphore = semaphore.clone();
        async move { semaphore.release(1).await }
    });
    let expirable = tokio::spawn(permit.release());
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.set(Fault::Pass);
    bounded(plain).await.unwrap().unwrap();
    bounded(expirable).await.unwrap().unwrap();
    client.wait_idle().await;
    let during = evalsha().await - before;
    let available: Option<u64> = conn.get(&name).await.unwrap();
    println!(
        "lost replies: {during} script calls ran while releasing; plain available {available:?}"
    );
    assert!(during > 2, "no release was sent more than once");
    assert_eq!(
        available,
        Some(u64::from(TOTAL)),
        "a release was doubled or lost"
    );
    assert_eq!(
        xsemaphore.available_permits().await.unwrap(),
        u64::from(TOTAL)
    );
    assert_eq!(xsemaphore.acquired_permits().await.unwrap(), 0);
}

/// Release markers whose replies were seen wait in a queue until a call takes them along to
/// delete (or a background `DEL` a moment later). An acquire that took them and was refused
/// in flight, then dropped, must not lose them: a release's marker would live an hour.
#[tokio::test]
async fn markers_taken_by_an_acquire_dropped_in_flight_are_deleted() {
    let server = server();
    let client = client_via(server.url(), WATCHDOG, RESPONSE_TIMEOUT).await;
    let mut conn = raw(&server).await;
    let name = unique("sem-taken");
    let semaphore = client.semaphore(&name);
    assert!(semaphore.try_set_permits(1).await.unwrap());
    // Seven releases in a row: their markers and `try_set_permits`'s queue up (the background
    // DEL waits 100 ms), eight in all, and none of these calls takes any along (a call takes
    // them once eight are queued).
    for _ in 0..7 {
        semaphore.release(1).await.unwrap();
    }
    // An acquire of more than there is takes the queued markers along and is refused; the
    // server runs it only after the drop.
    let dropped = dropped_in_flight(&mut conn, semaphore.try_take(100)).await;
    assert!(dropped, "the acquire answered before the drop");
    client.wait_idle().await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    client.wait_idle().await;
    let markers: Vec<String> = conn.keys(format!("*{name}*:req:*")).await.unwrap();
    let mut long_lived = Vec::new();
    for marker in &markers {
        let pttl: i64 = conn.pttl(marker).await.unwrap();
        // A release's marker lives an hour; an acquire's the request window (seconds).
        if pttl > 120_000 {
            long_lived.push(marker.clone());
        }
    }
    assert!(
        long_lived.is_empty(),
        "release markers left for an hour: {long_lived:?}"
    );
    client.shutdown().await.unwrap();
}
