//! Every acquisition returns a guard that gives back what it took (the plain semaphore's
//! `SemaphorePermit` included), and Redisson's semaphore and write-lock extras: `set_permits`,
//! `try_set_permits` with a time to live, several permit ids released in one call, a permit's
//! remaining lease, and fencing tokens on the write side.
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch::{AcquireOptions, Error};
use keylatch_tests::{client, eventually, raw, server, unique};

#[tokio::test]
async fn a_plain_permit_goes_back_when_dropped() {
    let server = server();
    let client = client(&server).await;
    let semaphore = client.semaphore(&unique("permit-guard"));
    semaphore.try_set_permits(3).await.unwrap();

    {
        let _permit = semaphore.acquire().await.unwrap();
        assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    }
    client.wait_idle().await;
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        3,
        "dropped: given back"
    );

    // One guard for several permits.
    let three = semaphore
        .acquire_many(3, AcquireOptions::new())
        .await
        .unwrap()
        .expect("no wait bound: a permit");
    assert_eq!(three.permits(), 3);
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    three.release().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);

    // forget: the permits stay taken, for someone to give back by count.
    let handed_over = semaphore.acquire().await.unwrap().forget();
    assert_eq!(handed_over, 1);
    client.wait_idle().await;
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    semaphore.release(handed_over).await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);

    // A lease kept by this process: the permit comes back when it ends, and `lost` fires.
    let leased = semaphore
        .acquire_with_lease(Duration::from_millis(200))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(2), leased.lost())
        .await
        .expect("lost when the lease ends");
    let back = eventually(Duration::from_secs(2), || {
        let semaphore = semaphore.clone();
        async move { semaphore.available_permits().await.unwrap() == 3 }
    })
    .await;
    assert!(back, "the lease's end gave the permit back");
    assert!(matches!(leased.release().await, Err(Error::NotHeld { .. })));

    // A bounded wait that passes returns no permit and takes nothing.
    let _all = semaphore
        .acquire_many(3, AcquireOptions::new())
        .await
        .unwrap();
    let none = semaphore
        .try_acquire_for(Duration::from_millis(100), None)
        .await
        .unwrap();
    assert!(none.is_none());
}

#[tokio::test]
async fn set_permits_and_try_set_with_a_time_to_live() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("set-permits");
    let semaphore = client.semaphore(&name);
    semaphore.set_permits(5).await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 5);
    let permit = semaphore.acquire().await.unwrap();
    semaphore.set_permits(2).await.unwrap();
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        2,
        "set, whatever it was"
    );
    permit.release().await.unwrap();
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        3,
        "out permits come back on top"
    );
    assert!(matches!(
        semaphore.set_permits(u32::MAX).await,
        Err(Error::InvalidPermits { .. })
    ));

    let ttl_name = unique("try-set-ttl");
    let expiring = client.semaphore(&ttl_name);
    assert!(
        expiring
            .try_set_permits_with_ttl(4, Duration::from_millis(300))
            .await
            .unwrap()
    );
    assert!(
        !expiring
            .try_set_permits_with_ttl(9, Duration::from_secs(9))
            .await
            .unwrap()
    );
    let pttl: i64 = conn.pttl(&ttl_name).await.unwrap();
    assert!((1..=300).contains(&pttl), "pttl {pttl}");
    assert!(
        eventually(Duration::from_secs(3), || {
            let expiring = expiring.clone();
            async move { expiring.available_permits().await.unwrap() == 0 }
        })
        .await,
        "the count expires with its time to live"
    );
    assert!(matches!(
        expiring.try_set_permits_with_ttl(1, Duration::ZERO).await,
        Err(Error::InvalidLease { .. })
    ));
}

#[tokio::test]
async fn expirable_permits_released_together_and_their_leases_read() {
    let server = server();
    let client = client(&server).await;
    let semaphore = client.permit_expirable_semaphore(&unique("release-many"));
    semaphore.try_set_permits(4).await.unwrap();
    let permits = semaphore
        .acquire_many(3, AcquireOptions::new().with_lease(Duration::from_secs(20)))
        .await
        .unwrap()
        .unwrap();
    let ids: Vec<String> = permits.into_iter().map(|p| p.forget()).collect();
    let lease = semaphore.remaining_lease(&ids[0]).await.unwrap().unwrap();
    assert!(
        lease > Duration::from_secs(19) && lease <= Duration::from_secs(20),
        "{lease:?}"
    );
    assert_eq!(semaphore.remaining_lease("f00d").await.unwrap(), None);
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);

    let refs: Vec<&str> = ids.iter().map(String::as_str).chain(["unknown"]).collect();
    assert_eq!(
        semaphore.try_release_many(&refs).await.unwrap(),
        3,
        "three were held"
    );
    assert_eq!(semaphore.available_permits().await.unwrap(), 4);
    assert_eq!(
        semaphore.try_release_many(&refs).await.unwrap(),
        0,
        "released once"
    );
    assert_eq!(semaphore.remaining_lease(&ids[0]).await.unwrap(), None);
    let too_many = vec!["x"; 1001];
    assert!(matches!(
        semaphore.try_release_many(&too_many).await,
        Err(Error::InvalidPermits { .. })
    ));
}

#[tokio::test]
async fn the_write_side_issues_fencing_tokens() {
    let server = server();
    let client = client(&server).await;
    let name = unique("rw-fencing");
    let rw = client.rw_lock(&name).with_fencing(true);
    let mut last = 0;
    for _ in 0..3 {
        let write = rw.write().await.unwrap();
        let token = write.fencing_token().expect("a token");
        assert!(token > last, "{token} after {last}");
        last = token;
        write.unlock().await.unwrap();
    }
    // The read side and a write lock without fencing issue none.
    let read = rw.read().await.unwrap();
    assert_eq!(read.fencing_token(), None);
    read.unlock().await.unwrap();
    let plain = client.rw_lock(&name).write().await.unwrap();
    assert_eq!(plain.fencing_token(), None);
    plain.unlock().await.unwrap();
    // The counter is the name's `redisson_lock_token:{name}`, as the reentrant lock's.
    let mut conn = raw(&server).await;
    let counter: u64 = conn
        .get(format!("redisson_lock_token:{{{name}}}"))
        .await
        .unwrap();
    assert_eq!(counter, last);
}

#[tokio::test]
async fn expirable_set_permits_and_try_set_with_a_time_to_live() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("exp-set");
    let semaphore = client.permit_expirable_semaphore(&name);
    semaphore.set_permits(3).await.unwrap();
    let held = semaphore.acquire().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    // The total becomes 5: 4 available besides the one held (Redisson's setPermits).
    semaphore.set_permits(5).await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 4);
    assert_eq!(semaphore.permits().await.unwrap(), Some(5));
    // Below what is held: nobody gets in until enough are given back.
    semaphore.set_permits(1).await.unwrap();
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    held.release().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);

    let ttl_name = unique("exp-ttl");
    let expiring = client.permit_expirable_semaphore(&ttl_name);
    assert!(
        expiring
            .try_set_permits_with_ttl(2, Duration::from_millis(400))
            .await
            .unwrap()
    );
    let pttl: i64 = conn.pttl(&ttl_name).await.unwrap();
    assert!((1..=400).contains(&pttl), "pttl {pttl}");
    assert!(!expiring.try_set_permits(7).await.unwrap(), "already set");
}
