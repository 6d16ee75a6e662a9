//! Bad input gets a typed error and leaves Redis untouched.
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch::{Error, MAX_NAME_LEN};
use keylatch_tests::{client, invalid_leases, keyspace, raw, server, unique};

#[tokio::test]
async fn bad_input_is_refused_and_redis_is_untouched() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let string_key = unique("a-string");
    let bare_hash = unique("no-ttl");
    let _: () = conn.set(&string_key, "user data").await.unwrap();
    let _: () = conn.hset(&bare_hash, "someone:1", 1).await.unwrap();
    let before = keyspace(&mut conn).await;

    let long = "x".repeat(MAX_NAME_LEN + 1);
    for name in ["", long.as_str()] {
        let lock = client.lock(name);
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
    }
    let lock = client.lock(&unique("lease"));
    for lease in invalid_leases() {
        let err = lock.lock_with_lease(lease).await.unwrap_err();
        assert!(
            matches!(err, Error::InvalidLease { .. }),
            "{lease:?}: {err:?}"
        );
    }

    let wrong = client.lock(&string_key);
    for result in [
        wrong.try_lock().await.map(|_| ()),
        wrong
            .lock_with_lease(Duration::from_secs(1))
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
        assert_eq!(
            err.to_string(),
            format!("key {string_key:?} holds a value of the wrong type for this primitive")
        );
    }

    let bare = client.lock(&bare_hash);
    assert!(matches!(bare.try_lock().await, Err(Error::NoTtl { .. })));
    assert!(matches!(bare.lock().await, Err(Error::NoTtl { .. })));
    assert!(matches!(
        bare.remaining_ttl().await,
        Err(Error::NoTtl { .. })
    ));

    assert_eq!(keyspace(&mut conn).await, before, "bad input changed Redis");
    assert_eq!(client.stats().watchdog.holds, 0);
}

#[tokio::test]
async fn unreachable_url_is_named_in_the_error() {
    // A port nothing listens on: bind one, then free it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://127.0.0.1:{port}");
    let config = keylatch::Config::builder()
        .url(url.as_str())
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let err = keylatch::Client::connect_with(config).await.unwrap_err();
    assert!(
        matches!(&err, Error::Connect { url: u, .. } if *u == url),
        "{err:?}"
    );
    assert!(err.to_string().contains(&url), "{err}");
    assert!(std::error::Error::source(&err).is_some());

    let err = keylatch::Client::connect("not a url").await.unwrap_err();
    assert!(matches!(err, Error::InvalidUrl { .. }), "{err:?}");
    let err = keylatch::Config::builder()
        .connections(0)
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidConfig {
                field: "connections",
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn unlock_by_a_non_owner_is_not_held_and_changes_nothing() {
    let server = server();
    let client = client(&server).await;
    let name = unique("non-owner");
    let lock = client.lock(&name);
    let guard = lock.lock_with_lease(Duration::from_secs(30)).await.unwrap();
    // The lock is force-unlocked and taken by someone else; the old guard is no owner.
    assert!(lock.force_unlock().await.unwrap());
    let other = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await.unwrap() }
    })
    .await
    .unwrap();
    let mut conn = raw(&server).await;
    let before = keyspace(&mut conn).await;
    assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));
    assert_eq!(keyspace(&mut conn).await, before);
    other.unlock().await.unwrap();
}
