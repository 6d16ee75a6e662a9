//! The count-down latch through `redis+sentinel://`: set, counted down and waited on through
//! the sentinels' primary, and a waiter that waits across a `SENTINEL FAILOVER` released by a
//! count-down on the new primary.
use std::time::Duration;

use keylatch::{Client, Config};
use keylatch_testkit::SentinelSet;

/// A fallback poll so long that only a message (or the hub's wake-up after it reconnects)
/// can explain a prompt wake-up.
const LONG_POLL: Duration = Duration::from_secs(60);
const PROMPT: Duration = Duration::from_secs(20);

async fn connect(set: &SentinelSet) -> Client {
    let config = Config::builder()
        .url(set.url())
        .fallback_poll(LONG_POLL)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .build()
        .expect("config");
    Client::connect_with(config)
        .await
        .expect("connect through the sentinels")
}

async fn subscribed(client: &Client) {
    let started = tokio::time::Instant::now();
    while client.stats().subscribers == 0 {
        assert!(started.elapsed() < PROMPT, "the waiter never subscribed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_through_the_sentinels_and_across_a_failover() {
    let set = tokio::task::spawn_blocking(SentinelSet::start)
        .await
        .unwrap()
        .expect("start a sentinel set");
    let first_primary = set.primary_port().unwrap();
    let setter = connect(&set).await;
    let waiter = connect(&set).await;

    let latch = setter.latch("app:latch");
    assert!(latch.try_set_count(2).await.unwrap());
    let waiting = tokio::spawn({
        let latch = waiter.latch("app:latch");
        async move { latch.wait().await }
    });
    subscribed(&waiter).await;
    assert_eq!(latch.count_down().await.unwrap(), 1);
    assert_eq!(latch.count_down().await.unwrap(), 0);
    tokio::time::timeout(PROMPT, waiting)
        .await
        .expect("the waiter was not released")
        .unwrap()
        .unwrap();

    // Waiting across the failover.
    let across = setter.latch("app:across");
    assert!(across.try_set_count(1).await.unwrap());
    let waiting = tokio::spawn({
        let latch = waiter.latch("app:across");
        async move { latch.wait().await }
    });
    subscribed(&waiter).await;
    let (set, took) = tokio::task::spawn_blocking(move || {
        let took = set.failover().expect("failover");
        (set, took)
    })
    .await
    .unwrap();
    assert_ne!(set.primary_port().unwrap(), first_primary);
    println!("failover in {took:?}");
    // The setter follows the new primary; its count-down there releases the waiter.
    let mut attempts = 0;
    loop {
        attempts += 1;
        match across.count_down().await {
            Ok(left) => {
                assert_eq!(left, 0);
                break;
            }
            Err(e) if attempts < 100 && e.is_transient() => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("the setter did not follow the new primary: {e}"),
        }
    }
    tokio::time::timeout(PROMPT, waiting)
        .await
        .expect("the waiter was not released after the failover")
        .unwrap()
        .unwrap();
    assert!(!across.exists().await.unwrap());
    setter.shutdown().await.unwrap();
    waiter.shutdown().await.unwrap();
}
