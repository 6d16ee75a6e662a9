//! Redisson and keylatch on one count-down latch: a count set and counted down by Redisson's
//! scripts releases keylatch's waiters (by Redisson's zero-count message), and one set and
//! counted down by keylatch releases Redisson's. The Redisson side runs Redisson's scripts with
//! Redisson's arguments (`keylatch_tests::redisson`).
use std::time::Duration;

use keylatch_tests::redisson::RedissonLatch;
use keylatch_tests::{client_with, eventually, raw, server, server_channels, unique};

/// A fallback poll so long that only a message can explain a prompt wake-up.
const LONG_POLL: Duration = Duration::from_secs(60);
const PROMPT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn redisson_counts_down_and_keylatch_waits() {
    let server = server();
    let client = client_with(&server, Duration::from_secs(30), LONG_POLL).await;
    let name = unique("latch-r2k");
    let mut redisson = RedissonLatch::new(&server.url(), &name).await;
    assert!(redisson.try_set_count(2).await);
    let latch = client.latch(&name);
    assert_eq!(latch.channel(), redisson.channel);
    assert!(
        !latch.try_set_count(5).await.unwrap(),
        "Redisson's latch exists"
    );
    assert_eq!(latch.count().await.unwrap(), 2);
    let waiting = tokio::spawn({
        let latch = latch.clone();
        async move { latch.wait().await }
    });
    let subscribed = eventually(PROMPT, || async { client.stats().subscribers == 1 }).await;
    assert!(subscribed, "the waiter never subscribed");
    redisson.count_down().await;
    assert_eq!(latch.count().await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "released at count 1");
    redisson.count_down().await;
    tokio::time::timeout(PROMPT, waiting)
        .await
        .expect("Redisson's zero-count message did not wake keylatch's waiter")
        .unwrap()
        .unwrap();
    assert!(!latch.exists().await.unwrap());
}

#[tokio::test]
async fn keylatch_counts_down_and_redisson_waits() {
    let server = server();
    let client = client_with(&server, Duration::from_secs(30), LONG_POLL).await;
    let name = unique("latch-k2r");
    let latch = client.latch(&name);
    assert!(latch.try_set_count(2).await.unwrap());
    let mut redisson = RedissonLatch::new(&server.url(), &name).await;
    assert!(!redisson.try_set_count(7).await, "keylatch's latch exists");
    assert_eq!(redisson.count().await, 2);
    // Redisson's await times out while the count is above zero.
    assert!(!redisson.await_zero(Duration::from_millis(300)).await);
    let channel = redisson.channel.clone();
    let waiting = tokio::spawn(async move { redisson.await_zero(PROMPT).await });
    // Redisson's waiter is subscribed before the count-downs: only the zero-count message can
    // release it.
    let mut conn = raw(&server).await;
    let started = tokio::time::Instant::now();
    while server_channels(&mut conn, &channel).await == 0 {
        assert!(
            started.elapsed() < PROMPT,
            "Redisson's waiter never subscribed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(latch.count_down().await.unwrap(), 1);
    assert_eq!(latch.count_down().await.unwrap(), 0);
    assert!(
        waiting.await.unwrap(),
        "keylatch's count-down did not release Redisson's await"
    );
    // Reached zero: Redisson may set it again, and keylatch reads it.
    let mut redisson = RedissonLatch::new(&server.url(), &name).await;
    assert!(redisson.try_set_count(1).await);
    assert_eq!(latch.count().await.unwrap(), 1);
    latch.count_down().await.unwrap();
    assert_eq!(redisson.count().await, 0);
}
