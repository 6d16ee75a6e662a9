//! A three-node ensemble: a held lock survives the leader's death (with a `DisconnectLoss`
//! that lets it survive a short reconnection), and fencing tokens keep increasing across the
//! leader change.

use std::time::Duration;

use keylatch_core::DistributedLock;
use keylatch_testkit::ZooKeeperEnsemble;
use keylatch_zookeeper::{DisconnectLoss, ZkClient, ZkConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_increase_across_a_leader_change() {
    let mut ensemble = ZooKeeperEnsemble::start().unwrap();
    let url = format!("zk://{}", ensemble.connect_string());
    // The hold survives a reconnection within 6 s: safe, as the connection is declared lost
    // at most 9/8 of 2 s after the last reply, and 2.25 s + 6 s < the 10 s session.
    let config = ZkConfig::default()
        .with_session_timeout(Duration::from_secs(10))
        .with_connection_timeout(Duration::from_secs(2))
        .with_disconnect_loss(DisconnectLoss::After(Duration::from_secs(6)));
    let client = ZkClient::connect_with(&url, config).await.unwrap();
    let lock = client.lock("ensemble").unwrap();
    let before = lock.lock().await.unwrap();
    let first = before.fencing_token().unwrap();
    let leader = ensemble.leader().expect("a leader");
    tokio::task::block_in_place(|| {
        ensemble.kill_node(leader).unwrap();
        ensemble.wait_for_leader(Duration::from_secs(60)).unwrap();
    });
    // The session moves to a surviving node; the hold is not lost.
    assert!(!before.is_lost());
    tokio::time::timeout(Duration::from_secs(30), before.unlock())
        .await
        .expect("released after the failover")
        .unwrap();
    let after = tokio::time::timeout(Duration::from_secs(30), lock.lock())
        .await
        .expect("acquired after the failover")
        .unwrap();
    let second = after.fencing_token().unwrap();
    assert!(second > first, "{second} after {first}");
    after.unlock().await.unwrap();
    client.shutdown().await.unwrap();
}
