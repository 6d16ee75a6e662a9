//! SCRIPT FLUSH between (and during) operations never reaches the caller.
use std::time::Duration;

use keylatch_tests::{client, raw, script_flush, server, unique};

#[tokio::test]
async fn script_flush_between_operations_is_invisible() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let lock = client
        .lock(&unique("flush"))
        .with_owner(keylatch::Owner::unique());
    for _ in 0..20 {
        script_flush(&mut conn).await;
        let guard = lock.lock().await.expect("lock after SCRIPT FLUSH");
        script_flush(&mut conn).await;
        let again = lock.lock().await.expect("re-entry after SCRIPT FLUSH");
        script_flush(&mut conn).await;
        again.unlock().await.expect("unlock after SCRIPT FLUSH");
        guard.unlock().await.expect("unlock after SCRIPT FLUSH");
    }
    assert!(!lock.is_locked().await.unwrap());
    let reloads = client.stats().script_reloads;
    println!("20 rounds with SCRIPT FLUSH: {reloads} transparent reloads");
    assert!(
        reloads >= 60,
        "the flushes were not seen: {reloads} reloads"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_while_the_watchdog_renews_is_invisible() {
    let server = server();
    let client =
        keylatch_tests::client_with(&server, Duration::from_millis(300), Duration::from_secs(2))
            .await;
    let mut conn = raw(&server).await;
    let guard = client.lock(&unique("flush-watchdog")).lock().await.unwrap();
    for _ in 0..10 {
        script_flush(&mut conn).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!guard.is_lost(), "a flushed renewal script lost the hold");
    guard.unlock().await.unwrap();
}
