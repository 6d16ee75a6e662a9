//! The fencing token (the acquisition node's creation zxid) strictly increases across a
//! leader change and across a full ensemble restart (every node stopped and started again
//! on its data), where the zxid's epoch moves on.
//!
//! May import: keylatch-core, keylatch-testkit, keylatch-zookeeper.

use std::time::Duration;

use keylatch_core::DistributedLock;
use keylatch_testkit::ZooKeeperEnsemble;
use keylatch_zookeeper::{ZkClient, ZkConfig};

/// Connects (bounded: the ensemble may still be settling) and takes `tokens` holds in turn.
async fn tokens(url: &str, n: usize) -> Vec<u64> {
    let config = ZkConfig::default().with_session_timeout(Duration::from_secs(10));
    let client = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match ZkClient::connect_with(url, config.clone()).await {
                Ok(client) => return client,
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    })
    .await
    .expect("a session on the ensemble");
    let lock = client.lock("tokens").unwrap();
    let mut tokens = Vec::new();
    for _ in 0..n {
        let guard = tokio::time::timeout(Duration::from_secs(60), lock.lock())
            .await
            .expect("acquired")
            .unwrap();
        tokens.push(guard.fencing_token().unwrap());
        guard.unlock().await.unwrap();
    }
    client.shutdown().await.unwrap();
    tokens
}

fn strictly_increasing(tokens: &[u64]) -> bool {
    tokens.windows(2).all(|w| w[0] < w[1])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_increase_across_a_leader_change_and_a_full_restart() {
    let mut ensemble = tokio::task::block_in_place(ZooKeeperEnsemble::start).unwrap();
    let url = format!("zk://{}", ensemble.connect_string());
    let mut all = tokens(&url, 3).await;
    tokio::task::block_in_place(|| {
        let leader = ensemble.leader().expect("a leader");
        ensemble.kill_node(leader).unwrap();
        ensemble.wait_for_leader(Duration::from_secs(60)).unwrap();
    });
    let after_leader_change = all.len();
    all.extend(tokens(&url, 3).await);
    tokio::task::block_in_place(|| ensemble.restart_all(Duration::from_secs(90)).unwrap());
    let after_restart = all.len();
    all.extend(tokens(&url, 3).await);
    assert!(strictly_increasing(&all), "{all:?}");
    // The epoch (the high 32 bits) moved with each election.
    let epoch = |i: usize| all[i] >> 32;
    assert!(
        epoch(after_leader_change) > epoch(after_leader_change - 1),
        "{all:?}"
    );
    assert!(epoch(after_restart) > epoch(after_restart - 1), "{all:?}");
}
