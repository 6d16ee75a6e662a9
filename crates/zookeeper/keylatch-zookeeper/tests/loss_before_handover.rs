//! Loss before hand-over: with the default [`DisconnectLoss`] a holder whose server stops
//! answering (a SIGSTOPped JVM) sees `lost()` before the server could expire its session,
//! and a waiting client is granted the lock only after that: on a standalone server (which
//! hands over once it resumes), and on a three-node ensemble whose other two nodes expire the
//! holder's session and hand the lock on while the holder's node is still paused.
//!
//! The expiry instant is bounded from below by the test, not by the code under test: a
//! request of the holder's session sent at `sent` was answered, so the server touched the
//! session no earlier than `sent`, and expires it no earlier than `sent + T` (T the negotiated
//! session timeout; a paused server expires nothing). The assertions are on that order; the
//! times are printed for docs/zookeeper-notes.md, never asserted.
//!
//! May import: keylatch-testkit, keylatch-zookeeper, keylatch-core.

mod support;

use std::time::Duration;

use keylatch_core::{DistributedLock, LossReason};
use keylatch_testkit::{ZooKeeperEnsemble, ZooKeeperServer};
use keylatch_zookeeper::{DisconnectLoss, ZkClient, ZkConfig};
use support::{client_with, raw, wait_children};
use tokio::time::Instant;

/// A correctness bound for a hand-over after the server resumes, with slack for a loaded
/// machine.
const NOTICED: Duration = Duration::from_secs(60);

/// The holder's session timeout asked for (the test server grants 1 s to 60 s).
const HOLDER_SESSION: Duration = Duration::from_secs(4);

async fn run(policy: Option<DisconnectLoss>) {
    let server = ZooKeeperServer::start().unwrap();
    let mut config = ZkConfig::default().with_session_timeout(HOLDER_SESSION);
    if let Some(policy) = policy {
        config = config.with_disconnect_loss(policy);
    }
    let a = client_with(&server, config).await;
    // The waiter's session outlives the pause.
    let b = client_with(
        &server,
        ZkConfig::default().with_session_timeout(Duration::from_secs(40)),
    )
    .await;
    let name = "handed-over";
    let guard = a.lock(name).unwrap().lock().await.unwrap();
    let waiter = b.lock(name).unwrap();
    let waiting = tokio::spawn(async move {
        let next = waiter.lock().await;
        (Instant::now(), next)
    });
    // Until the waiter's node is queued behind the holder's.
    let raw = raw(&server).await;
    wait_children(&raw, &format!("/keylatch/{name}"), 2).await;
    drop(raw);

    // One answered request on the holder's session, then the server stops.
    let probe = a.lock("probe").unwrap().try_lock().await.unwrap().unwrap();
    let sent = Instant::now();
    probe.unlock().await.unwrap();
    server.pause().unwrap();
    let timeout = a.session_timeout();
    let expiry_floor = sent + timeout;

    let lost_at = tokio::time::timeout(timeout * 3, guard.lost())
        .await
        .map(|()| Instant::now());
    // Keep the server paused past the floor, so a late loss shows as one.
    tokio::time::sleep_until(expiry_floor + Duration::from_millis(500)).await;
    server.resume().unwrap();
    let lost_at = lost_at.expect("lost() did not fire while the server was paused");
    eprintln!(
        "loss_before_handover: policy {policy:?}: lost() {:?} after the last answered request \
         was sent; negotiated session timeout {timeout:?}; reason {:?}",
        lost_at - sent,
        guard.loss_reason(),
    );
    assert!(
        lost_at < expiry_floor,
        "lost() fired {:?} after the last contact, not before the session could expire ({timeout:?})",
        lost_at - sent
    );
    assert!(matches!(
        guard.loss_reason(),
        Some(LossReason::Disconnected { .. })
    ));

    let (granted_at, next) = tokio::time::timeout(NOTICED, waiting)
        .await
        .expect("the waiter is granted the lock once the holder's node is gone")
        .unwrap();
    let next = next.unwrap();
    eprintln!(
        "loss_before_handover: the waiter was granted the lock {:?} after lost()",
        granted_at - lost_at
    );
    assert!(granted_at > lost_at);
    assert!(next.fencing_token() > guard.fencing_token());
    next.unlock().await.unwrap();
    let _ = guard.unlock().await;
    b.shutdown().await.unwrap();
    let _ = a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_server_makes_lost_fire_before_the_session_could_expire() {
    assert_eq!(DisconnectLoss::default(), DisconnectLoss::OnDisconnect);
    run(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_an_ensemble_the_lock_passes_on_only_after_the_paused_holder_saw_lost() {
    let ensemble = tokio::task::block_in_place(ZooKeeperEnsemble::start).unwrap();
    let leader = ensemble.leader().expect("a leader");
    // The holder talks to one follower only, the waiter to the two other nodes.
    let paused = (leader + 1) % 3;
    let others: Vec<String> = (0..3)
        .filter(|i| *i != paused)
        .map(|i| ensemble.node(i).unwrap().connect_string())
        .collect();
    let holder_node = ensemble.node(paused).unwrap();
    let a = ZkClient::connect_with(
        &format!("zk://{}", holder_node.connect_string()),
        ZkConfig::default().with_session_timeout(HOLDER_SESSION),
    )
    .await
    .unwrap();
    let b = ZkClient::connect_with(
        &format!("zk://{}", others.join(",")),
        ZkConfig::default().with_session_timeout(Duration::from_secs(40)),
    )
    .await
    .unwrap();
    let name = "handed-over-by-the-ensemble";
    let guard = a.lock(name).unwrap().lock().await.unwrap();
    let waiter = b.lock(name).unwrap();
    let waiting = tokio::spawn(async move {
        let next = waiter.lock().await;
        (Instant::now(), next)
    });
    let raw = raw(ensemble.node(leader).unwrap()).await;
    wait_children(&raw, &format!("/keylatch/{name}"), 2).await;

    let probe = a.lock("probe").unwrap().try_lock().await.unwrap().unwrap();
    let sent = Instant::now();
    probe.unlock().await.unwrap();
    holder_node.pause().unwrap();
    let timeout = a.session_timeout();
    let expiry_floor = sent + timeout;
    let lost_at = tokio::time::timeout(timeout * 3, guard.lost())
        .await
        .map(|()| Instant::now());
    // The two running nodes expire the holder's session and hand the lock on meanwhile.
    let granted = tokio::time::timeout(NOTICED, waiting).await;
    holder_node.resume().unwrap();
    let lost_at = lost_at.expect("lost() did not fire while the holder's node was paused");
    let (granted_at, next) = granted
        .expect("the waiter is granted the lock once the session expired")
        .unwrap();
    let next = next.unwrap();
    eprintln!(
        "loss_before_handover: ensemble: lost() {:?} and the waiter granted {:?} after the last \
         answered request was sent; negotiated session timeout {timeout:?}",
        lost_at - sent,
        granted_at - sent,
    );
    assert!(
        lost_at < expiry_floor,
        "lost() fired {:?} after the last contact, not before the session could expire ({timeout:?})",
        lost_at - sent
    );
    assert!(
        granted_at > lost_at,
        "the lock passed on before lost() fired"
    );
    assert!(next.fencing_token() > guard.fencing_token());
    next.unlock().await.unwrap();
    let _ = guard.unlock().await;
    b.shutdown().await.unwrap();
    let _ = a.shutdown().await;
}
