//! The delayed queue on a 3-primary Redis Cluster: a queue on each primary, its keys (Redisson's
//! and keylatch's) in one slot, offers and takes through different clients, a waiting take woken
//! by an earlier offer (sharded pub/sub), the transfer and the reliable mode.
use std::time::Duration;

use keylatch::queue::Utf8;
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
async fn a_queue_on_every_primary_delivers_with_its_keys_in_one_slot() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster");
    let producer = connect(&cluster.seed_url()).await;
    let consumer = connect(&cluster.url()).await;
    let mut ports = Vec::new();
    for i in 0..200 {
        let name = format!("queue-shard{i}");
        let node = cluster.node_for_key(&name).unwrap().port();
        if ports.contains(&node) {
            continue;
        }
        ports.push(node);
        let slot = cluster.keyslot(&name).unwrap();
        for key in [
            format!("redisson_delay_queue_timeout:{{{name}}}"),
            format!("redisson_delay_queue:{{{name}}}"),
            format!("redisson_delay_queue_channel:{{{name}}}"),
            format!("keylatch_queue:{{{name}}}:processing"),
            format!("keylatch_queue:{{{name}}}:dead"),
        ] {
            assert_eq!(cluster.keyslot(&key).unwrap(), slot, "{key}");
        }
        let offers = producer.delayed_queue::<Utf8>(&name).unwrap();
        let takes = consumer.delayed_queue::<Utf8>(&name).unwrap();
        offers
            .offer(&"late".into(), Duration::from_secs(3600))
            .await
            .unwrap();
        let waiting = tokio::spawn({
            let takes = takes.clone();
            async move { takes.take().await }
        });
        let started = tokio::time::Instant::now();
        while consumer.stats().subscribers == 0 {
            assert!(started.elapsed() < PROMPT, "the take never subscribed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // An earlier head: the offer's message wakes the take, long before the fallback poll.
        offers
            .offer(&"soon".into(), Duration::from_millis(200))
            .await
            .unwrap();
        let taken = tokio::time::timeout(PROMPT, waiting)
            .await
            .expect("the take was not woken")
            .unwrap()
            .unwrap();
        assert_eq!(taken, "soon");
        // The transfer and the reliable mode on this primary.
        offers.offer(&"moved".into(), Duration::ZERO).await.unwrap();
        assert_eq!(offers.transfer().await.unwrap().moved, 1);
        let delivery = takes.take_reliably().await.unwrap();
        assert_eq!(delivery.value(), "moved");
        assert!(takes.ack(&delivery).await.unwrap());
        let counts = takes.counts().await.unwrap();
        assert_eq!((counts.delayed, counts.ready, counts.processing), (1, 0, 0));
        offers.destroy().await.unwrap();
    }
    assert_eq!(ports.len(), 3, "a queue on each primary");
    producer.shutdown().await.unwrap();
    consumer.shutdown().await.unwrap();
}
