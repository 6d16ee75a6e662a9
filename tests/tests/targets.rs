//! Events and spans are filed under `keylatch::…` targets, the names docs/observability.md
//! gives, never under an internal crate's module path.
use std::time::Duration;

use keylatch::redis;
use keylatch_tests::support::capture;
use keylatch_tests::{client_with, raw, script_flush, server, unique};

#[tokio::test]
async fn every_event_is_under_a_keylatch_target() {
    let log = capture(tracing::Level::TRACE);
    let server = server();
    let client = client_with(
        &server,
        Duration::from_millis(600),
        Duration::from_millis(200),
    )
    .await;
    let mut conn = raw(&server).await;
    // A NOSCRIPT reload (keylatch::connection), spans of an acquisition and a release
    // (keylatch::lock), a lost hold (keylatch::watchdog).
    script_flush(&mut conn).await;
    let name = unique("targets");
    let guard = client.lock(&name).lock().await.unwrap();
    let _: () = redis::cmd("DEL")
        .arg(&name)
        .query_async(&mut conn)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("the hold is reported lost");
    drop(guard);
    client
        .lock(&name)
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    client.shutdown().await.unwrap();

    let text = log.text();
    for target in [
        "keylatch::connection",
        "keylatch::watchdog",
        "keylatch::lock",
    ] {
        assert!(text.contains(target), "no event under {target}:\n{text}");
    }
    for internal in [
        "keylatch_core",
        "keylatch_fair",
        "keylatch_semaphore",
        "keylatch_reentrant",
    ] {
        assert!(
            !text.contains(internal),
            "an event under {internal}:\n{text}"
        );
    }
}
