//! Bad input to the fair lock gets a typed error and leaves Redis untouched.
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch::{Error, MAX_LEASE, MAX_NAME_LEN};
use keylatch_tests::{client, invalid_leases, keyspace, raw, server, unique};

#[tokio::test]
async fn bad_input_is_refused_and_redis_is_untouched() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let string_key = unique("fair-a-string");
    let bare_hash = unique("fair-no-ttl");
    let bad_queue = unique("fair-bad-queue");
    let _: () = conn.set(&string_key, "user data").await.unwrap();
    let _: () = conn.hset(&bare_hash, "someone:1", 1).await.unwrap();
    // The lock is free, but its queue key holds a string.
    let _: () = conn
        .set(format!("redisson_lock_queue:{{{bad_queue}}}"), "x")
        .await
        .unwrap();
    let before = keyspace(&mut conn).await;

    let long = "x".repeat(MAX_NAME_LEN + 1);
    for name in ["", long.as_str()] {
        let lock = client.fair_lock(name);
        assert!(matches!(
            lock.try_lock().await,
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(lock.lock().await, Err(Error::InvalidName { .. })));
        assert!(matches!(
            lock.force_unlock().await,
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            lock.is_locked().await,
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(lock.queue().await, Err(Error::InvalidName { .. })));
        assert!(matches!(
            lock.hold_count().await,
            Err(Error::InvalidName { .. })
        ));
    }
    let lock = client.fair_lock(&unique("fair-lease"));
    for lease in invalid_leases() {
        let err = lock.lock_with_lease(lease).await.unwrap_err();
        assert!(
            matches!(err, Error::InvalidLease { .. }),
            "{lease:?}: {err:?}"
        );
        let err = lock
            .try_lock_for(Duration::from_secs(1), Some(lease))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidLease { .. }),
            "{lease:?}: {err:?}"
        );
    }
    for timeout in [Duration::ZERO, Duration::from_millis(29), MAX_LEASE * 2] {
        let lock = client
            .fair_lock(&unique("fair-waiter-timeout"))
            .with_waiter_timeout(timeout);
        for result in [
            lock.lock().await.map(|_| ()),
            lock.try_lock().await.map(|_| ()),
        ] {
            let err = result.unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::InvalidConfig {
                        field: "waiter_timeout",
                        ..
                    }
                ),
                "{timeout:?}: {err:?}"
            );
        }
    }

    let wrong = client.fair_lock(&string_key);
    for result in [
        wrong.try_lock().await.map(|_| ()),
        wrong.lock().await.map(|_| ()),
        wrong
            .try_lock_for(Duration::from_secs(1), None)
            .await
            .map(|_| ()),
        wrong.force_unlock().await.map(|_| ()),
        wrong
            .with_owner(keylatch::Owner::unique())
            .hold_count()
            .await
            .map(|_| ()),
    ] {
        let err = result.unwrap_err();
        assert!(
            matches!(&err, Error::WrongType { key } if *key == string_key),
            "{err:?}"
        );
    }
    let wrong_queue = client.fair_lock(&bad_queue);
    for result in [
        wrong_queue.try_lock().await.map(|_| ()),
        wrong_queue.lock().await.map(|_| ()),
        wrong_queue.force_unlock().await.map(|_| ()),
        wrong_queue.queue().await.map(|_| ()),
    ] {
        let err = result.unwrap_err();
        assert!(matches!(&err, Error::WrongType { .. }), "{err:?}");
    }

    let bare = client.fair_lock(&bare_hash);
    assert!(matches!(bare.try_lock().await, Err(Error::NoTtl { .. })));
    assert!(matches!(bare.lock().await, Err(Error::NoTtl { .. })));
    assert!(matches!(
        bare.try_lock_for(Duration::from_secs(1), None).await,
        Err(Error::NoTtl { .. })
    ));
    assert!(matches!(
        bare.remaining_ttl().await,
        Err(Error::NoTtl { .. })
    ));

    client.wait_idle().await;
    assert_eq!(keyspace(&mut conn).await, before, "bad input changed Redis");
    let stats = client.stats();
    assert_eq!(stats.watchdog.holds, 0);
    assert_eq!(stats.channels, 0);
}

#[tokio::test]
async fn unlock_by_a_non_owner_is_not_held_and_changes_nothing() {
    let server = server();
    let client = client(&server).await;
    let name = unique("fair-non-owner");
    let lock = client
        .fair_lock(&name)
        .with_owner(keylatch::Owner::unique());
    let guard = lock.lock_with_lease(Duration::from_secs(30)).await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    let other = client
        .fair_lock(&name)
        .with_owner(keylatch::Owner::unique())
        .lock()
        .await
        .unwrap();
    let mut conn = raw(&server).await;
    let before = keyspace(&mut conn).await;
    assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));
    assert_eq!(keyspace(&mut conn).await, before);
    other.unlock().await.unwrap();
}
