//! The multi-value lock on a 3-primary cluster: its one key may live in any slot, and the
//! channel `redisson_lock__channel:{group}` shares it, so groups on every shard take values
//! all-or-nothing, wake waiters (sharded pub/sub) and have every value renewed.
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch::{Client, Config};
use keylatch_testkit::RedisCluster;

async fn connect(url: &str, watchdog: Duration) -> Client {
    let config = Config::builder()
        .url(url)
        .watchdog_timeout(watchdog)
        .fallback_poll(Duration::from_secs(60))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .expect("config");
    Client::connect_with(config).await.expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_on_every_shard_take_values_all_or_nothing() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster");
    let client = connect(&cluster.seed_url(), Duration::from_secs(1)).await;
    let slow = connect(&cluster.seed_url(), Duration::from_secs(30)).await;
    let mut groups = Vec::new();
    let mut ports = Vec::new();
    for i in 0..200 {
        let group = keylatch_tests::unique(&format!("mv-shard{i}"));
        let port = cluster.node_for_key(&group).unwrap().port();
        if !ports.contains(&port) {
            ports.push(port);
            groups.push(group);
        }
    }
    assert_eq!(groups.len(), 3, "a group on each primary");
    for group in &groups {
        let ab = client
            .multi_value_lock(group, ["a", "b"])
            .lock()
            .await
            .unwrap();
        let bc = client.multi_value_lock(group, ["b", "c"]);
        assert!(bc.try_lock().await.unwrap().is_none());
        let cd = client
            .multi_value_lock(group, ["c", "d"])
            .try_lock()
            .await
            .unwrap();
        cd.expect("disjoint").unlock().await.unwrap();
        // Held past its 1 s watchdog lease: renewed on this shard.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            bc.try_lock().await.unwrap().is_none(),
            "b's hold was not renewed"
        );
        ab.unlock().await.unwrap();
        // A 30 s lease and a 60 s fallback poll: only a wake-up lets the waiter in in time.
        let ab = slow
            .multi_value_lock(group, ["a", "b"])
            .lock()
            .await
            .unwrap();
        let bc = slow.multi_value_lock(group, ["b", "c"]);
        let waiting = tokio::spawn(async move {
            bc.try_lock_for(Duration::from_secs(30), Some(Duration::from_secs(30)))
                .await
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        ab.unlock().await.unwrap();
        // Within the 30 s lease the waiter could otherwise wait for: a wake-up let it in.
        let got = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the waiter was not woken")
            .unwrap()
            .unwrap();
        got.expect("taken").unlock().await.unwrap();
        let node = cluster.node_for_key(group).unwrap();
        let mut conn = keylatch::redis::Client::open(node.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let exists: bool = conn.exists(group).await.unwrap();
        assert!(!exists, "the group key remains on its shard");
    }
}
