//! `Client::shutdown` gives back everything the client holds, ends its waits with `Closed`, and
//! closes the client; a program that ends after it leaves no hold; one that is killed leaves
//! nothing beyond its leases; a client dropped with live holds releases them.
use std::time::Duration;

use keylatch::Error;
use keylatch::redis::AsyncCommands;
use keylatch_tests::{client, eventually, raw, server, spawn_reporting, unique};

/// The keys that are holds, queue entries or permits taken (not the semaphores' own counts).
async fn held_keys(
    conn: &mut keylatch::redis::aio::MultiplexedConnection,
    name: &str,
) -> Vec<String> {
    let mut keys: Vec<String> = conn.keys(format!("*{name}*")).await.unwrap();
    keys.retain(|k| {
        // A plain semaphore's count and an expirable one's total are the semaphores themselves;
        // an expirable permit is counted by `permits_back` (an expired one stays in the zset
        // until the next call reclaims it).
        let semaphore = k.ends_with("-plain")
            || k.ends_with("-exp")
            || k.ends_with(":permits")
            || k.ends_with("-exp}:timeout");
        // A hold's holder metadata (`keylatch_meta:{name}`) goes with the hold: checked on its
        // own after the shutdown.
        !semaphore && !k.contains(":req:") && !k.starts_with("keylatch_meta:")
    });
    keys.sort();
    keys
}

async fn permits_back(conn: &mut keylatch::redis::aio::MultiplexedConnection, name: &str) -> bool {
    let plain: Option<String> = conn.get(format!("{name}-plain")).await.unwrap();
    let exp: Option<String> = conn.get(format!("{name}-exp")).await.unwrap();
    let timeouts: i64 = conn.zcard(format!("{{{name}-exp}}:timeout")).await.unwrap();
    plain.as_deref() == Some("2") && exp.as_deref() == Some("2") && timeouts == 0
}

#[tokio::test]
async fn shutdown_releases_everything_and_closes() {
    let server = server();
    let client = client(&server).await;
    let other = keylatch_tests::client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("shutdown");
    let plain = client.semaphore(&format!("{name}-plain"));
    plain.try_set_permits(2).await.unwrap();
    let expirable = client.permit_expirable_semaphore(&format!("{name}-exp"));
    expirable.try_set_permits(2).await.unwrap();

    let lock = client.lock(&format!("{name}-lock"));
    let guard = lock.lock().await.unwrap();
    let lost = guard.lost();
    let fair = client
        .fair_lock(&format!("{name}-fair"))
        .lock()
        .await
        .unwrap();
    let read = client.rw_lock(&format!("{name}-rw")).read().await.unwrap();
    let permit = plain
        .acquire_many(2, keylatch::AcquireOptions::new())
        .await
        .unwrap()
        .unwrap();
    let leased = expirable.acquire().await.unwrap();
    // A wait in progress: another client holds the name it waits for.
    let blocker = other.lock(&format!("{name}-busy")).lock().await.unwrap();
    let waiting = {
        let lock = client.lock(&format!("{name}-busy"));
        tokio::spawn(async move { lock.lock().await.map(|_| ()) })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!held_keys(&mut conn, &name).await.is_empty());

    client.shutdown().await.unwrap();

    let left = held_keys(&mut conn, &name).await;
    // Holder metadata is off by default: neither client wrote any.
    let metas: Vec<String> = conn.keys(format!("keylatch_meta:*{name}*")).await.unwrap();
    assert_eq!(
        metas,
        Vec::<String>::new(),
        "no holder metadata without the setting"
    );
    println!("after shutdown: {} hold keys left ({left:?})", left.len());
    assert_eq!(
        left,
        vec![format!("{name}-busy")],
        "only the other client's hold remains"
    );
    assert!(
        permits_back(&mut conn, &name).await,
        "every permit came back"
    );
    let waited = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(waited, Err(Error::Closed)),
        "the wait ended: {waited:?}"
    );
    tokio::time::timeout(Duration::from_secs(1), lost)
        .await
        .expect("the guard reports its hold lost");
    assert_eq!(client.stats().watchdog.holds, 0);

    // Every call after it is refused with `Closed`, and leaves Redis untouched.
    let before = keylatch_tests::keyspace(&mut conn).await;
    assert!(matches!(guard.unlock().await, Err(Error::Closed)));
    assert!(matches!(permit.release().await, Err(Error::Closed)));
    assert!(matches!(lock.try_lock().await, Err(Error::Closed)));
    assert!(matches!(lock.is_locked().await, Err(Error::Closed)));
    assert!(matches!(plain.release(1).await, Err(Error::Closed)));
    assert!(matches!(expirable.acquire().await, Err(Error::Closed)));
    assert!(matches!(
        client.lock("x").force_unlock().await,
        Err(Error::Closed)
    ));
    drop((fair, read, leased));
    client.wait_idle().await;
    assert_eq!(
        keylatch_tests::keyspace(&mut conn).await,
        before,
        "Redis untouched"
    );
    assert!(client.is_closed());
    // A second shutdown is harmless.
    client.shutdown().await.unwrap();
    blocker.unlock().await.unwrap();
}

#[tokio::test]
async fn a_program_that_ends_after_shutdown_leaves_no_hold() {
    let server = server();
    let mut conn = raw(&server).await;
    let name = unique("cron");
    let (mut child, line) = spawn_reporting(
        env!("CARGO_BIN_EXE_keylatch-test-cron"),
        &[server.url(), name.clone(), "shutdown".into()],
        "cron",
    )
    .await;
    assert_eq!(line.as_deref(), Some("held"));
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the program ends")
        .unwrap();
    assert!(status.success());
    // Checked at once: nothing was left to a lease.
    let left = held_keys(&mut conn, &name).await;
    println!(
        "a program ended after shutdown(): {} hold keys left",
        left.len()
    );
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(
        permits_back(&mut conn, &name).await,
        "every permit came back"
    );
}

#[tokio::test]
async fn a_killed_program_leaves_nothing_beyond_its_leases() {
    let server = server();
    let mut conn = raw(&server).await;
    let name = unique("cron-kill");
    let (mut child, line) = spawn_reporting(
        env!("CARGO_BIN_EXE_keylatch-test-cron"),
        &[server.url(), name.clone(), "hang".into()],
        "cron",
    )
    .await;
    assert_eq!(line.as_deref(), Some("held"));
    child.kill().await.unwrap();
    // The watchdog timeout is 1.5 s: every hold and the expirable permit end within it (+1 s).
    let freed = eventually(Duration::from_millis(2500), || {
        let mut conn = conn.clone();
        let name = name.clone();
        async move { held_keys(&mut conn, &name).await.is_empty() }
    })
    .await;
    assert!(freed, "left: {:?}", held_keys(&mut conn, &name).await);
    let exp = client(&server)
        .await
        .permit_expirable_semaphore(&format!("{name}-exp"));
    assert_eq!(
        exp.available_permits().await.unwrap(),
        2,
        "the expirable permit came back"
    );
    // The plain semaphore's permits never expire: a killed holder keeps its permit (the reason
    // `keylatch run --semaphore` uses the permit-expirable semaphore).
    let plain: String = conn.get(format!("{name}-plain")).await.unwrap();
    assert_eq!(plain, "1");
}

#[tokio::test]
async fn a_client_dropped_with_live_holds_releases_them() {
    let server = server();
    let conn = raw(&server).await;
    let name = unique("dropped");
    let client = client(&server).await;
    let semaphore = client.semaphore(&format!("{name}-plain"));
    semaphore.try_set_permits(2).await.unwrap();
    let guard = client.lock(&format!("{name}-lock")).lock().await.unwrap();
    let permit = semaphore.acquire().await.unwrap();
    drop(semaphore);
    drop(client);
    let released = eventually(Duration::from_secs(5), || {
        let mut conn = conn.clone();
        let name = name.clone();
        async move {
            let plain: String = conn.get(format!("{name}-plain")).await.unwrap();
            held_keys(&mut conn, &name).await.is_empty() && plain == "2"
        }
    })
    .await;
    assert!(released, "the dropped client released its hold and permit");
    assert!(guard.is_lost());
    drop((guard, permit));
}
