//! A crashed holder (a child process SIGKILLed): the permit-expirable semaphore's permit comes
//! back within its lease + 1 s; the plain semaphore's permit does not come back at all (its
//! permits are not owned and never expire — documented on `Semaphore`).
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch_tests::redisson::hex_bytes;
use keylatch_tests::{TakeUnguarded, client, raw, server, spawn_reporting, unique};

const WATCHDOG: Duration = Duration::from_millis(1500);

async fn spawn_holder(
    server: &keylatch_tests::RedisServer,
    name: &str,
    kind: &str,
) -> (tokio::process::Child, String) {
    let (child, line) = spawn_reporting(
        env!("CARGO_BIN_EXE_keylatch-test-permit-holder"),
        &[
            server.url(),
            name.to_owned(),
            WATCHDOG.as_millis().to_string(),
            kind.to_owned(),
        ],
        "the holder",
    )
    .await;
    let line = line.expect("the holder printed a line");
    let id = line
        .strip_prefix("acquired ")
        .unwrap_or_else(|| panic!("unexpected line {line:?}"))
        .to_owned();
    (child, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_holder_permit_returns_within_its_lease_plus_one_second() {
    let server = server();
    let client = client(&server).await;
    let name = unique("xsem-crash");
    let semaphore = client.permit_expirable_semaphore(&name);
    assert!(semaphore.try_set_permits(2).await.unwrap());
    let (mut child, id) = spawn_holder(&server, &name, "expirable").await;
    assert_eq!(id.len(), 32, "a permit id is 32 hex digits: {id:?}");
    // The holder's watchdog keeps the permit past its lease while the holder lives.
    tokio::time::sleep(WATCHDOG + Duration::from_millis(500)).await;
    assert_eq!(semaphore.acquired_permits().await.unwrap(), 1);
    let mut conn = raw(&server).await;
    // Stored as Redisson stores an id: the bytes its hex form stands for.
    let score: Option<f64> = conn
        .zscore(semaphore.timeout_key(), hex_bytes(&id))
        .await
        .unwrap();
    assert!(score.is_some(), "the live holder's permit expired");
    // The only other permit is taken here, so a waiter needs the holder's.
    let mine = semaphore.acquire().await.unwrap();

    child.kill().await.unwrap();
    let killed = tokio::time::Instant::now();
    let waiter = semaphore
        .try_acquire_for(WATCHDOG + Duration::from_secs(1), None)
        .await
        .unwrap();
    let after = killed.elapsed();
    println!(
        "the crashed holder's permit was acquired {after:?} after the kill (lease {WATCHDOG:?})"
    );
    let waiter = waiter.expect("the permit did not return within the lease + 1 s");
    assert_ne!(waiter.id(), id);
    let score: Option<f64> = conn
        .zscore(semaphore.timeout_key(), hex_bytes(&id))
        .await
        .unwrap();
    assert!(score.is_none(), "the dead holder's id is still in the zset");
    waiter.release().await.unwrap();
    mine.release().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_holder_of_a_plain_permit_never_returns_it() {
    let server = server();
    let client = client(&server).await;
    let name = unique("sem-crash");
    let semaphore = client.semaphore(&name);
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let (mut child, _) = spawn_holder(&server, &name, "plain").await;
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    child.kill().await.unwrap();
    // Give it as long as the expirable semaphore needed, and more.
    let got = semaphore
        .try_take_for(1, WATCHDOG + Duration::from_secs(1))
        .await
        .unwrap();
    println!("plain semaphore: permit returned after the holder's crash: {got}");
    assert!(
        !got,
        "a plain permit came back by itself (it has no lease: this would be a change of design)"
    );
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    // Only an explicit release (by anyone) brings it back.
    semaphore.release(1).await.unwrap();
    assert!(semaphore.try_take(1).await.unwrap());
}
