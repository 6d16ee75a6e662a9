//! `Config::key_prefix` (Redisson's `NameMapper`): every key and channel of every primitive
//! starts with it, clients with different prefixes share one Redis without sharing locks, and
//! a Redisson application that maps its names the same way contends for the same locks.
use std::time::Duration;

use keylatch::redis;
use keylatch::{Client, Config, Error};
use keylatch_tests::redisson::RedissonFairThread;
use keylatch_tests::{raw, server};

async fn with_prefix(url: &str, prefix: &str) -> Client {
    let config = Config::builder()
        .url(url)
        .key_prefix(prefix)
        .fallback_poll(Duration::from_millis(200))
        .build()
        .unwrap();
    Client::connect_with(config).await.unwrap()
}

async fn keys(conn: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(conn).await.unwrap();
    keys.sort();
    keys
}

#[tokio::test]
async fn every_primitive_writes_under_the_prefix_only() {
    let server = server();
    let client = with_prefix(&server.url(), "tenant-a:").await;
    let mut conn = raw(&server).await;
    let mut pubsub = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    pubsub.psubscribe("*").await.unwrap();
    let lock = client.lock("jobs").with_fencing(true).lock().await.unwrap();
    let fair = client.fair_lock("queue").lock().await.unwrap();
    let write = client.rw_lock("cache").write_lock().lock().await.unwrap();
    let spin = client.spin_lock("spin").lock().await.unwrap();
    let semaphore = client.semaphore("slots");
    assert!(semaphore.try_set_permits(2).await.unwrap());
    let permit = semaphore.acquire().await.unwrap();
    let expirable = client.permit_expirable_semaphore("workers");
    assert!(expirable.try_set_permits(2).await.unwrap());
    let leased = expirable.acquire().await.unwrap();
    let latch = client.latch("barrier");
    assert!(latch.try_set_count(1).await.unwrap());
    let written = keys(&mut conn).await;
    assert!(!written.is_empty());
    for key in &written {
        let bare = key
            .strip_prefix("redisson_lock_token:{")
            .or_else(|| key.strip_prefix("redisson_lock_queue:{"))
            .or_else(|| key.strip_prefix("redisson_lock_timeout:{"))
            .or_else(|| key.strip_prefix("keylatch_meta:{"))
            .or_else(|| key.strip_prefix('{'))
            .unwrap_or(key);
        assert!(bare.starts_with("tenant-a:"), "{key} is outside the prefix");
    }
    for name in [
        "jobs", "queue", "cache", "spin", "slots", "workers", "barrier",
    ] {
        assert!(
            written.iter().any(|k| k == &format!("tenant-a:{name}")),
            "no key tenant-a:{name} in {written:?}"
        );
    }
    lock.unlock().await.unwrap();
    fair.unlock().await.unwrap();
    write.unlock().await.unwrap();
    spin.unlock().await.unwrap();
    permit.release().await.unwrap();
    leased.release().await.unwrap();
    latch.count_down().await.unwrap();
    // Every message went to a channel of a prefixed name.
    use futures_util::StreamExt;
    let mut messages = pubsub.on_message();
    let mut seen = 0;
    while let Ok(Some(message)) =
        tokio::time::timeout(Duration::from_millis(300), messages.next()).await
    {
        let channel = message.get_channel_name().to_owned();
        assert!(channel.contains("tenant-a:"), "message on {channel}");
        seen += 1;
    }
    assert!(seen >= 5, "{seen} messages");
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn prefixes_separate_tenants_and_a_shared_prefix_contends() {
    let server = server();
    let a = with_prefix(&server.url(), "a:").await;
    let b = with_prefix(&server.url(), "b:").await;
    let a2 = with_prefix(&server.url(), "a:").await;
    let held_a = a.lock("jobs").lock().await.unwrap();
    let held_b = b.lock("jobs").try_lock().await.unwrap();
    assert!(
        held_b.is_some(),
        "another tenant's lock of the same name blocked"
    );
    assert!(
        a2.lock("jobs").try_lock().await.unwrap().is_none(),
        "the same tenant got in twice"
    );
    held_a.unlock().await.unwrap();
    held_b.unwrap().unlock().await.unwrap();
    for c in [a, b, a2] {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn a_redisson_application_with_the_same_name_mapping_contends() {
    let server = server();
    let client = with_prefix(&server.url(), "billing:").await;
    // Redisson's NameMapper turning `invoices` into `billing:invoices`.
    let mut thread = RedissonFairThread::new(&server.url(), "billing:invoices").await;
    let guard = client.fair_lock("invoices").lock().await.unwrap();
    assert!(
        !thread
            .try_lock(Duration::from_millis(100), Duration::from_secs(10))
            .await,
        "Redisson got in beside keylatch"
    );
    guard.unlock().await.unwrap();
    assert!(
        thread
            .try_lock(Duration::from_secs(2), Duration::from_secs(10))
            .await
    );
    assert!(
        client
            .fair_lock("invoices")
            .try_lock()
            .await
            .unwrap()
            .is_none()
    );
    thread.unlock().await;
    client.shutdown().await.unwrap();
}

#[test]
fn bad_prefixes_are_refused() {
    for bad in ["{tag}:", "a}", "tab\t", &"x".repeat(65)] {
        let err = Config::builder().key_prefix(bad).build().unwrap_err();
        assert!(
            matches!(&err, Error::InvalidConfig { field, .. } if *field == "key_prefix"),
            "{bad:?}: {err:?}"
        );
    }
    assert!(Config::builder().key_prefix("app-1:").build().is_ok());
}

#[tokio::test]
async fn prefixes_on_a_cluster() {
    let cluster = tokio::task::spawn_blocking(keylatch_testkit::RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster");
    let a = with_prefix(&cluster.url(), "a:").await;
    let b = with_prefix(&cluster.url(), "b:").await;
    for i in 0..6 {
        let name = format!("jobs-{i}");
        let held_a = a.fair_lock(&name).lock().await.unwrap();
        let held_b = b.fair_lock(&name).try_lock().await.unwrap();
        assert!(held_b.is_some(), "{name}: another tenant blocked");
        assert!(a.fair_lock(&name).try_lock().await.unwrap().is_none());
        let node = cluster.node_for_key(&format!("a:{name}")).unwrap();
        let exists = node.cli(&["EXISTS", &format!("a:{name}")]).unwrap();
        assert_eq!(exists, "1", "a:{name} is not where its slot says");
        held_a.unlock().await.unwrap();
        held_b.unwrap().unlock().await.unwrap();
        let semaphore = a.semaphore(&name);
        assert!(semaphore.try_set_permits(1).await.unwrap());
        assert!(b.semaphore(&name).try_acquire().await.unwrap().is_none());
        semaphore.acquire().await.unwrap().release().await.unwrap();
    }
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}
