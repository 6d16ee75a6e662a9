//! A reader whose process dies without unlocking: its holds expire after their lease, even
//! while other readers keep the lock (the watchdog renews only its own client's read holds),
//! and a writer gets in.
use std::time::Duration;

use keylatch::Owner;
use keylatch::redis::AsyncCommands;
use keylatch_tests::{client_with, eventually, raw, server, spawn_reporting, unique};
use tokio::time::Instant;

/// The crashed reader's watchdog timeout, i.e. its lease.
const LEASE: Duration = Duration::from_millis(1000);

/// Starts `keylatch-test-rw-reader` holding `holds` read holds; returns it and its owner id.
async fn start_reader(
    server: &keylatch_tests::RedisServer,
    name: &str,
    holds: u32,
) -> (tokio::process::Child, String) {
    let (child, line) = spawn_reporting(
        env!("CARGO_BIN_EXE_keylatch-test-rw-reader"),
        &[
            server.url(),
            name.to_owned(),
            LEASE.as_millis().to_string(),
            holds.to_string(),
        ],
        "the reader",
    )
    .await;
    let line = line.expect("a line");
    let owner = line.strip_prefix("locked ").expect("`locked <owner>`");
    (child, owner.to_owned())
}

#[tokio::test]
async fn a_killed_readers_holds_expire_and_a_writer_gets_in_within_the_lease() {
    let server = server();
    let client = client_with(&server, LEASE, Duration::from_secs(2)).await;
    let name = unique("rw-crash");
    let mut conn = raw(&server).await;
    let (mut child, owner) = start_reader(&server, &name, 2).await;
    let count: u64 = conn.hget(&name, &owner).await.unwrap();
    assert_eq!(count, 2);

    // Let the reader renew a few leases, then kill it.
    tokio::time::sleep(LEASE * 2).await;
    let alive: bool = conn
        .exists(format!("{{{name}}}:{owner}:rwlock_timeout:2"))
        .await
        .unwrap();
    assert!(alive, "the reader's watchdog did not keep its hold");
    child.kill().await.unwrap();
    let killed = Instant::now();

    let writer = client.rw_lock(&name).with_owner(Owner::unique());
    let guard = writer
        .write_lock()
        .try_lock_for(LEASE + Duration::from_secs(1), None)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("the writer was not in within the lease + 1 s"));
    println!(
        "writer in {:?} after the reader was killed (lease {LEASE:?})",
        killed.elapsed()
    );
    guard.unlock().await.unwrap();
    let left: Vec<String> = conn.keys(format!("*{name}*")).await.unwrap();
    assert!(left.is_empty(), "keys left behind: {left:?}");
}

#[tokio::test]
async fn a_killed_readers_hold_expires_on_time_while_a_live_reader_keeps_the_lock() {
    let server = server();
    let client = client_with(&server, LEASE, Duration::from_secs(2)).await;
    let name = unique("rw-crash-shared");
    let mut conn = raw(&server).await;
    let (mut child, dead) = start_reader(&server, &name, 1).await;
    let dead_key = format!("{{{name}}}:{dead}:rwlock_timeout:1");

    // A live reader in watchdog mode (the same 1 s lease) shares the lock and outlives the
    // dead one: its renewals must not extend the dead reader's hold.
    let live = client
        .rw_lock(&name)
        .with_owner(Owner::unique())
        .read()
        .await
        .unwrap();
    tokio::time::sleep(LEASE).await;
    child.kill().await.unwrap();
    let killed = Instant::now();
    let expired = eventually(LEASE + Duration::from_secs(1), || {
        let mut conn = conn.clone();
        let dead_key = dead_key.clone();
        async move { !conn.exists::<_, bool>(&dead_key).await.unwrap() }
    })
    .await;
    println!(
        "the killed reader's hold key expired {:?} after the kill, while a live reader held \
         the lock",
        killed.elapsed()
    );
    assert!(
        expired,
        "the dead reader's hold was renewed by another reader's watchdog"
    );
    tokio::time::sleep(LEASE).await;
    assert!(!live.is_lost(), "the live reader's hold was not renewed");
    let pttl: i64 = conn.pttl(&name).await.unwrap();
    assert!(
        pttl > 0 && pttl <= LEASE.as_millis() as i64,
        "the hash's ttl follows the longest live hold: {pttl}"
    );

    // A writer waits for the live reader only: when it leaves, the dead reader's stale field
    // is dropped and the lock is free.
    let writer = client.rw_lock(&name).with_owner(Owner::unique());
    let waiting = tokio::spawn(async move {
        writer
            .write_lock()
            .try_lock_for(Duration::from_secs(10), Some(Duration::from_secs(10)))
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiting.is_finished(),
        "the writer got in past a live reader"
    );
    let released = Instant::now();
    live.unlock().await.unwrap();
    let guard = waiting.await.unwrap().expect("the writer gets in");
    println!(
        "writer in {:?} after the live reader left",
        released.elapsed()
    );
    assert!(
        released.elapsed() < Duration::from_secs(1),
        "the last live reader's release did not free the lock"
    );
    let fields: Vec<String> = conn.hkeys(&name).await.unwrap();
    assert!(
        !fields.contains(&dead),
        "the dead reader's field survived: {fields:?}"
    );
    guard.unlock().await.unwrap();
}
