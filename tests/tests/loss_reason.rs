//! `loss_reason()` says why a hold was lost: a fixed lease that ran out, a hold the server no
//! longer has (deleted, force-unlocked), renewals that failed until the deadline (a paused
//! server), the client's shutdown.
use std::time::Duration;

use keylatch::LossReason;
use keylatch::redis::AsyncCommands;
use keylatch_tests::{client, client_via, client_with, raw, server, unique};

/// Correctness bound for a loss to be noticed: generous for a loaded 2-core machine.
const NOTICED: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_fixed_lease_that_ran_out_is_lease_expired() {
    let server = server();
    let client = client(&server).await;
    let guard = client
        .lock(&unique("reason-lease"))
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(guard.loss_reason(), None, "valid: no reason");
    tokio::time::timeout(NOTICED, guard.lost()).await.unwrap();
    assert_eq!(guard.loss_reason(), Some(LossReason::LeaseExpired));
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_deleted_key_is_gone() {
    let server = server();
    let client = client_with(&server, Duration::from_millis(600), Duration::from_secs(2)).await;
    let name = unique("reason-deleted");
    let guard = client.lock(&name).lock().await.unwrap();
    let _: () = raw(&server).await.del(&name).await.unwrap();
    tokio::time::timeout(NOTICED, guard.lost()).await.unwrap();
    assert_eq!(guard.loss_reason(), Some(LossReason::Gone));
    assert_eq!(
        guard.loss_reason().unwrap().to_string(),
        "the server no longer has it"
    );
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_force_unlock_by_another_client_is_gone() {
    let server = server();
    let client = client_with(&server, Duration::from_millis(600), Duration::from_secs(2)).await;
    let other = client_with(&server, Duration::from_millis(600), Duration::from_secs(2)).await;
    let name = unique("reason-forced");
    let guard = client.lock(&name).lock().await.unwrap();
    assert!(other.lock(&name).force_unlock().await.unwrap());
    tokio::time::timeout(NOTICED, guard.lost()).await.unwrap();
    assert_eq!(guard.loss_reason(), Some(LossReason::Gone));
    client.shutdown().await.unwrap();
    other.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_paused_server_is_renewal_failed() {
    let server = server();
    let watchdog = Duration::from_millis(900);
    let client = client_via(server.url(), watchdog, Duration::from_millis(200)).await;
    let guard = client.lock(&unique("reason-paused")).lock().await.unwrap();
    server.pause().unwrap();
    let lost = tokio::time::timeout(NOTICED, guard.lost()).await;
    let reason = guard.loss_reason();
    server.resume().unwrap();
    lost.expect("the hold is lost once renewals fail past its deadline");
    match reason {
        Some(LossReason::RenewalFailed { for_ }) => {
            assert!(for_ > Duration::ZERO, "renewals failed for {for_:?}");
            println!("renewals had failed for {for_:?}");
        }
        other => panic!("expected RenewalFailed, got {other:?}"),
    }
    assert!(
        reason
            .unwrap()
            .to_string()
            .starts_with("no renewal succeeded for ")
    );
    let _ = client.shutdown().await;
}

#[tokio::test]
async fn a_shutdown_with_a_live_guard_is_client_shutdown() {
    let server = server();
    let client = client(&server).await;
    let guard = client
        .lock(&unique("reason-shutdown"))
        .lock()
        .await
        .unwrap();
    client.shutdown().await.unwrap();
    assert!(guard.is_lost());
    assert_eq!(guard.loss_reason(), Some(LossReason::ClientShutdown));
}
