//! Session loss: an expired session, or a disconnection longer than the bound, marks every
//! hold of the client lost; after an expiry the client opens a new session and locks again.
//! Each test has its own server (they pause or kill it).

mod support;

use std::time::Duration;

use keylatch_core::{DistributedLock, LossReason};
use keylatch_testkit::ZooKeeperServer;
use keylatch_zookeeper::{DisconnectLoss, ZkConfig};
use support::{children, client_with, raw, url, wait_children};

/// A correctness bound for loss to be noticed, with slack for a loaded machine.
const NOTICED: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_session_marks_its_holds_lost() {
    let server = ZooKeeperServer::start().unwrap();
    let config = ZkConfig::default()
        .with_session_timeout(Duration::from_secs(2))
        .with_disconnect_loss(DisconnectLoss::OnlyOnExpiry);
    let a = client_with(&server, config).await;
    let guard = a.lock("expiring").unwrap().lock().await.unwrap();
    assert!(!guard.is_lost());
    // Paused longer than the session lasts: the client gives the session up (Expired).
    server.pause().unwrap();
    let lost = tokio::time::timeout(NOTICED, guard.lost()).await;
    server.resume().unwrap();
    assert!(lost.is_ok(), "the hold was not marked lost");
    assert!(guard.is_lost());
    // The server expires the session too and deletes its node: another client gets the lock.
    let b = client_with(&server, ZkConfig::default()).await;
    let lock = b.lock("expiring").unwrap();
    let next = tokio::time::timeout(NOTICED, lock.lock())
        .await
        .expect("the expired session's node is deleted")
        .unwrap();
    assert!(next.fencing_token() > guard.fencing_token());
    // The old guard's release reports that it no longer holds anything.
    assert!(guard.unlock().await.is_err());
    next.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnection_longer_than_the_bound_marks_holds_lost_and_frees_the_node() {
    let mut server = ZooKeeperServer::start().unwrap();
    let config = ZkConfig::default()
        .with_session_timeout(Duration::from_secs(10))
        .with_disconnect_loss(DisconnectLoss::After(Duration::from_millis(500)));
    let a = client_with(&server, config).await;
    let session = a.session_id();
    let guard = a.lock("bounded").unwrap().lock().await.unwrap();
    server.kill();
    tokio::time::timeout(NOTICED, guard.lost())
        .await
        .expect("lost once disconnected longer than the bound");
    server.restart().unwrap();
    // The session survived the restart; its node is deleted once it is back.
    let raw = raw(&server).await;
    wait_children(&raw, "/keylatch/bounded", 0).await;
    assert_eq!(a.session_id(), session);
    let again = a.lock("bounded").unwrap().lock().await.unwrap();
    assert!(!again.is_lost());
    again.unlock().await.unwrap();
    assert!(children(&raw, "/keylatch/bounded").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_expiry_the_same_client_opens_a_new_session_and_locks_again() {
    let server = ZooKeeperServer::start().unwrap();
    let config = ZkConfig::default()
        .with_session_timeout(Duration::from_secs(2))
        .with_disconnect_loss(DisconnectLoss::OnlyOnExpiry);
    // Under a chroot: the new session applies it too.
    let a =
        keylatch_zookeeper::ZkClient::connect_with(&format!("{}/renewing", url(&server)), config)
            .await
            .unwrap();
    let first_session = a.session_id().expect("open");
    let lock = a.lock("renewed").unwrap();
    let guard = lock.lock().await.unwrap();
    server.pause().unwrap();
    let lost = tokio::time::timeout(NOTICED, guard.lost()).await;
    server.resume().unwrap();
    assert!(lost.is_ok(), "the hold was not marked lost");
    assert_eq!(guard.loss_reason(), Some(LossReason::SessionExpired));

    // A new session comes (a correctness bound, no timing asserted).
    let deadline = tokio::time::Instant::now() + NOTICED;
    while a.session_id() == Some(first_session) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no new session after the expiry"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(a.session_id().is_some());

    // The same client and handle lock again: a live hold that excludes others.
    let again = tokio::time::timeout(NOTICED, lock.lock())
        .await
        .expect("the expired session's node is deleted")
        .unwrap();
    assert!(!again.is_lost());
    assert!(again.fencing_token() > guard.fencing_token());
    let raw = raw(&server).await;
    assert_eq!(children(&raw, "/renewing/keylatch/renewed").await.len(), 1);
    let b = client_with(&server, ZkConfig::default()).await;
    let other = b.lock("/renewing/keylatch/renewed").unwrap();
    assert!(other.try_lock().await.unwrap().is_none());
    assert!(!again.is_lost());
    again.unlock().await.unwrap();
    assert!(
        children(&raw, "/renewing/keylatch/renewed")
            .await
            .is_empty()
    );
    // The old guard's release reports that it no longer holds anything.
    assert!(guard.unlock().await.is_err());
    a.shutdown().await.unwrap();
}
