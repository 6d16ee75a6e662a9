//! Fault suite, memory pressure: with `maxmemory` reached under `noeviction`, every release and
//! renewal still works (they free memory), every acquisition is refused with a typed error
//! before it writes anything, and the watchdog marks no hold lost that the server renewed.
use std::time::Duration;

use keylatch::redis::{self, AsyncCommands};
use keylatch::{AcquireOptions, Error};
use keylatch_tests::{client_with, keyspace, raw, server, unique};

/// How far below the memory in use the filled server's `maxmemory` is set.
const MARGIN: u64 = 256 * 1024;

/// `used_memory` from `INFO memory`.
async fn used_memory(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// Fills the server until it refuses writes: `maxmemory` just above what is used, then values
/// until `OOM`, then `maxmemory` a little below what is used. Returns the key of the filler,
/// to delete afterwards.
async fn fill(conn: &mut redis::aio::MultiplexedConnection, tag: &str) -> Vec<String> {
    let used = used_memory(conn).await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(used + 2 * 1024 * 1024)
        .query_async(conn)
        .await
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("noeviction")
        .query_async(conn)
        .await
        .unwrap();
    // Big values first, then smaller ones, until even a tiny write is refused (a refused big
    // write frees its buffer, which may leave room for a small one).
    let mut keys = Vec::new();
    for size in [256 * 1024, 16 * 1024, 1024, 64] {
        let chunk = vec![b'x'; size];
        for _ in 0..200 {
            let key = format!("filler-{tag}-{}", keys.len());
            let set: redis::RedisResult<()> = conn.set(&key, chunk.as_slice()).await;
            match set {
                Ok(()) => keys.push(key),
                Err(err) if err.code() == Some("OOM") => break,
                Err(err) => panic!("{err}"),
            }
        }
    }
    // Then `maxmemory` goes below what is used, so that the server stays full while the
    // test runs: it frees a little on its own (clients' buffers shrink on a timer), enough
    // for a small write on a build with libc's allocator (Valkey's PyPI wheels).
    let used = used_memory(conn).await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(used - MARGIN)
        .query_async(conn)
        .await
        .unwrap();
    let probe: redis::RedisResult<()> = conn.set(format!("filler-{tag}-probe"), 1).await;
    assert!(
        probe.is_err_and(|e| e.code() == Some("OOM")),
        "the server never ran out of memory"
    );
    keys
}

fn oom<T: std::fmt::Debug>(result: keylatch::Result<T>, what: &str) {
    assert!(
        matches!(result, Err(Error::OutOfMemory(_))),
        "{what}: expected OutOfMemory, got {result:?}"
    );
}

#[tokio::test]
async fn out_of_memory_refuses_acquisitions_and_lets_releases_and_renewals_through() {
    let server = server();
    let watchdog = Duration::from_millis(600);
    let client = client_with(&server, watchdog, Duration::from_millis(200)).await;
    let mut conn = raw(&server).await;
    let name = unique("oom");
    let plain = client.semaphore(&format!("{name}-plain"));
    plain.try_set_permits(2).await.unwrap();
    let expirable = client.permit_expirable_semaphore(&format!("{name}-exp"));
    expirable.try_set_permits(2).await.unwrap();
    let lock = client.lock(&format!("{name}-lock")).lock().await.unwrap();
    let fair = client
        .fair_lock(&format!("{name}-fair"))
        .lock()
        .await
        .unwrap();
    let read = client.rw_lock(&format!("{name}-rw")).read().await.unwrap();
    let permit = plain.acquire().await.unwrap();
    let leased = expirable.acquire().await.unwrap();

    let filler = fill(&mut conn, &name).await;
    let before = keyspace(&mut conn).await;
    // Every acquisition is refused before it writes anything.
    let no_wait = AcquireOptions::new().with_wait(Duration::ZERO);
    oom(client.lock(&format!("{name}-new")).try_lock().await, "lock");
    oom(
        client
            .fair_lock(&format!("{name}-new-fair"))
            .try_lock()
            .await,
        "fair",
    );
    oom(
        client.rw_lock(&format!("{name}-new-rw")).try_write().await,
        "write",
    );
    oom(
        client.rw_lock(&format!("{name}-new-rw")).try_read().await,
        "read",
    );
    oom(plain.acquire_with(no_wait).await, "plain permit");
    oom(expirable.acquire_with(no_wait).await, "expirable permit");
    oom(
        client
            .semaphore(&format!("{name}-new-sem"))
            .try_set_permits(3)
            .await,
        "try_set",
    );
    assert_eq!(
        keyspace(&mut conn).await,
        before,
        "a refused acquisition wrote"
    );

    // Renewals go on: over five watchdog periods no hold is lost.
    tokio::time::sleep(watchdog * 5).await;
    let lost = [
        lock.is_lost(),
        fair.is_lost(),
        read.is_lost(),
        leased.is_lost(),
    ];
    println!("under OOM for {:?}: holds lost {lost:?}", watchdog * 5);
    assert_eq!(lost, [false; 4], "a renewal under OOM marked a hold lost");

    // Releases go through: nothing is left, every permit is back.
    lock.unlock().await.unwrap();
    fair.unlock().await.unwrap();
    read.unlock().await.unwrap();
    permit.release().await.unwrap();
    leased.release().await.unwrap();
    assert_eq!(plain.available_permits().await.unwrap(), 2);
    assert_eq!(expirable.available_permits().await.unwrap(), 2);
    let mut left: Vec<String> = conn.keys(format!("*{name}*")).await.unwrap();
    left.retain(|k| {
        let ignored = k.starts_with("filler-")
            || k.ends_with("-plain")
            || k.ends_with("-exp")
            || k.ends_with(":permits")
            || k.contains(":req:");
        !ignored
    });
    println!(
        "under OOM: every release went through; {} keys left",
        left.len()
    );
    assert!(left.is_empty(), "left behind: {left:?}");

    let _: () = conn.del(filler).await.unwrap();
}
