//! The count-down latch on a 3-primary Redis Cluster: a latch on each primary, set and counted
//! down through one client, waited on through another and released by the zero-count message
//! (sharded pub/sub: the channel hashes to the latch's own slot).
use std::time::Duration;

use keylatch::{Client, Config};
use keylatch_testkit::RedisCluster;

/// A fallback poll so long that only a message can explain a prompt wake-up.
const LONG_POLL: Duration = Duration::from_secs(60);
const PROMPT: Duration = Duration::from_secs(10);

async fn connect(url: &str) -> Client {
    let config = Config::builder()
        .url(url)
        .fallback_poll(LONG_POLL)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .expect("config");
    Client::connect_with(config).await.expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_on_every_primary_releases_its_waiters() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster");
    let setter = connect(&cluster.seed_url()).await;
    let waiter = connect(&cluster.url()).await;
    assert!(waiter.stats().sharded_pubsub);
    let mut ports = Vec::new();
    for i in 0..200 {
        let name = format!("latch-shard{i}");
        let node = cluster.node_for_key(&name).unwrap().port();
        if ports.contains(&node) {
            continue;
        }
        ports.push(node);
        let channel = format!("redisson_countdownlatch__channel__{{{name}}}");
        assert_eq!(
            cluster.keyslot(&name).unwrap(),
            cluster.keyslot(&channel).unwrap()
        );
        let latch = setter.latch(&name);
        assert!(latch.try_set_count(2).await.unwrap());
        assert!(!latch.try_set_count(2).await.unwrap());
        let waiting = tokio::spawn({
            let latch = waiter.latch(&name);
            async move { latch.wait().await }
        });
        let started = tokio::time::Instant::now();
        while waiter.stats().subscribers == 0 {
            assert!(started.elapsed() < PROMPT, "the waiter never subscribed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(latch.count_down().await.unwrap(), 1);
        assert_eq!(waiter.latch(&name).count().await.unwrap(), 1);
        assert_eq!(latch.count_down().await.unwrap(), 0);
        tokio::time::timeout(PROMPT, waiting)
            .await
            .unwrap_or_else(|_| panic!("{name} (node {node}): the waiter was not woken"))
            .unwrap()
            .unwrap();
        assert!(!latch.exists().await.unwrap());
        // Until its subscription lingers out, the next waiter would join it: wait.
        let started = tokio::time::Instant::now();
        while waiter.stats().subscribers != 0 {
            assert!(started.elapsed() < PROMPT, "the waiter stayed subscribed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if ports.len() == 3 {
            break;
        }
    }
    assert_eq!(ports.len(), 3, "a latch on every primary");
    setter.shutdown().await.unwrap();
    waiter.shutdown().await.unwrap();
}
