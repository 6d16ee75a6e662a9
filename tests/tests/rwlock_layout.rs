//! The read-write lock's keys, fields, TTLs and messages are Redisson's (`RReadWriteLock`),
//! plus keylatch's writer-intent zset; bad input gets a typed error and leaves Redis untouched.
use std::time::Duration;

use futures_util::StreamExt;
use keylatch::redis::{self, AsyncCommands};
use keylatch::{Error, MAX_LEASE, MAX_NAME_LEN, Owner};
use keylatch_tests::{client, eventually, invalid_leases, keyspace, pubsub, raw, server, unique};

type Conn = redis::aio::MultiplexedConnection;

/// The hash's fields, compared with `expected` in any order.
async fn assert_fields(conn: &mut Conn, name: &str, expected: &[(&str, &str)]) {
    let mut fields: Vec<(String, String)> = conn.hgetall(name).await.unwrap();
    fields.sort();
    let mut expected: Vec<(String, String)> = expected
        .iter()
        .map(|(f, v)| ((*f).to_owned(), (*v).to_owned()))
        .collect();
    expected.sort();
    assert_eq!(fields, expected);
}

async fn pttl(conn: &mut Conn, key: &str) -> i64 {
    conn.pttl(key).await.unwrap()
}

fn hold_key(name: &str, owner: &str, n: u32) -> String {
    format!("{{{name}}}:{owner}:rwlock_timeout:{n}")
}

#[tokio::test]
async fn read_holds_fields_per_hold_keys_and_ttls() {
    let server = server();
    let client = client(&server).await;
    let name = unique("rw-layout-read");
    let mut conn = raw(&server).await;
    let rw = client.rw_lock(&name).with_owner(Owner::unique());
    let other = client.rw_lock(&name).with_owner(Owner::unique());

    let r1 = rw
        .read_lock()
        .lock_with_lease(Duration::from_secs(20))
        .await
        .unwrap();
    let me = r1.owner_id().to_string();
    assert!(me.starts_with(&client.id().to_string()));
    assert_fields(&mut conn, &name, &[("mode", "read"), (&me, "1")]).await;
    let key1 = hold_key(&name, &me, 1);
    let value: String = conn.get(&key1).await.unwrap();
    assert_eq!(value, "1");
    assert!((19_000..=20_000).contains(&pttl(&mut conn, &key1).await));
    assert!((19_000..=20_000).contains(&pttl(&mut conn, &name).await));

    // A shorter re-entry: its own key and TTL; the hash keeps the longest.
    let r2 = rw
        .read_lock()
        .lock_with_lease(Duration::from_secs(5))
        .await
        .unwrap();
    let key2 = hold_key(&name, &me, 2);
    assert!((4_000..=5_000).contains(&pttl(&mut conn, &key2).await));
    assert!((19_000..=20_000).contains(&pttl(&mut conn, &name).await));
    let count: u64 = conn.hget(&name, &me).await.unwrap();
    assert_eq!(count, 2);

    // A longer hold by another owner: the hash follows it; when it goes, the hash's TTL
    // falls back to the longest remaining hold.
    let long = other
        .read_lock()
        .lock_with_lease(Duration::from_secs(40))
        .await
        .unwrap();
    let them = long.owner_id().to_string();
    assert!((39_000..=40_000).contains(&pttl(&mut conn, &name).await));
    long.unlock().await.unwrap();
    let after = pttl(&mut conn, &name).await;
    assert!(
        (18_000..=20_000).contains(&after),
        "the hash's ttl did not fall back to the longest remaining hold: {after}"
    );
    let exists: bool = conn.exists(hold_key(&name, &them, 1)).await.unwrap();
    assert!(!exists);

    // Releasing deletes the newest hold's key first.
    r2.unlock().await.unwrap();
    let exists: bool = conn.exists(&key2).await.unwrap();
    assert!(!exists);
    let count: u64 = conn.hget(&name, &me).await.unwrap();
    assert_eq!(count, 1);
    r1.unlock().await.unwrap();
    let left: Vec<String> = conn.keys(format!("*{name}*")).await.unwrap();
    assert!(left.is_empty(), "{left:?}");

    // Watchdog mode: the lease is the watchdog timeout.
    let r = rw.read().await.unwrap();
    assert!((29_000..=30_000).contains(&pttl(&mut conn, &key1).await));
    assert!((29_000..=30_000).contains(&pttl(&mut conn, &name).await));
    r.unlock().await.unwrap();

    // A name that carries its own hash tag (accepted when configured) gets no extra braces.
    let tagged = format!("{{{name}}}-tagged");
    let config = keylatch::Config::builder()
        .url(server.url())
        .hash_tagged_names(true)
        .build()
        .unwrap();
    let client = keylatch::Client::connect_with(config).await.unwrap();
    let r = client.rw_lock(&tagged).read().await.unwrap();
    let key = format!("{tagged}:{}:rwlock_timeout:1", r.owner_id());
    let exists: bool = conn.exists(&key).await.unwrap();
    assert!(exists, "expected {key}");
    assert_eq!(
        client.rw_lock(&tagged).channel(),
        format!("redisson_rwlock:{tagged}")
    );
    r.unlock().await.unwrap();
}

#[tokio::test]
async fn write_hold_fields_and_ttls() {
    let server = server();
    let client = client(&server).await;
    let name = unique("rw-layout-write");
    let mut conn = raw(&server).await;
    let rw = client.rw_lock(&name).with_owner(Owner::unique());
    let w1 = rw
        .write_lock()
        .lock_with_lease(Duration::from_secs(10))
        .await
        .unwrap();
    let me = w1.owner_id().to_string();
    let w2 = rw.write().await.unwrap();
    let my_write = format!("{me}:write");
    assert_fields(&mut conn, &name, &[(&my_write, "2"), ("mode", "write")]).await;
    // The re-entry in watchdog mode extended the hash to the watchdog timeout.
    assert!((29_000..=30_000).contains(&pttl(&mut conn, &name).await));
    // The writer's read hold: a field and a per-hold key, as any reader's.
    let r = rw.read().await.unwrap();
    assert_fields(
        &mut conn,
        &name,
        &[(&me, "1"), (&my_write, "2"), ("mode", "write")],
    )
    .await;
    assert!(pttl(&mut conn, &hold_key(&name, &me, 1)).await > 0);
    w2.unlock().await.unwrap();
    w1.unlock().await.unwrap();
    assert_fields(&mut conn, &name, &[(&me, "1"), ("mode", "read")]).await;
    r.unlock().await.unwrap();
    let left: Vec<String> = conn.keys(format!("*{name}*")).await.unwrap();
    assert!(left.is_empty(), "{left:?}");

    let w = rw
        .write_lock()
        .lock_with_lease(Duration::from_secs(10))
        .await
        .unwrap();
    assert!((9_000..=10_000).contains(&pttl(&mut conn, &name).await));
    w.unlock().await.unwrap();
}

#[tokio::test]
async fn messages_on_the_rwlock_channel() {
    let server = server();
    let client = client(&server).await;
    let name = unique("rw-layout-messages");
    let channel = format!("redisson_rwlock:{{{name}}}");
    let rw = client.rw_lock(&name).with_owner(Owner::unique());
    assert_eq!(rw.channel(), channel);
    let mut pubsub = pubsub(&server).await;
    pubsub.subscribe(&channel).await.unwrap();

    // Last reader gone: `0`. A re-entered reader publishes only on its last release.
    let r1 = rw.read().await.unwrap();
    let r2 = rw.read().await.unwrap();
    r1.unlock().await.unwrap();
    r2.unlock().await.unwrap();
    // Writer gone: `1`.
    let w = rw.write().await.unwrap();
    w.unlock().await.unwrap();
    // Downgrade: the writer leaves (`1`), then its read hold (`0`).
    let w = rw.write().await.unwrap();
    let r = rw.read().await.unwrap();
    w.unlock().await.unwrap();
    r.unlock().await.unwrap();
    // Force unlock: `0` in read mode, `1` in write mode.
    let _r = rw.read().await.unwrap();
    assert!(rw.force_unlock().await.unwrap());
    let _w = rw.write().await.unwrap();
    assert!(rw.force_unlock().await.unwrap());

    let mut messages = pubsub.on_message();
    let mut got = Vec::new();
    for _ in 0..6 {
        let msg = tokio::time::timeout(Duration::from_secs(5), messages.next())
            .await
            .expect("a message arrives")
            .unwrap();
        assert_eq!(msg.get_channel_name(), channel);
        got.push(msg.get_payload::<String>().unwrap());
    }
    assert_eq!(got, ["0", "1", "1", "0", "0", "1"]);
    let extra = tokio::time::timeout(Duration::from_millis(200), messages.next()).await;
    assert!(extra.is_err(), "an unexpected message: {extra:?}");
}

#[tokio::test]
async fn a_waiting_writer_is_recorded_in_the_intent_zset() {
    let server = server();
    let client = client(&server).await;
    let name = unique("rw-layout-intent");
    let mut conn = raw(&server).await;
    let rw = client.rw_lock(&name);
    assert_eq!(rw.writer_intent_key(), format!("{{{name}}}:write_intent"));
    let reading = rw
        .read_lock()
        .with_owner(Owner::unique())
        .lock()
        .await
        .unwrap();
    let writer = rw.write_lock().with_owner(Owner::unique());
    // A try once records nothing.
    assert!(writer.try_lock().await.unwrap().is_none());
    let exists: bool = conn.exists(rw.writer_intent_key()).await.unwrap();
    assert!(!exists, "a try-once recorded an intent");

    let waiting = tokio::spawn({
        let writer = writer.clone();
        async move { writer.try_lock_for(Duration::from_secs(10), None).await }
    });
    let key = rw.writer_intent_key().to_owned();
    let recorded = eventually(Duration::from_secs(5), || {
        let mut conn = conn.clone();
        let key = key.clone();
        async move { conn.exists::<_, bool>(&key).await.unwrap() }
    })
    .await;
    assert!(recorded);
    let entries: Vec<(String, f64)> = conn.zrange_withscores(&key, 0, -1).await.unwrap();
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    let now = (secs * 1000 + micros / 1000) as f64;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(entries[0].0.starts_with(&client.id().to_string()));
    let left = entries[0].1 - now;
    assert!(
        (3_000.0..=5_000.0).contains(&left),
        "the deadline is the intent timeout (5 s) ahead: {left}"
    );
    let ttl = pttl(&mut conn, &key).await;
    assert!((1..=5_000).contains(&ttl), "the zset expires: {ttl}");

    reading.unlock().await.unwrap();
    let guard = waiting.await.unwrap().unwrap().expect("the writer gets in");
    let exists: bool = conn.exists(&key).await.unwrap();
    assert!(!exists, "the acquire removed the intent");
    assert_eq!(
        guard.owner_id().to_string(),
        entries[0].0,
        "the intent is the writer's owner id"
    );
    guard.unlock().await.unwrap();
    client.wait_idle().await;
    assert_eq!(
        client.stats().watchdog.holds,
        0,
        "the intent's refresh ended"
    );
}

#[tokio::test]
async fn bad_input_is_refused_and_redis_is_untouched() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let string_key = unique("rw-a-string");
    let bare_hash = unique("rw-no-ttl");
    let plain_lock = unique("rw-plain-lock");
    let _: () = conn.set(&string_key, "user data").await.unwrap();
    let _: () = conn
        .hset_multiple(&bare_hash, &[("mode", "read"), ("someone:1", "1")])
        .await
        .unwrap();
    // Another primitive's hash under the same name: a reentrant lock held with a lease.
    let held = client
        .lock(&plain_lock)
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    let before = keyspace(&mut conn).await;

    let long = "x".repeat(MAX_NAME_LEN + 1);
    for name in ["", long.as_str()] {
        let rw = client.rw_lock(name);
        let results = [
            rw.read().await.map(|_| ()),
            rw.write().await.map(|_| ()),
            rw.try_read().await.map(|_| ()),
            rw.try_write().await.map(|_| ()),
            rw.is_locked().await.map(|_| ()),
            rw.force_unlock().await.map(|_| ()),
            rw.read_lock().force_unlock().await.map(|_| ()),
            rw.write_lock().is_locked().await.map(|_| ()),
            rw.read_lock().hold_count().await.map(|_| ()),
            rw.write_lock().remaining_ttl().await.map(|_| ()),
        ];
        for result in results {
            assert!(
                matches!(result, Err(Error::InvalidName { .. })),
                "{result:?}"
            );
        }
    }
    let rw = client.rw_lock(&unique("rw-lease"));
    for lease in invalid_leases() {
        let err = rw.read_lock().lock_with_lease(lease).await.unwrap_err();
        assert!(matches!(err, Error::InvalidLease { .. }), "{err:?}");
        let err = rw.write_lock().lock_with_lease(lease).await.unwrap_err();
        assert!(matches!(err, Error::InvalidLease { .. }), "{err:?}");
    }
    for timeout in [Duration::ZERO, Duration::from_millis(5), MAX_LEASE * 2] {
        let err = rw
            .clone()
            .with_writer_intent_timeout(timeout)
            .write()
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidConfig {
                    field: "writer_intent_timeout",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    let wrong = client.rw_lock(&string_key);
    let results = [
        wrong.try_read().await.map(|_| ()),
        wrong.try_write().await.map(|_| ()),
        wrong
            .write_lock()
            .lock_with_lease(Duration::from_secs(1))
            .await
            .map(|_| ()),
        wrong.read().await.map(|_| ()),
        wrong.force_unlock().await.map(|_| ()),
        wrong.is_locked().await.map(|_| ()),
        wrong
            .read_lock()
            .with_owner(Owner::unique())
            .hold_count()
            .await
            .map(|_| ()),
    ];
    for result in results {
        let err = result.unwrap_err();
        assert!(
            matches!(&err, Error::WrongType { key } if *key == string_key),
            "{err:?}"
        );
    }

    let bare = client.rw_lock(&bare_hash);
    assert!(matches!(bare.try_read().await, Err(Error::NoTtl { .. })));
    assert!(matches!(bare.read().await, Err(Error::NoTtl { .. })));
    assert!(matches!(bare.try_write().await, Err(Error::NoTtl { .. })));
    assert!(matches!(bare.write().await, Err(Error::NoTtl { .. })));
    assert!(matches!(
        bare.read_lock().remaining_ttl().await,
        Err(Error::NoTtl { .. })
    ));

    // A plain lock's hash has no `mode`: the read-write lock waits for it, and never writes
    // into it or force-unlocks it.
    let plain = client.rw_lock(&plain_lock);
    assert!(plain.try_read().await.unwrap().is_none());
    assert!(plain.try_write().await.unwrap().is_none());
    assert!(!plain.force_unlock().await.unwrap());
    assert!(!plain.is_locked().await.unwrap());

    assert_eq!(keyspace(&mut conn).await, before, "bad input changed Redis");
    assert_eq!(
        client.stats().watchdog.holds,
        1,
        "only the plain lock's hold"
    );
    held.unlock().await.unwrap();
}

#[tokio::test]
async fn unlock_by_a_non_owner_is_not_held_and_changes_nothing() {
    let server = server();
    let client = client(&server).await;
    let name = unique("rw-non-owner");
    let mut conn = raw(&server).await;
    let rw = client.rw_lock(&name).with_owner(Owner::unique());
    for write in [false, true] {
        let guard = if write {
            rw.write().await.unwrap()
        } else {
            rw.read().await.unwrap()
        };
        assert!(rw.force_unlock().await.unwrap());
        // Someone else takes the lock in the other mode; the old guard is no owner.
        let other = client.rw_lock(&name).with_owner(Owner::unique());
        let new = if write {
            other.read().await.unwrap()
        } else {
            other.write().await.unwrap()
        };
        let before = keyspace(&mut conn).await;
        let err = guard.unlock().await.unwrap_err();
        assert!(matches!(err, Error::NotHeld { .. }), "{err:?}");
        assert_eq!(keyspace(&mut conn).await, before);
        new.unlock().await.unwrap();
    }
}
