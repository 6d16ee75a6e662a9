//! Extending a hold: `extend` adds to a fixed lease, `set_lease` sets what is left of it (and
//! leaves watchdog mode), `watchdog` switches a fixed-lease hold to watchdog mode, and a lock's
//! `with_max_hold` stops the watchdog after a maximum total hold time. Each checks on the
//! server that the hold is still the guard's.
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch::{Error, LossReason};
use keylatch_tests::{client, client_with, raw, server, unique};
use tokio::time::Instant;

/// Correctness bound for a loss or an acquisition to happen: generous for a loaded machine.
const WITHIN: Duration = Duration::from_secs(10);

#[tokio::test]
async fn extend_keeps_a_hold_past_its_original_lease() {
    let server = server();
    let (client, other) = (client(&server).await, client(&server).await);
    let name = unique("extend-keeps");
    let lease = Duration::from_secs(1);
    let acquired = Instant::now();
    let guard = client.lock(&name).lock_with_lease(lease).await.unwrap();
    let before = guard.valid_until().unwrap();
    guard.extend(Duration::from_secs(3)).await.unwrap();
    let after = guard.valid_until().unwrap();
    assert!(
        after > before + Duration::from_secs(2),
        "{before:?} -> {after:?}"
    );
    // Another client tries past the original lease: every attempt fails.
    let mut refused = 0;
    while acquired.elapsed() < lease + Duration::from_millis(500) {
        match other.lock(&name).try_lock().await.unwrap() {
            None => refused += 1,
            Some(_) => panic!("another client took the lock within the extended lease"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(refused >= 1, "another client tried at least once");
    assert!(!guard.is_lost());
    let pttl: i64 = raw(&server).await.pttl(&name).await.unwrap();
    assert!(pttl > 0, "the key still has a lease: {pttl}");
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn set_lease_shortens_a_hold() {
    let server = server();
    let (client, other) = (client(&server).await, client(&server).await);
    let name = unique("extend-shorten");
    let mut guard = client
        .lock(&name)
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    guard.set_lease(Duration::from_millis(300)).await.unwrap();
    let pttl: i64 = raw(&server).await.pttl(&name).await.unwrap();
    assert!((0..=300).contains(&pttl), "the lease was shortened: {pttl}");
    tokio::time::timeout(WITHIN, guard.lost()).await.unwrap();
    assert_eq!(guard.loss_reason(), Some(LossReason::LeaseExpired));
    let taken = other
        .lock(&name)
        .try_lock_for(WITHIN, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(
        taken.is_some(),
        "another client takes it once the short lease ends"
    );
}

#[tokio::test]
async fn extend_after_the_key_was_deleted_is_not_held_and_lost() {
    let server = server();
    let client = client(&server).await;
    let name = unique("extend-deleted");
    let guard = client
        .lock(&name)
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    let _: () = raw(&server).await.del(&name).await.unwrap();
    let err = guard.extend(Duration::from_secs(1)).await.unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "got {err:?}");
    assert!(guard.is_lost());
    assert_eq!(guard.loss_reason(), Some(LossReason::Gone));
    let exists: bool = raw(&server).await.exists(&name).await.unwrap();
    assert!(!exists, "nothing was written for a hold that is gone");
}

#[tokio::test]
async fn a_fixed_lease_switched_to_watchdog_mode_survives_several_leases() {
    let server = server();
    let watchdog = Duration::from_millis(600);
    let client = client_with(&server, watchdog, Duration::from_secs(2)).await;
    let other = client_with(&server, watchdog, Duration::from_secs(2)).await;
    let name = unique("extend-watchdog");
    let mut guard = client
        .lock(&name)
        .lock_with_lease(Duration::from_millis(400))
        .await
        .unwrap();
    guard.watchdog().await.unwrap();
    let until = Instant::now() + watchdog * 4;
    let mut refused = 0;
    while Instant::now() < until {
        assert!(other.lock(&name).try_lock().await.unwrap().is_none());
        refused += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refused >= 1);
    assert!(!guard.is_lost(), "renewed by the watchdog");
    // And back to a fixed lease: it ends.
    guard.set_lease(Duration::from_millis(300)).await.unwrap();
    tokio::time::timeout(WITHIN, guard.lost()).await.unwrap();
    assert_eq!(guard.loss_reason(), Some(LossReason::LeaseExpired));
}

#[tokio::test]
async fn max_hold_stops_renewal_and_another_client_takes_the_lock() {
    let server = server();
    let watchdog = Duration::from_millis(600);
    let client = client_with(&server, watchdog, Duration::from_secs(2)).await;
    let other = client_with(&server, watchdog, Duration::from_secs(2)).await;
    let name = unique("extend-max-hold");
    let acquired = Instant::now();
    let guard = client
        .lock(&name)
        .with_max_hold(Duration::from_millis(1000))
        .lock()
        .await
        .unwrap();
    tokio::time::timeout(WITHIN, guard.lost()).await.unwrap();
    let held = acquired.elapsed();
    assert!(
        held > watchdog,
        "renewed past one lease before the cap: {held:?}"
    );
    assert_eq!(guard.loss_reason(), Some(LossReason::MaxHoldReached));
    let taken = other
        .lock(&name)
        .try_lock_for(WITHIN, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(taken.is_some(), "another client takes it after the cap");
}

#[tokio::test]
async fn a_fair_lock_hold_is_extended_and_its_loss_found() {
    let server = server();
    let (client, other) = (client(&server).await, client(&server).await);
    let name = unique("extend-fair");
    let lease = Duration::from_secs(1);
    let acquired = Instant::now();
    let guard = client
        .fair_lock(&name)
        .lock_with_lease(lease)
        .await
        .unwrap();
    guard.extend(Duration::from_secs(3)).await.unwrap();
    let mut refused = 0;
    while acquired.elapsed() < lease + Duration::from_millis(500) {
        assert!(
            other
                .fair_lock(&name)
                .try_lock_for(Duration::ZERO, None)
                .await
                .unwrap()
                .is_none(),
            "another client took the fair lock within the extended lease"
        );
        refused += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(refused >= 1);
    let _: () = raw(&server).await.del(&name).await.unwrap();
    let err = guard.extend(Duration::from_secs(1)).await.unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "got {err:?}");
    assert_eq!(guard.loss_reason(), Some(LossReason::Gone));
}
