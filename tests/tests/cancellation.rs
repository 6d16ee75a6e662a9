//! Dropping an acquire at any point leaves nothing behind: no key, no watchdog entry, no
//! subscription (locally or on the server).
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch_tests::{client, eventually, raw, server, server_channels, unique};

fn poll_once<F: Future>(fut: F) -> bool {
    let mut fut = pin!(fut);
    let waker = futures_util::task::noop_waker();
    matches!(
        fut.as_mut().poll(&mut Context::from_waker(&waker)),
        Poll::Ready(_)
    )
}

async fn assert_clean(client: &keylatch::Client, server: &keylatch_tests::RedisServer, name: &str) {
    client.wait_idle().await;
    let mut conn = raw(server).await;
    let exists: bool = conn.exists(name).await.unwrap();
    assert!(!exists, "a hold was left behind on {name}");
    let stats = client.stats();
    assert_eq!(stats.watchdog.holds, 0, "a watchdog entry was left behind");
    let unsubscribed = eventually(Duration::from_secs(5), || async {
        client.stats().channels == 0
    })
    .await;
    assert!(
        unsubscribed,
        "a subscription was left behind: {:?}",
        client.stats()
    );
    let gone = eventually(Duration::from_secs(5), || {
        let mut conn = conn.clone();
        async move { server_channels(&mut conn, name).await == 0 }
    })
    .await;
    assert!(gone, "the server still has a subscription for {name}");
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
    let mut acquired = 0;
    let mut cancelled = 0;
    // Uncontended: the drop lands before, during or after the acquire's round trip.
    for i in 0..400u64 {
        match tokio::time::timeout(Duration::from_nanos(i * 5_000), lock.lock()).await {
            Ok(guard) => {
                acquired += 1;
                guard.unwrap().unlock().await.unwrap();
            }
            Err(_) => cancelled += 1,
        }
    }
    // Contended: another client holds it for a while, so drops land mid-wait too; it lets go
    // half-way through.
    let held = other
        .lock(&name)
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        held.unlock().await.unwrap();
    });
    for i in 0..400u64 {
        match tokio::time::timeout(Duration::from_nanos(i * 5_000), lock.lock()).await {
            Ok(guard) => {
                acquired += 1;
                drop(guard.unwrap());
            }
            Err(_) => cancelled += 1,
        }
    }
    release.await.unwrap();
    println!("storm: {acquired} acquired, {cancelled} cancelled");
    assert!(
        cancelled > 0 && acquired > 0,
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
    use keylatch::redis;
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("in-flight");
    let lock = client.lock(&name).with_owner(keylatch::Owner::unique());

    // A fresh acquire, dropped while the server is paused.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(300)
        .arg("ALL")
        .query_async(&mut conn)
        .await
        .unwrap();
    let dropped = tokio::time::timeout(Duration::from_millis(50), lock.lock()).await;
    assert!(
        dropped.is_err(),
        "the acquire should still be waiting for the paused server"
    );
    client.wait_idle().await;
    let exists: bool = conn.exists(&name).await.unwrap();
    assert!(!exists, "the dropped acquire left a hold behind");
    assert_eq!(client.stats().watchdog.holds, 0);

    // A re-entry, dropped the same way: the count goes back to what the guards account for.
    let g1 = lock.lock().await.unwrap();
    let g2 = lock.lock().await.unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(300)
        .arg("ALL")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(50), lock.lock())
            .await
            .is_err()
    );
    client.wait_idle().await;
    assert_eq!(
        lock.hold_count().await.unwrap(),
        2,
        "the dropped re-entry doubled the count"
    );

    // An unlock dropped in flight still releases exactly once.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(300)
        .arg("ALL")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(50), g2.unlock())
            .await
            .is_err()
    );
    client.wait_idle().await;
    assert_eq!(
        lock.hold_count().await.unwrap(),
        1,
        "the dropped unlock released twice or not at all"
    );
    g1.unlock().await.unwrap();
    assert_clean(&client, &server, &name).await;
}
