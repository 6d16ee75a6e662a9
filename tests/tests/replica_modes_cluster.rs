//! "All connected replicas" acknowledgement (`Config::replicas_all_connected`) on a Redis
//! Cluster: the replica count is the primary of the lock's slot's, asked per slot; with that
//! replica paused, an acquisition fails with `NotReplicated { acknowledged: 0, wanted: 1 }` and
//! leaves nothing behind.
use std::time::Duration;

use keylatch::{AcquireOptions, Client, Config, Error};
use keylatch_testkit::RedisCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_connected_replicas_on_a_cluster() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster");
    let config = |all: bool| {
        let builder = Config::builder()
            .url(cluster.seed_url())
            .response_timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(2));
        let builder = if all {
            builder.replicas_all_connected(Duration::from_millis(1500))
        } else {
            builder
        };
        builder.build().unwrap()
    };
    let acked = Client::connect_with(config(true)).await.unwrap();
    let plain = Client::connect_with(config(false)).await.unwrap();
    let name = "app:cluster-all";
    let once = || async {
        let guard = acked
            .lock(name)
            .acquire(AcquireOptions::new().with_wait(Duration::ZERO))
            .await?
            .expect("free");
        guard.unlock().await
    };
    // The first acquisition on the slot asks its primary how many replicas it has.
    once().await.expect("acknowledged by the slot's replica");
    let replica = {
        let primary = cluster.node_for_key(name).unwrap();
        cluster.replicas_of(primary).unwrap()[0]
    };
    replica.pause().unwrap();
    let err = once().await.expect_err("the only replica is paused");
    assert!(
        matches!(
            err,
            Error::NotReplicated {
                acknowledged: 0,
                wanted: 1,
                ..
            }
        ),
        "{err:?}"
    );
    let free = plain.lock(name).try_lock().await.unwrap();
    assert!(free.is_some(), "the refused acquisition left a hold behind");
    free.unwrap().unlock().await.unwrap();
    replica.resume().unwrap();
    acked.shutdown().await.unwrap();
    plain.shutdown().await.unwrap();
}
