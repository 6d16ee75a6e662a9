//! Redis Cluster: every primitive across the shards of a 3-primary cluster, reached by a
//! `redis+cluster://` seed list or by the URL of any one node; wake-ups by sharded pub/sub;
//! renewals grouped per node; holds and waits through slot migration and failover.
use std::time::{Duration, Instant};

use keylatch::{Client, Config};
use keylatch_testkit::RedisCluster;
use keylatch_tests::every::{LONG_LEASE, exercise_every_primitive};

async fn cluster() -> RedisCluster {
    tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster")
}

fn config(url: &str) -> Config {
    Config::builder()
        .url(url)
        .fallback_poll(LONG_LEASE)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .expect("config")
}

async fn connect(url: &str) -> Client {
    Client::connect_with(config(url))
        .await
        .expect("connect to the cluster")
}

/// Keys on every node: the names used hash to slots of all three primaries.
fn names_on_every_primary(cluster: &RedisCluster, prefix: &str) -> Vec<String> {
    let mut ports = Vec::new();
    let mut names = Vec::new();
    for i in 0..200 {
        let name = format!("{prefix}{i}");
        let port = cluster.node_for_key(&name).unwrap().port();
        if !ports.contains(&port) {
            ports.push(port);
            names.push(name);
        }
        if ports.len() == 3 {
            break;
        }
    }
    assert_eq!(ports.len(), 3, "names on every primary");
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_primitive_on_every_shard() {
    let cluster = cluster().await;
    // One client by a seed list, the other by one node's plain URL (cluster mode detected).
    let holder = connect(&cluster.seed_url()).await;
    let waiter = connect(&cluster.url()).await;
    assert!(holder.stats().sharded_pubsub);
    assert!(waiter.stats().sharded_pubsub);
    for name in names_on_every_primary(&cluster, "app:shard") {
        let started = Instant::now();
        let ran = exercise_every_primitive(&holder, &waiter, &name).await;
        assert_eq!(ran, 6);
        println!(
            "{name} (node {}): every primitive in {:?}",
            cluster.node_for_key(&name).unwrap().port(),
            started.elapsed()
        );
    }
    holder.shutdown().await.unwrap();
    waiter.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_take_one_round_trip_per_node() {
    let cluster = cluster().await;
    let client = Client::connect_with(
        Config::builder()
            .url(cluster.seed_url())
            .watchdog_timeout(Duration::from_millis(900))
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    let mut guards = Vec::new();
    for i in 0..300 {
        guards.push(client.lock(&format!("app:renew{i}")).lock().await.unwrap());
    }
    let slots: std::collections::BTreeSet<u16> = (0..300)
        .map(|i| cluster.keyslot(&format!("app:renew{i}")).unwrap())
        .collect();
    let before = client.stats();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = client.stats();
    let ticks = after.watchdog.ticks - before.watchdog.ticks;
    let renewed = after.watchdog.renewed_keys - before.watchdog.renewed_keys;
    let calls = after.watchdog.renew_calls - before.watchdog.renew_calls;
    let trips = after.batch_round_trips - before.batch_round_trips;
    println!(
        "300 holds in {} slots over {} primaries: {ticks} ticks, {renewed} renewed, \
         {calls} script calls ({:.1} per tick), {trips} round trips ({:.2} per tick)",
        slots.len(),
        after.cluster_primaries,
        calls as f64 / ticks.max(1) as f64,
        trips as f64 / ticks.max(1) as f64,
    );
    assert_eq!(after.cluster_primaries, 3);
    assert!(ticks >= 2, "{ticks} ticks");
    assert!(
        renewed >= 600,
        "every hold renewed at every tick: {renewed}"
    );
    // One call per slot, one round trip per node.
    assert!(calls <= ticks * slots.len() as u64, "{calls} calls");
    assert!(trips <= ticks * 3, "{trips} round trips in {ticks} ticks");
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    client.shutdown().await.unwrap();
}
