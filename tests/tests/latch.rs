//! The count-down latch on one server: many waiters released by the last count-down and none
//! before, bounded waits, wake-ups by pub/sub and (when no message comes) by the fallback
//! poll, `try_set_count` on an existing latch, bad input, Redisson's key, channel and messages.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use keylatch::Error;
use keylatch::redis::AsyncCommands;
use keylatch_tests::{client, client_with, eventually, keyspace, pubsub, raw, server, unique};

const WATCHDOG: Duration = Duration::from_secs(30);
/// A fallback poll so long that only a message can explain an early wake-up.
const LONG_POLL: Duration = Duration::from_secs(60);
/// Far below the long poll: a wake-up before it was caused by a message (or, with a short
/// poll, by the poll).
const PROMPT: Duration = Duration::from_secs(10);

/// Waits until `client` has `n` local waiters subscribed.
async fn subscribed(client: &keylatch::Client, n: usize) {
    let all = eventually(Duration::from_secs(10), || async {
        client.stats().subscribers >= n
    })
    .await;
    assert!(all, "the waiters never subscribed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_waiters_are_released_by_the_last_count_down_and_none_before() {
    let server = server();
    // A short poll, so waiters also re-read the count while it is above zero.
    let a = client_with(&server, WATCHDOG, Duration::from_millis(100)).await;
    let b = client_with(&server, WATCHDOG, Duration::from_millis(100)).await;
    let name = unique("latch-many");
    assert!(a.latch(&name).try_set_count(3).await.unwrap());
    let zero = Arc::new(AtomicBool::new(false));
    let early = Arc::new(AtomicUsize::new(0));
    let mut waiters = Vec::new();
    for i in 0..20 {
        let latch = (if i % 2 == 0 { &a } else { &b }).latch(&name);
        let (zero, early) = (zero.clone(), early.clone());
        waiters.push(tokio::spawn(async move {
            latch.wait().await.unwrap();
            if !zero.load(Ordering::SeqCst) {
                early.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    subscribed(&a, 10).await;
    subscribed(&b, 10).await;
    // Two count-downs wake everyone (each message, each poll): nobody may leave.
    assert_eq!(a.latch(&name).count_down().await.unwrap(), 2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(b.latch(&name).count_down().await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(early.load(Ordering::SeqCst), 0, "waiters woke before zero");
    assert!(waiters.iter().all(|w| !w.is_finished()));
    zero.store(true, Ordering::SeqCst);
    assert_eq!(a.latch(&name).count_down().await.unwrap(), 0);
    for waiter in waiters {
        tokio::time::timeout(PROMPT, waiter)
            .await
            .expect("a waiter was not released by the last count-down")
            .unwrap();
    }
    assert_eq!(early.load(Ordering::SeqCst), 0, "waiters woke before zero");
    assert!(
        !a.latch(&name).exists().await.unwrap(),
        "the key outlived zero"
    );
    keylatch_tests::assert_client_unsubscribed(&a).await;
}

#[tokio::test]
async fn wait_for_times_out_while_the_count_is_above_zero() {
    let server = server();
    let client = client_with(&server, WATCHDOG, Duration::from_millis(100)).await;
    let latch = client.latch(&unique("latch-timeout"));
    assert!(latch.try_set_count(1).await.unwrap());
    let started = tokio::time::Instant::now();
    assert!(!latch.wait_for(Duration::from_millis(400)).await.unwrap());
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "gave up early"
    );
    assert!(!latch.wait_for(Duration::ZERO).await.unwrap());
    assert_eq!(latch.count().await.unwrap(), 1);
    latch.count_down().await.unwrap();
    assert!(latch.wait_for(Duration::ZERO).await.unwrap());
    assert!(latch.wait_for(Duration::from_secs(5)).await.unwrap());
    // A latch that does not exist is open.
    let missing = client.latch(&unique("latch-missing"));
    missing.wait().await.unwrap();
    assert_eq!(missing.count_down().await.unwrap(), 0);
    assert!(!missing.exists().await.unwrap());
}

#[tokio::test]
async fn the_zero_count_message_wakes_a_waiter() {
    let server = server();
    let setter = client_with(&server, WATCHDOG, LONG_POLL).await;
    let waiter = client_with(&server, WATCHDOG, LONG_POLL).await;
    let name = unique("latch-pubsub");
    assert!(setter.latch(&name).try_set_count(1).await.unwrap());
    let latch = waiter.latch(&name);
    let started = tokio::time::Instant::now();
    let waiting = tokio::spawn(async move { latch.wait().await.map(|()| started.elapsed()) });
    subscribed(&waiter, 1).await;
    setter.latch(&name).count_down().await.unwrap();
    let waited = tokio::time::timeout(PROMPT, waiting)
        .await
        .expect("the zero-count message did not wake the waiter")
        .unwrap()
        .unwrap();
    println!("woken {waited:?} after it started (poll {LONG_POLL:?})");
}

#[tokio::test]
async fn the_poll_wakes_a_waiter_when_no_message_comes() {
    let server = server();
    let waiter = client_with(&server, WATCHDOG, Duration::from_millis(200)).await;
    let name = unique("latch-poll");
    let latch = waiter.latch(&name);
    assert!(latch.try_set_count(5).await.unwrap());
    let waiting = tokio::spawn(async move { latch.wait().await });
    subscribed(&waiter, 1).await;
    // The count goes to zero by plain commands: no message at all.
    let mut conn = raw(&server).await;
    let _: () = conn.set(&name, 0).await.unwrap();
    tokio::time::timeout(PROMPT, waiting)
        .await
        .expect("the poll did not wake the waiter")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn try_set_count_leaves_an_existing_latch_untouched() {
    let server = server();
    let client = client(&server).await;
    let name = unique("latch-set-twice");
    let latch = client.latch(&name);
    assert!(latch.try_set_count(3).await.unwrap());
    assert_eq!(latch.count_down().await.unwrap(), 2);
    assert!(latch.expire(Duration::from_secs(600)).await.unwrap());
    let mut conn = raw(&server).await;
    let before = keyspace(&mut conn).await;
    let mut watch = pubsub(&server).await;
    watch.subscribe(latch.channel()).await.unwrap();
    assert!(!latch.try_set_count(5).await.unwrap());
    assert!(!client.latch(&name).try_set_count(2).await.unwrap());
    assert_eq!(keyspace(&mut conn).await, before);
    assert_eq!(latch.count().await.unwrap(), 2);
    let mut messages = watch.on_message();
    let message = tokio::time::timeout(Duration::from_millis(300), messages.next()).await;
    assert!(message.is_err(), "a refused try_set_count published");
    // Expiry: cleared, then the latch reaches zero and can be set again.
    assert!(latch.clear_expire().await.unwrap());
    assert!(!latch.clear_expire().await.unwrap());
    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    assert!(latch.try_set_count(4).await.unwrap());
    assert!(latch.delete().await.unwrap());
    assert!(!latch.delete().await.unwrap());
}

#[tokio::test]
async fn bad_input_is_refused_before_redis_is_touched() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let before = keyspace(&mut conn).await;
    let latch = client.latch(&unique("latch-bad"));
    assert!(matches!(
        latch.try_set_count(0).await,
        Err(Error::InvalidCount { .. })
    ));
    assert!(matches!(
        latch.try_set_count(keylatch::MAX_COUNT + 1).await,
        Err(Error::InvalidCount { .. })
    ));
    assert!(matches!(
        latch.expire(Duration::ZERO).await,
        Err(Error::InvalidLease { .. })
    ));
    for name in ["", "{a}b", "a{b"] {
        assert!(matches!(
            client.latch(name).try_set_count(1).await,
            Err(Error::InvalidName { .. })
        ));
    }
    assert_eq!(keyspace(&mut conn).await, before);
    // With tagged names allowed, a name whose key and channel share a slot is taken; one
    // whose channel Redisson would tag differently is not.
    let config = keylatch::Config::builder()
        .url(server.url())
        .hash_tagged_names(true)
        .build()
        .unwrap();
    let tagged = keylatch::Client::connect_with(config).await.unwrap();
    assert!(tagged.latch("a{b").try_set_count(1).await.unwrap());
    assert!(matches!(
        tagged.latch("{a}b").try_set_count(1).await,
        Err(Error::InvalidName { .. })
    ));
    // Keys of another type are refused, untouched.
    let name = unique("latch-wrong");
    let _: () = conn.hset(&name, "f", "1").await.unwrap();
    let wrong = client.latch(&name);
    assert!(matches!(
        wrong.try_set_count(1).await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        wrong.count_down().await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(wrong.count().await, Err(Error::WrongType { .. })));
    assert!(matches!(wrong.delete().await, Err(Error::WrongType { .. })));
    let _: () = conn.set(&name, "x").await.unwrap();
    assert!(matches!(
        wrong.count_down().await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(wrong.wait().await, Err(Error::WrongType { .. })));
    let value: String = conn.get(&name).await.unwrap();
    assert_eq!(value, "x");
}

#[tokio::test]
async fn key_channel_and_messages_are_redissons() {
    let server = server();
    let client = client(&server).await;
    let name = unique("latch-layout");
    let latch = client.latch(&name);
    let channel = format!("redisson_countdownlatch__channel__{{{name}}}");
    assert_eq!(latch.channel(), channel);
    let mut watch = pubsub(&server).await;
    watch.subscribe(&channel).await.unwrap();
    let mut conn = raw(&server).await;
    assert!(latch.try_set_count(2).await.unwrap());
    let value: String = conn.get(&name).await.unwrap();
    assert_eq!(value, "2");
    let ttl: i64 = conn.pttl(&name).await.unwrap();
    assert_eq!(ttl, -1, "Redisson's latch has no expiry");
    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    let exists: bool = conn.exists(&name).await.unwrap();
    assert!(!exists, "zero deletes the key");
    assert!(latch.try_set_count(1).await.unwrap());
    assert!(latch.delete().await.unwrap());
    let mut messages = Vec::new();
    let mut stream = watch.on_message();
    while messages.len() < 4 {
        let message = tokio::time::timeout(PROMPT, stream.next())
            .await
            .expect("a message")
            .unwrap();
        messages.push(message.get_payload::<String>().unwrap());
    }
    // Set: 1 (new count); the second count-down: 0 (zero); set: 1; delete: 1.
    assert_eq!(messages, ["1", "0", "1", "1"]);
}

#[tokio::test]
async fn shutdown_ends_a_wait_with_closed() {
    let server = server();
    let client = client(&server).await;
    let latch = client.latch(&unique("latch-closed"));
    assert!(latch.try_set_count(1).await.unwrap());
    let waiting = tokio::spawn({
        let latch = latch.clone();
        async move { latch.wait().await }
    });
    subscribed(&client, 1).await;
    client.shutdown().await.unwrap();
    let ended = tokio::time::timeout(PROMPT, waiting)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(ended, Err(Error::Closed)), "{ended:?}");
}
