//! The watchdog keeps a hold alive while its guard lives, stops at unlock, and a holder that
//! dies without unlocking frees the lock within the watchdog timeout.
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch_tests::{client, client_with, raw, server, spawn_reporting, unique};

const WATCHDOG: Duration = Duration::from_millis(600);

#[tokio::test]
async fn hold_outlives_many_leases_and_renewal_stops_at_unlock() {
    let server = server();
    let client = client_with(&server, WATCHDOG, Duration::from_secs(2)).await;
    let name = unique("watchdog");
    let lock = client.lock(&name);
    let mut conn = raw(&server).await;
    let guard = lock.lock().await.unwrap();
    let started = tokio::time::Instant::now();
    let mut samples = 0;
    while started.elapsed() < Duration::from_secs(3) {
        let pttl: i64 = conn.pttl(&name).await.unwrap();
        assert!(pttl > 0, "the key's ttl ran out while held: {pttl}");
        assert!(!guard.is_lost(), "lost while the watchdog should renew");
        samples += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stats = client.stats().watchdog;
    println!(
        "held 3 s with a 600 ms watchdog: {samples} ttl samples, {} renewals",
        stats.renewed_keys
    );
    assert!(
        stats.renewed_keys >= 5,
        "expected renewals, got {}",
        stats.renewed_keys
    );
    assert_eq!(stats.watched, 1);

    let field = guard.owner_id().to_string();
    guard.unlock().await.unwrap();
    assert_eq!(
        client.stats().watchdog.holds,
        0,
        "unlock deregisters at once"
    );
    let renewed = client.stats().watchdog.renewed_keys;
    // Put a hash with our field back by hand: a renewal would find and extend it.
    let _: () = conn.hset(&name, &field, 1).await.unwrap();
    let _: () = conn.pexpire(&name, 5000).await.unwrap();
    tokio::time::sleep(WATCHDOG).await;
    assert_eq!(
        client.stats().watchdog.renewed_keys,
        renewed,
        "a renewal ran after unlock"
    );
    let pttl: i64 = conn.pttl(&name).await.unwrap();
    assert!(
        pttl <= 5000 - 500,
        "the key was renewed after unlock: pttl {pttl}"
    );
}

#[tokio::test]
async fn killed_holder_process_frees_the_lock_within_the_watchdog_timeout() {
    let server = server();
    let name = unique("crash");
    let (mut child, line) = spawn_reporting(
        env!("CARGO_BIN_EXE_keylatch-test-holder"),
        &[server.url(), name.clone(), WATCHDOG.as_millis().to_string()],
        "the holder",
    )
    .await;
    assert_eq!(line.as_deref(), Some("locked"));
    // Let the holder renew a few times, then kill it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let client = client(&server).await;
    assert!(
        client.lock(&name).is_locked().await.unwrap(),
        "the holder's watchdog kept it"
    );
    child.kill().await.unwrap();
    let killed = tokio::time::Instant::now();
    let guard = client
        .lock(&name)
        .try_lock_for(WATCHDOG + Duration::from_secs(1), None)
        .await
        .unwrap();
    println!(
        "acquired {:?} after the holder was killed",
        killed.elapsed()
    );
    assert!(
        guard.is_some(),
        "the lock did not free within the watchdog timeout + 1 s"
    );
}

#[tokio::test]
async fn holder_whose_runtime_shuts_down_frees_the_lock() {
    let server = server();
    let name = unique("runtime-gone");
    let url = server.url();
    let held = name.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let config = keylatch::Config::builder()
                .url(url)
                .watchdog_timeout(WATCHDOG)
                .build()
                .unwrap();
            let client = keylatch::Client::connect_with(config).await.unwrap();
            // The holder "dies": its guard is never released, nor its client shut down.
            std::mem::forget(client.lock(&held).lock().await.unwrap());
            std::mem::forget(client);
        });
        drop(runtime);
    })
    .join()
    .unwrap();
    let client = client(&server).await;
    assert!(client.lock(&name).is_locked().await.unwrap());
    let guard = client
        .lock(&name)
        .try_lock_for(WATCHDOG + Duration::from_secs(1), None)
        .await
        .unwrap();
    assert!(
        guard.is_some(),
        "the lock did not free within the watchdog timeout + 1 s"
    );
}
