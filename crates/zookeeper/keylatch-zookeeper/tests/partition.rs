//! One client partitioned from the ensemble while the others keep working: the testkit's
//! `FaultProxy` stands between that client and the server and blackholes its traffic. The
//! partitioned holder's `lost()` fires (by default on disconnection, or by a disconnect bound
//! shorter than its session)
//! before another client gets the lock, which happens once the server expired the session and
//! deleted its node; after the heal the old guard no longer holds and the same client locks
//! again. A partitioned waiter's node goes with its session and the queue moves on. Order is
//! asserted on recorded events, never on times; bounds are correctness bounds.
//!
//! May import: keylatch-testkit, keylatch-zookeeper, keylatch-core, zookeeper-client.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keylatch_core::DistributedLock;
use keylatch_testkit::{Fault, FaultProxy, ZooKeeperServer};
use keylatch_zookeeper::{DisconnectLoss, ZkClient, ZkConfig};
use support::{children, client_with, raw, wait_children};

/// A correctness bound for a session to expire and a loss or a hand-over to be seen, with
/// slack for a loaded machine.
const NOTICED: Duration = Duration::from_secs(40);

/// A client reaching `server` through `proxy` only: a 6 s session, a disconnection noticed
/// within a second (zookeeper-client's connection timeout) and taken as a loss 500 ms later,
/// well before the server can expire the session.
async fn behind(proxy: &FaultProxy) -> ZkClient {
    behind_with(
        proxy,
        Some(DisconnectLoss::After(Duration::from_millis(500))),
    )
    .await
}

/// As [`behind`], with `policy` (`None`: the default).
async fn behind_with(proxy: &FaultProxy, policy: Option<DisconnectLoss>) -> ZkClient {
    let mut config = ZkConfig::default()
        .with_session_timeout(Duration::from_secs(6))
        .with_connection_timeout(Duration::from_secs(1));
    if let Some(policy) = policy {
        config = config.with_disconnect_loss(policy);
    }
    let url = format!("zk://127.0.0.1:{}", proxy.port());
    ZkClient::connect_with(&url, config).await.unwrap()
}

/// What happened, in the order it happened.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<&'static str>>>);

impl Events {
    fn push(&self, event: &'static str) {
        self.0.lock().unwrap().push(event);
    }

    fn list(&self) -> Vec<&'static str> {
        self.0.lock().unwrap().clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_holder_loses_its_hold_before_another_client_gets_it() {
    partitioned_holder(Some(DisconnectLoss::After(Duration::from_millis(500)))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_default_policy_a_partitioned_holder_loses_before_another_client_gets_it() {
    partitioned_holder(None).await;
}

async fn partitioned_holder(policy: Option<DisconnectLoss>) {
    let server = ZooKeeperServer::start().unwrap();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let a = behind_with(&proxy, policy).await;
    let b = client_with(&server, ZkConfig::default()).await;
    let raw = raw(&server).await;
    let path = "/keylatch/partitioned-holder";
    let first_session = a.session_id();

    let guard = a.lock("partitioned-holder").unwrap().lock().await.unwrap();
    let a_node = children(&raw, path).await;
    assert_eq!(a_node.len(), 1);
    let events = Events::default();
    let watching = tokio::spawn({
        let events = events.clone();
        async move {
            guard.lost().await;
            events.push("a lost");
            guard
        }
    });

    proxy.set(Fault::Blackhole);
    let next = tokio::time::timeout(NOTICED, b.lock("partitioned-holder").unwrap().lock())
        .await
        .expect("b gets the lock once a's session expired")
        .unwrap();
    events.push("b acquired");
    let guard = tokio::time::timeout(NOTICED, watching)
        .await
        .expect("a's loss is noticed")
        .unwrap();
    // a stopped (lost) before b started: no overlap.
    assert_eq!(events.list(), ["a lost", "b acquired"]);
    assert!(guard.is_lost());
    // a's node went with its session; b's is the only one.
    let now = children(&raw, path).await;
    assert_eq!(now.len(), 1);
    assert_ne!(now, a_node, "a's node is gone");

    // Healed: the old guard holds nothing, and a (in a new session) locks again.
    proxy.set(Fault::Pass);
    proxy.reset_connections();
    assert!(
        guard.unlock().await.is_err(),
        "the lost guard holds nothing"
    );
    let renewed = tokio::time::timeout(NOTICED, async {
        while a.session_id().is_none() || a.session_id() == first_session {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(renewed.is_ok(), "a opened a new session after the heal");
    next.unlock().await.unwrap();
    let again = tokio::time::timeout(NOTICED, a.lock("partitioned-holder").unwrap().lock())
        .await
        .expect("a locks again")
        .unwrap();
    assert!(!again.is_lost());
    again.unlock().await.unwrap();
    wait_children(&raw, path, 0).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_waiter_leaves_the_queue_with_its_session() {
    let server = ZooKeeperServer::start().unwrap();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let a = behind(&proxy).await;
    let b = client_with(&server, ZkConfig::default()).await;
    let c = client_with(&server, ZkConfig::default()).await;
    let raw = raw(&server).await;
    let path = "/keylatch/partitioned-waiter";

    let held = b.lock("partitioned-waiter").unwrap().lock().await.unwrap();
    let b_node = children(&raw, path).await;
    let events = Events::default();
    // a queues behind b, then c behind a.
    let a_waits = tokio::spawn({
        let (a, events) = (a.clone(), events.clone());
        async move {
            let acquired = a.lock("partitioned-waiter").unwrap().lock().await;
            if acquired.is_ok() {
                events.push("a acquired");
            }
            acquired
        }
    });
    wait_children(&raw, path, 2).await;
    let a_node: Vec<String> = children(&raw, path)
        .await
        .into_iter()
        .filter(|n| !b_node.contains(n))
        .collect();
    assert_eq!(a_node.len(), 1);
    let c_waits = tokio::spawn({
        let (c, events) = (c.clone(), events.clone());
        async move {
            let guard = c.lock("partitioned-waiter").unwrap().lock().await.unwrap();
            events.push("c acquired");
            guard
        }
    });
    wait_children(&raw, path, 3).await;

    proxy.set(Fault::Blackhole);
    // a's node goes with its session: b holds, c waits.
    wait_children(&raw, path, 2).await;
    assert!(!children(&raw, path).await.contains(&a_node[0]));
    events.push("b released");
    held.unlock().await.unwrap();
    let c_guard = tokio::time::timeout(NOTICED, c_waits)
        .await
        .expect("the queue moved on to c")
        .unwrap();
    assert_eq!(events.list(), ["b released", "c acquired"]);
    events.push("c released");
    c_guard.unlock().await.unwrap();

    // Healed: a's wait ends, with an error or (after c) the lock.
    proxy.set(Fault::Pass);
    proxy.reset_connections();
    let a_result = tokio::time::timeout(NOTICED, a_waits)
        .await
        .expect("a's wait ends")
        .unwrap();
    if let Ok(guard) = a_result {
        guard.unlock().await.unwrap();
        assert_eq!(
            events.list(),
            ["b released", "c acquired", "c released", "a acquired"]
        );
    }
    wait_children(&raw, path, 0).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    c.shutdown().await.unwrap();
}

/// A release sent while the holder's connection is cut: the library gives up on the silent
/// connection ("no response from connection"), which is no reason to give up the delete: it is
/// retried and sent once the connection is back within the session, so the node does not stay
/// until the session ends (the lock idle meanwhile).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_cut_off_from_the_server_is_finished_once_the_connection_is_back() {
    let server = ZooKeeperServer::start().unwrap();
    let proxy = FaultProxy::start(server.port()).unwrap();
    // A long session and no disconnect bound: the hold and the session outlive the cut.
    let config = ZkConfig::default()
        .with_session_timeout(Duration::from_secs(30))
        .with_connection_timeout(Duration::from_secs(1));
    let url = format!("zk://127.0.0.1:{}", proxy.port());
    let a = ZkClient::connect_with(&url, config).await.unwrap();
    let raw = raw(&server).await;
    let path = "/keylatch/cut-release";
    let session = a.session_id();

    let guard = a.lock("cut-release").unwrap().lock().await.unwrap();
    assert_eq!(children(&raw, path).await.len(), 1);
    proxy.set(Fault::Blackhole);
    // The release cannot reach the server: its foreground tries run out.
    let released = tokio::time::timeout(NOTICED, guard.unlock())
        .await
        .expect("the release returns while cut off");
    assert!(
        released.is_err(),
        "a release that reached no server: {released:?}"
    );
    assert_eq!(
        children(&raw, path).await.len(),
        1,
        "the node is still there"
    );
    // The cut outlasts the release's timeout.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        children(&raw, path).await.len(),
        1,
        "the node is still there"
    );
    proxy.set(Fault::Pass);
    // Back within the session: the retried delete removes the node.
    wait_children(&raw, path, 0).await;
    assert_eq!(
        a.session_id(),
        session,
        "the same session: the node did not go with it"
    );
    let again = a.lock("cut-release").unwrap().lock().await.unwrap();
    again.unlock().await.unwrap();
    assert!(children(&raw, path).await.is_empty());
}
