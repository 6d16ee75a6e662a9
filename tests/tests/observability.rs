//! keylatch says what it is doing: a hold that is lost and a renewal that failed are `warn`
//! events with the fields an operator needs, and no secret is in them.
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch_tests::{capture, client_via, pause, raw, server, unique};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_holds_and_failed_renewals_are_warned_about() {
    let captured = capture(tracing::Level::WARN);

    let server = server();
    let client = client_via(
        server.url(),
        Duration::from_millis(900),
        Duration::from_millis(200),
    )
    .await;
    let mut conn = raw(&server).await;

    // A hold whose key someone deleted: the next renewal finds it gone.
    let name = unique("observed-lost");
    let guard = client.lock(&name).lock().await.unwrap();
    let _: () = conn.del(&name).await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("the loss is noticed");
    drop(guard);

    // A renewal the server does not answer in time.
    let other = unique("observed-slow");
    let held = client.lock(&other).lock().await.unwrap();
    pause(&mut conn, 1500).await;
    for _ in 0..40 {
        if captured.text().contains("renewal failed") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(held);

    let text = captured.text();
    println!("captured events:\n{text}");
    let lost = text
        .lines()
        .find(|l| l.contains("hold lost") && l.contains(&name))
        .expect("a `hold lost` event for the deleted key");
    assert!(lost.contains("WARN"), "{lost}");
    assert!(lost.contains(&format!("key={name}")), "{lost}");
    assert!(lost.contains("held_ms="), "{lost}");
    assert!(
        lost.contains("why=\"the server no longer has it\""),
        "{lost}"
    );
    let failed = text
        .lines()
        .find(|l| l.contains("renewal failed"))
        .expect("a `renewal failed` event");
    assert!(
        failed.contains("WARN") && failed.contains("error="),
        "{failed}"
    );
    assert!(!text.contains("password"), "no secret in the events");
}
