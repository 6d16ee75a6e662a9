//! Redisson and keylatch on one permit-expirable semaphore: a permit taken on either side can
//! be looked up, renewed and released on the other by the hex id the taker's API returned, and
//! a total changed on either side is the total both sides see. The Redisson side runs
//! Redisson's scripts with Redisson's arguments (`keylatch_tests::redisson`).
use std::time::Duration;

use keylatch::{AcquireOptions, Error};
use keylatch_tests::redisson::{RedissonPermitSemaphore, hex_bytes};
use keylatch_tests::{client, client_with, keyspace, raw, server, unique};

#[tokio::test]
async fn keylatch_permit_is_found_renewed_and_released_by_redisson() {
    let server = server();
    let client = client(&server).await;
    let name = unique("sem-k2r");
    let semaphore = client.permit_expirable_semaphore(&name);
    assert!(semaphore.try_set_permits(2).await.unwrap());
    let mut redisson = RedissonPermitSemaphore::new(&server.url(), &name).await;

    let permit = semaphore
        .acquire_with_lease(Duration::from_secs(10))
        .await
        .unwrap();
    let id = permit.id().to_owned();
    assert_eq!(id.len(), 32);
    // Stored as Redisson stores an id: the 16 bytes its hex form stands for.
    let mut conn = raw(&server).await;
    let members: Vec<Vec<u8>> =
        keylatch::redis::AsyncCommands::zrange(&mut conn, format!("{{{name}}}:timeout"), 0, -1)
            .await
            .unwrap();
    assert_eq!(members, vec![hex_bytes(&id)]);

    let left = redisson.lease_time(&id).await;
    assert!(
        left > 0 && left <= 10_000,
        "Redisson's getLeaseTime: {left}"
    );
    assert!(redisson.update_lease(&id, Duration::from_secs(20)).await);
    let left = redisson.lease_time(&id).await;
    assert!(
        left > 10_000 && left <= 20_000,
        "after updateLeaseTime: {left}"
    );
    assert!(redisson.try_release(&id).await, "Redisson's tryRelease");
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    assert!(matches!(
        permit.release().await,
        Err(Error::UnknownPermit { .. })
    ));
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
}

#[tokio::test]
async fn watchdog_renewal_keeps_a_keylatch_permit_that_redisson_sees() {
    let server = server();
    let client = client_with(&server, Duration::from_millis(600), Duration::from_secs(2)).await;
    let name = unique("sem-k2r-watchdog");
    let semaphore = client.permit_expirable_semaphore(&name);
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let mut redisson = RedissonPermitSemaphore::new(&server.url(), &name).await;
    let permit = semaphore.acquire().await.unwrap();
    // Three leases later, renewed by the watchdog, Redisson still finds it held.
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert!(!permit.is_lost());
    let left = redisson.lease_time(permit.id()).await;
    assert!(left > 0 && left <= 600, "Redisson's getLeaseTime: {left}");
    assert_eq!(redisson.permits().await, 1);
    permit.release().await.unwrap();
    assert_eq!(redisson.lease_time("00").await, 0);
}

#[tokio::test]
async fn redisson_permit_is_renewed_and_released_by_keylatch() {
    let server = server();
    let client = client(&server).await;
    let name = unique("sem-r2k");
    let semaphore = client.permit_expirable_semaphore(&name);
    let mut redisson = RedissonPermitSemaphore::new(&server.url(), &name).await;
    assert!(semaphore.try_set_permits(3).await.unwrap());

    let leased = redisson
        .try_acquire(1, Some(Duration::from_secs(10)))
        .await
        .expect("Redisson acquires")
        .remove(0);
    let unleased = redisson
        .try_acquire(1, None)
        .await
        .expect("Redisson acquires")
        .remove(0);
    assert_eq!(semaphore.acquired_permits().await.unwrap(), 2);
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);

    semaphore
        .update_lease(&leased, Duration::from_secs(20))
        .await
        .unwrap();
    let left = redisson.lease_time(&leased).await;
    assert!(
        left > 10_000 && left <= 20_000,
        "after update_lease: {left}"
    );
    // Released by the hex id Redisson's API returned; either case of hex digits.
    semaphore.release(&leased).await.unwrap();
    assert_eq!(redisson.lease_time(&leased).await, 0, "gone for Redisson");
    assert!(
        semaphore
            .try_release(&unleased.to_ascii_uppercase())
            .await
            .unwrap()
    );
    assert!(!semaphore.try_release(&unleased).await.unwrap());
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);
    assert_eq!(redisson.permits().await, 3);
}

#[tokio::test]
async fn totals_changed_on_either_side_are_seen_by_both() {
    let server = server();
    let client = client(&server).await;
    let name = unique("sem-totals");
    let semaphore = client.permit_expirable_semaphore(&name);
    let mut redisson = RedissonPermitSemaphore::new(&server.url(), &name).await;

    assert!(semaphore.try_set_permits(2).await.unwrap());
    redisson.add_permits(3).await;
    assert_eq!(semaphore.permits().await.unwrap(), Some(5));
    let permits = semaphore
        .acquire_many(3, AcquireOptions::new().with_wait(Duration::ZERO))
        .await
        .unwrap()
        .expect("3 of 5 available");
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);

    // Redisson's setPermits: the total (available + held) becomes 4.
    redisson.set_permits(4).await;
    assert_eq!(semaphore.permits().await.unwrap(), Some(4));
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    assert!(matches!(
        semaphore
            .acquire_many(5, AcquireOptions::new().with_wait(Duration::ZERO))
            .await,
        Err(Error::InvalidPermits { .. })
    ));

    semaphore.add_permits(2).await.unwrap();
    assert_eq!(redisson.permits().await, 6);
    semaphore.add_permits(-1).await.unwrap();
    assert_eq!(redisson.permits().await, 5);
    for permit in permits {
        permit.release().await.unwrap();
    }
    assert_eq!(semaphore.available_permits().await.unwrap(), 5);
    assert_eq!(redisson.permits().await, 5);
}

#[tokio::test]
async fn ids_that_cannot_be_permits_are_unknown_and_change_nothing() {
    let server = server();
    let client = client(&server).await;
    let name = unique("sem-bad-ids");
    let semaphore = client.permit_expirable_semaphore(&name);
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let permit = semaphore.acquire().await.unwrap();
    let mut conn = raw(&server).await;
    let before = keyspace(&mut conn).await;
    for id in ["", "abc", "xyz0", "0g", &"ab".repeat(200)] {
        assert!(!semaphore.try_release(id).await.unwrap(), "{id:?}");
        assert!(matches!(
            semaphore.update_lease(id, Duration::from_secs(1)).await,
            Err(Error::UnknownPermit { .. })
        ));
    }
    assert_eq!(keyspace(&mut conn).await, before);
    permit.release().await.unwrap();
}

#[tokio::test]
async fn a_redisson_permit_without_lease_makes_keylatch_wait_until_released() {
    let server = server();
    let client = client(&server).await;
    let name = unique("sem-no-lease");
    let semaphore = client.permit_expirable_semaphore(&name);
    let mut redisson = RedissonPermitSemaphore::new(&server.url(), &name).await;
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let id = redisson
        .try_acquire(1, None)
        .await
        .expect("Redisson acquires")
        .remove(0);
    assert_eq!(redisson.lease_time(&id).await, -1, "no lease");
    // The earliest lease end is Redisson's score for "never": keylatch waits, bounded.
    let waited = semaphore
        .try_acquire_for(Duration::from_millis(200), Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(waited.is_none());
    let waiting = tokio::spawn({
        let semaphore = semaphore.clone();
        async move { semaphore.acquire_with_lease(Duration::from_secs(5)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(redisson.try_release(&id).await);
    let permit = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("woken by Redisson's release")
        .unwrap()
        .unwrap();
    let left = redisson.lease_time(permit.id()).await;
    assert!(left > 0 && left <= 5_000, "{left}");
    permit.release().await.unwrap();
}
