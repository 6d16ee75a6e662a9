//! A fixed lease ends the hold; the old guard's unlock is refused and changes nothing.
use std::time::Duration;

use keylatch::Error;
use keylatch_tests::{client, server, unique};

#[tokio::test]
async fn lease_expires_and_old_guard_cannot_unlock_the_new_hold() {
    let server = server();
    let first = client(&server).await;
    let second = client(&server).await;
    let name = unique("lease");
    let old = first
        .lock(&name)
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    let ttl = first.lock(&name).remaining_ttl().await.unwrap().unwrap();
    assert!(
        ttl <= Duration::from_millis(300) && ttl > Duration::ZERO,
        "ttl {ttl:?}"
    );

    let started = tokio::time::Instant::now();
    let new = second
        .lock(&name)
        .try_lock_for(Duration::from_secs(5), Some(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("the other client acquires once the lease ends");
    println!("acquired after the lease ended: {:?}", started.elapsed());
    assert!(old.is_lost(), "the old guard knows its lease ran out");

    let err = old.unlock().await.unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "got {err:?}");
    assert!(
        second.lock(&name).is_locked().await.unwrap(),
        "the new hold is intact"
    );
    let ttl = second.lock(&name).remaining_ttl().await.unwrap().unwrap();
    assert!(
        ttl > Duration::from_secs(5),
        "the new hold's lease was not touched: {ttl:?}"
    );
    new.unlock().await.unwrap();
}

#[tokio::test]
async fn lease_mode_guard_signals_lost_at_its_deadline() {
    let server = server();
    let client = client(&server).await;
    let guard = client
        .lock(&unique("lease-lost"))
        .lock_with_lease(Duration::from_millis(200))
        .await
        .unwrap();
    assert!(!guard.is_lost());
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("lost fires when the lease runs out");
    assert!(guard.is_lost());
    assert_eq!(
        client.stats().watchdog.watched,
        0,
        "a lease hold is never renewed"
    );
}
