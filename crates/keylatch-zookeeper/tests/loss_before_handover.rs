//! Loss before hand-over: with the default [`DisconnectLoss`] a holder whose server stops
//! answering (a SIGSTOPped JVM) sees `lost()` before the server could expire its session,
//! and a waiting client is granted the lock only after that.
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
use keylatch_testkit::ZooKeeperServer;
use keylatch_zookeeper::{DisconnectLoss, ZkConfig};
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
