//! Holder metadata: who holds a reentrant-lock hold, in keylatch's own hash
//! `keylatch_meta:{name}` beside the lock, with the lock's lifetime; the lock hash itself stays
//! Redisson's (one field per owner → hold count).
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch_redis::HolderMeta;
use keylatch_tests::{client, eventually, raw, server, unique};

fn meta_key(name: &str) -> String {
    format!("keylatch_meta:{{{name}}}")
}

#[tokio::test]
async fn a_hold_records_host_pid_program_and_since_beside_the_lock() {
    let server = server();
    let client = with_metadata(&server, Duration::from_secs(30)).await;
    let mut conn = raw(&server).await;
    let name = unique("meta");
    let (secs, _): (i64, i64) = keylatch::redis::cmd("TIME")
        .query_async(&mut conn)
        .await
        .unwrap();

    let lock = client.lock(&name).with_owner(keylatch::Owner::unique());
    let guard = lock.lock_with_lease(Duration::from_secs(20)).await.unwrap();
    // The lock hash is Redisson's: the owner's field and nothing else.
    let fields: Vec<(String, String)> = conn.hgetall(&name).await.unwrap();
    assert_eq!(fields, vec![(guard.owner_id().to_string(), "1".to_owned())]);

    let metas: Vec<(String, String)> = conn.hgetall(meta_key(&name)).await.unwrap();
    assert_eq!(metas.len(), 1, "{metas:?}");
    assert_eq!(metas[0].0, guard.owner_id().to_string());
    let meta = HolderMeta::parse(&metas[0].1);
    assert_eq!(meta.pid, Some(std::process::id()));
    assert!(meta.host.as_deref().is_some_and(|h| !h.is_empty()));
    assert!(
        meta.program
            .as_deref()
            .is_some_and(|p| p.contains("holder_metadata"))
    );
    let since = meta.since_ms.expect("since_ms");
    assert!(
        since >= secs * 1000 && since < (secs + 60) * 1000,
        "{since}"
    );
    let lock_ttl: i64 = conn.pttl(&name).await.unwrap();
    let meta_ttl: i64 = conn.pttl(meta_key(&name)).await.unwrap();
    assert!((lock_ttl - meta_ttl).abs() < 1000, "{lock_ttl} {meta_ttl}");

    // Re-entry keeps the first hold's `since`; the last release deletes both keys.
    let inner = lock.lock_with_lease(Duration::from_secs(20)).await.unwrap();
    let again: String = conn
        .hget(meta_key(&name), guard.owner_id().to_string())
        .await
        .unwrap();
    assert_eq!(HolderMeta::parse(&again).since_ms, Some(since));
    inner.unlock().await.unwrap();
    let still: bool = conn.exists(meta_key(&name)).await.unwrap();
    assert!(still, "a partial release keeps the metadata");
    guard.unlock().await.unwrap();
    let gone: i64 = conn.exists(&[&name, &meta_key(&name)]).await.unwrap();
    assert_eq!(gone, 0);
}

#[tokio::test]
async fn metadata_lives_as_long_as_the_hold() {
    let server = server();
    let client = with_metadata(&server, Duration::from_millis(900)).await;
    let mut conn = raw(&server).await;

    // A fixed lease: both keys expire together.
    let leased = unique("meta-lease");
    let _guard = client
        .lock(&leased)
        .lock_with_lease(Duration::from_millis(400))
        .await
        .unwrap();
    assert!(conn.exists::<_, bool>(meta_key(&leased)).await.unwrap());
    assert!(
        eventually(Duration::from_secs(5), || {
            let mut conn = conn.clone();
            let keys = [leased.clone(), meta_key(&leased)];
            async move { conn.exists::<_, i64>(&keys).await.unwrap() == 0 }
        })
        .await
    );

    // Watchdog mode: renewed with the lock, well past its 900 ms timeout.
    let watched = unique("meta-watchdog");
    let guard = client.lock(&watched).lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let meta_ttl: i64 = conn.pttl(meta_key(&watched)).await.unwrap();
    let lock_ttl: i64 = conn.pttl(&watched).await.unwrap();
    assert!(
        meta_ttl > 0 && (lock_ttl - meta_ttl).abs() < 300,
        "{lock_ttl} {meta_ttl}"
    );

    // An extension extends both.
    guard.extend(Duration::from_secs(30)).await.unwrap();
    let meta_ttl: i64 = conn.pttl(meta_key(&watched)).await.unwrap();
    assert!(meta_ttl > 20_000, "{meta_ttl}");

    // force_unlock deletes both.
    assert!(client.lock(&watched).force_unlock().await.unwrap());
    let left: i64 = conn.exists(&[&watched, &meta_key(&watched)]).await.unwrap();
    assert_eq!(left, 0);
    drop(guard);
}

#[tokio::test]
async fn metadata_is_off_by_default() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("meta-off");
    let guard = client.lock(&name).lock().await.unwrap();
    assert!(conn.exists::<_, bool>(&name).await.unwrap());
    assert!(!conn.exists::<_, bool>(meta_key(&name)).await.unwrap());
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn the_program_can_be_named() {
    let server = server();
    let config = keylatch::Config::builder()
        .url(server.url())
        .holder_metadata(true)
        .holder_program("nightly-report --full")
        .build()
        .unwrap();
    let client = keylatch::Client::connect_with(config).await.unwrap();
    let mut conn = raw(&server).await;
    let name = unique("meta-program");
    let guard = client.lock(&name).lock().await.unwrap();
    let value: String = conn
        .hget(meta_key(&name), guard.owner_id().to_string())
        .await
        .unwrap();
    assert_eq!(
        HolderMeta::parse(&value).program.as_deref(),
        Some("nightly-report --full")
    );
    guard.unlock().await.unwrap();
}

/// A client that records holder metadata (off by default), with this watchdog timeout.
async fn with_metadata(
    server: &keylatch_tests::RedisServer,
    watchdog: Duration,
) -> keylatch::Client {
    let config = keylatch::Config::builder()
        .url(server.url())
        .watchdog_timeout(watchdog)
        .fallback_poll(Duration::from_millis(200))
        .holder_metadata(true)
        .build()
        .unwrap();
    keylatch::Client::connect_with(config).await.unwrap()
}
