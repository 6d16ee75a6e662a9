//! The keys, fields and messages are Redisson's.
use std::time::Duration;

use futures_util::StreamExt;
use keylatch::redis::AsyncCommands;
use keylatch_tests::{client, pubsub, raw, server, unique};

#[tokio::test]
async fn hash_field_ttl_and_unlock_message_match_redisson() {
    let server = server();
    let client = client(&server).await;
    let name = unique("layout");
    let mut conn = raw(&server).await;

    let mut pubsub = pubsub(&server).await;
    pubsub
        .subscribe(format!("redisson_lock__channel:{{{name}}}"))
        .await
        .unwrap();

    let guard = client
        .lock(&name)
        .lock_with_lease(Duration::from_secs(20))
        .await
        .unwrap();
    let fields: Vec<(String, String)> = conn.hgetall(&name).await.unwrap();
    assert_eq!(fields.len(), 1, "{fields:?}");
    let (field, count) = &fields[0];
    assert_eq!(count, "1");
    let (uuid, number) = field.rsplit_once(':').expect("<uuid>:<n>");
    assert_eq!(uuid, client.id().to_string());
    assert!(number.parse::<u64>().is_ok(), "owner number {number:?}");
    assert_eq!(*field, guard.owner_id().to_string());
    let pttl: i64 = conn.pttl(&name).await.unwrap();
    assert!((19_000..=20_000).contains(&pttl), "pttl {pttl}");

    // Watchdog mode: PTTL = the watchdog timeout.
    let other = unique("layout-watchdog");
    let watched = client.lock(&other).lock().await.unwrap();
    let pttl: i64 = conn.pttl(&other).await.unwrap();
    assert!((29_000..=30_000).contains(&pttl), "pttl {pttl}");
    watched.unlock().await.unwrap();

    guard.unlock().await.unwrap();
    let mut messages = pubsub.on_message();
    let msg = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("the unlock message arrives")
        .unwrap();
    assert_eq!(
        msg.get_channel_name(),
        format!("redisson_lock__channel:{{{name}}}")
    );
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    let exists: bool = conn.exists(&name).await.unwrap();
    assert!(!exists);
}

#[tokio::test]
async fn fencing_tokens_strictly_increase_per_name() {
    let server = server();
    let a = client(&server).await;
    let b = client(&server).await;
    let name = unique("fencing");
    let mut last = 0;
    for i in 0..20 {
        let lock = if i % 2 == 0 {
            a.lock(&name)
        } else {
            b.lock(&name)
        }
        .with_fencing(true);
        let guard = lock.lock().await.unwrap();
        let token = guard.fencing_token().expect("fencing enabled");
        assert!(token > last, "token {token} after {last}");
        last = token;
        guard.unlock().await.unwrap();
    }
    let mut conn = raw(&server).await;
    let stored: u64 = conn
        .get(format!("redisson_lock_token:{{{name}}}"))
        .await
        .unwrap();
    assert_eq!(stored, last);
    let guard = a.lock(&name).lock().await.unwrap();
    assert_eq!(guard.fencing_token(), None, "no token unless enabled");
    guard.unlock().await.unwrap();
}
