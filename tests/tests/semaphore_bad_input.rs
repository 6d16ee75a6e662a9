//! Bad input to the semaphores gets a typed error and leaves Redis untouched (a `DUMP` of
//! every key compared before and after); handles, permits and futures cross tasks; both guard
//! forms work as `Arc<dyn DistributedLock>`.
use std::sync::Arc;
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch::{AcquireOptions, DistributedLock, Error, MAX_NAME_LEN};
use keylatch_tests::{
    TakeUnguarded, client, invalid_leases, keyspace, raw, send_static, send_sync_static, server,
    unique,
};

const MAX_PERMITS: u32 = i32::MAX as u32;

fn invalid_permits<T: std::fmt::Debug>(result: keylatch::Result<T>, what: &str) {
    let err = result.unwrap_err();
    assert!(
        matches!(err, Error::InvalidPermits { .. }),
        "{what}: {err:?}"
    );
}

fn unknown_permit<T: std::fmt::Debug>(result: keylatch::Result<T>, what: &str) {
    let err = result.unwrap_err();
    assert!(
        matches!(err, Error::UnknownPermit { .. }),
        "{what}: {err:?}"
    );
}

#[tokio::test]
async fn bad_input_is_refused_and_redis_is_untouched() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let plain = unique("sem-bad");
    let expirable = unique("xsem-bad");
    let semaphore = client.semaphore(&plain);
    let xsemaphore = client.permit_expirable_semaphore(&expirable);
    semaphore.try_set_permits(3).await.unwrap();
    xsemaphore.try_set_permits(3).await.unwrap();
    let held = xsemaphore
        .acquire_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let hash = unique("a-hash");
    let text = unique("a-string");
    let _: () = conn.hset(&hash, "field", 1).await.unwrap();
    let _: () = conn.set(&text, "user data").await.unwrap();
    let bad_zset = unique("bad-zset");
    let _: () = conn.set(&bad_zset, 1).await.unwrap();
    let _: () = conn
        .set(format!("{{{bad_zset}}}:timeout"), "not a zset")
        .await
        .unwrap();
    let before = keyspace(&mut conn).await;

    // Names.
    let long = "x".repeat(MAX_NAME_LEN + 1);
    for name in ["", long.as_str()] {
        let s = client.semaphore(name);
        let x = client.permit_expirable_semaphore(name);
        let invalid = |err: Error| assert!(matches!(err, Error::InvalidName { .. }), "{err:?}");
        invalid(s.try_set_permits(1).await.unwrap_err());
        invalid(s.add_permits(1).await.unwrap_err());
        invalid(s.available_permits().await.unwrap_err());
        invalid(s.drain_permits().await.unwrap_err());
        invalid(s.acquire().await.unwrap_err());
        invalid(s.try_take(1).await.unwrap_err());
        invalid(s.release(1).await.unwrap_err());
        invalid(s.as_lock().try_lock().await.unwrap_err());
        invalid(s.as_lock().is_locked().await.unwrap_err());
        invalid(s.as_lock().force_unlock().await.unwrap_err());
        invalid(x.try_set_permits(1).await.unwrap_err());
        invalid(x.add_permits(1).await.unwrap_err());
        invalid(x.available_permits().await.unwrap_err());
        invalid(x.acquire().await.unwrap_err());
        invalid(x.try_release("id").await.unwrap_err());
        invalid(
            x.update_lease("id", Duration::from_secs(1))
                .await
                .unwrap_err(),
        );
        invalid(x.as_lock().lock().await.unwrap_err());
        invalid(x.as_lock().force_unlock().await.unwrap_err());
    }

    // Zero, negative and overflowing counts.
    invalid_permits(semaphore.try_set_permits(0).await, "try_set 0");
    invalid_permits(
        semaphore.try_set_permits(MAX_PERMITS + 1).await,
        "try_set > max",
    );
    invalid_permits(semaphore.take(0).await, "acquire_many 0");
    invalid_permits(semaphore.take(u32::MAX).await, "acquire_many u32::MAX");
    invalid_permits(semaphore.try_take(0).await, "try_acquire 0");
    invalid_permits(
        semaphore.try_take_for(0, Duration::from_secs(1)).await,
        "try_acquire_for 0",
    );
    invalid_permits(semaphore.release(0).await, "release 0");
    invalid_permits(semaphore.release(u32::MAX).await, "release u32::MAX");
    invalid_permits(semaphore.add_permits(0).await, "add 0");
    invalid_permits(semaphore.add_permits(i64::MAX).await, "add i64::MAX");
    invalid_permits(semaphore.add_permits(i64::MIN).await, "add i64::MIN");
    // Checked by the scripts, against the stored count: nothing written.
    invalid_permits(semaphore.add_permits(-4).await, "below zero");
    invalid_permits(semaphore.release(MAX_PERMITS).await, "count over max");
    invalid_permits(
        semaphore.add_permits(i64::from(MAX_PERMITS)).await,
        "add over max",
    );
    invalid_permits(xsemaphore.try_set_permits(0).await, "x try_set 0");
    invalid_permits(xsemaphore.add_permits(0).await, "x add 0");
    invalid_permits(
        xsemaphore.add_permits(-3).await,
        "x below zero (2 available)",
    );
    invalid_permits(
        xsemaphore.add_permits(i64::from(MAX_PERMITS)).await,
        "x total over max",
    );
    invalid_permits(
        xsemaphore.acquire_many(0, AcquireOptions::new()).await,
        "x acquire 0",
    );
    invalid_permits(
        xsemaphore.acquire_many(1001, AcquireOptions::new()).await,
        "x acquire > per call",
    );
    // More than the total: refused at once, even when waiting forever.
    invalid_permits(
        xsemaphore.acquire_many(4, AcquireOptions::new()).await,
        "x acquire > total",
    );

    // Leases.
    for lease in invalid_leases() {
        let lease_err = |err: Error| {
            assert!(
                matches!(err, Error::InvalidLease { .. }),
                "{lease:?}: {err:?}"
            )
        };
        lease_err(xsemaphore.acquire_with_lease(lease).await.unwrap_err());
        lease_err(xsemaphore.update_lease(held.id(), lease).await.unwrap_err());
        lease_err(
            xsemaphore
                .as_lock()
                .lock_with_lease(lease)
                .await
                .unwrap_err(),
        );
        lease_err(
            semaphore
                .as_lock()
                .lock_with_lease(lease)
                .await
                .unwrap_err(),
        );
    }

    // Unknown permit ids.
    for id in ["", "nope", &"f".repeat(32), &"x".repeat(10_000)] {
        unknown_permit(xsemaphore.release(id).await, id);
        assert!(!xsemaphore.try_release(id).await.unwrap(), "{id}");
        unknown_permit(
            xsemaphore.update_lease(id, Duration::from_secs(1)).await,
            id,
        );
    }

    // Keys of the wrong type.
    for key in [&hash, &text] {
        let wrong = |err: Error| {
            assert!(
                matches!(&err, Error::WrongType { key: k } if k == key),
                "{key}: {err:?}"
            )
        };
        let s = client.semaphore(key);
        wrong(s.try_take(1).await.unwrap_err());
        wrong(s.release(1).await.unwrap_err());
        wrong(s.add_permits(-1).await.unwrap_err());
        wrong(s.try_set_permits(1).await.unwrap_err());
        wrong(s.drain_permits().await.unwrap_err());
        wrong(s.available_permits().await.unwrap_err());
        let x = client.permit_expirable_semaphore(key);
        wrong(x.try_acquire().await.map(|_| ()).unwrap_err());
        wrong(x.available_permits().await.unwrap_err());
        wrong(
            x.try_release("0123456789abcdef0123456789abcdef")
                .await
                .unwrap_err(),
        );
        wrong(x.add_permits(1).await.unwrap_err());
    }
    let x = client.permit_expirable_semaphore(&bad_zset);
    let err = x.try_acquire().await.map(|_| ()).unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");

    assert_eq!(keyspace(&mut conn).await, before, "bad input changed Redis");
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);
    assert_eq!(xsemaphore.available_permits().await.unwrap(), 2);

    // An expired id and an id released twice are unknown.
    let id = held.id().to_owned();
    held.release().await.unwrap();
    unknown_permit(xsemaphore.release(&id).await, "released twice");
    let short = xsemaphore
        .acquire_with_lease(Duration::from_millis(50))
        .await
        .unwrap()
        .forget();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        xsemaphore.available_permits().await.unwrap(),
        3,
        "reclaimed"
    );
    let before = keyspace(&mut conn).await;
    unknown_permit(xsemaphore.release(&short).await, "expired");
    unknown_permit(
        xsemaphore
            .update_lease(&short, Duration::from_secs(1))
            .await,
        "expired",
    );
    assert_eq!(
        keyspace(&mut conn).await,
        before,
        "an expired id changed Redis"
    );
    client.wait_idle().await;
    assert_eq!(client.stats().watchdog.holds, 0);
}

#[tokio::test]
async fn handles_permits_and_futures_cross_tasks() {
    let server = server();
    let client = client(&server).await;
    let semaphore = client.semaphore(&unique("sem-bounds"));
    let xsemaphore = client.permit_expirable_semaphore(&unique("xsem-bounds"));
    send_sync_static(&semaphore);
    send_sync_static(&xsemaphore);
    send_sync_static(&semaphore.as_lock());
    send_sync_static(&xsemaphore.as_lock());
    semaphore.try_set_permits(2).await.unwrap();
    xsemaphore.try_set_permits(2).await.unwrap();

    let s = semaphore.clone();
    let fut = async move { s.take(1).await };
    send_static(&fut);
    fut.await.unwrap();
    let s = semaphore.clone();
    let release = async move { s.release(1).await };
    send_static(&release);
    release.await.unwrap();

    let x = xsemaphore.clone();
    let fut = async move { x.acquire().await };
    send_static(&fut);
    let permit = tokio::spawn(fut).await.unwrap().unwrap();
    send_sync_static(&permit);
    send_static(&permit.lost());
    // A permit taken in one task is released in another.
    tokio::spawn(async move { permit.release().await })
        .await
        .unwrap()
        .unwrap();

    let locks: Vec<Arc<dyn DistributedLock>> = vec![
        Arc::new(semaphore.as_lock()),
        Arc::new(xsemaphore.as_lock()),
    ];
    for lock in locks {
        let g1 = lock
            .try_lock_for(Duration::from_secs(1), None)
            .await
            .unwrap()
            .unwrap();
        let g2 = lock.lock().await.unwrap();
        assert!(lock.is_locked().await.unwrap(), "{}", lock.name());
        assert!(lock.try_lock().await.unwrap().is_none());
        g1.unlock().await.unwrap();
        assert!(!lock.is_locked().await.unwrap());
        drop(g2);
    }
    client.wait_idle().await;
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    assert_eq!(xsemaphore.available_permits().await.unwrap(), 2);
}
