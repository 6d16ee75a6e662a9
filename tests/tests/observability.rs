//! keylatch says what it is doing: a hold that is lost and a renewal that failed are `warn`
//! events with the fields an operator needs, and no secret is in them, even when the URL
//! carries the password and the connection breaks, is refused and comes back.
use std::time::Duration;

use keylatch::redis::{self, AsyncCommands};
use keylatch_testkit::{Fault, FaultProxy, RedisServer};
use keylatch_tests::{capture, client_via, eventually, pause, unique};

/// The server's password: it is in the URL the client is given, and must be in no event.
const PASSWORD: &str = "Obs3rved-S3cr3t-7c1f";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_holds_and_failed_renewals_are_warned_about() {
    let captured = capture(tracing::Level::DEBUG);

    let server = RedisServer::builder()
        .password(PASSWORD)
        .start()
        .expect("start a password-protected redis-server");
    // The client goes through a proxy, so its connections can be cut and refused.
    let proxy = FaultProxy::start(server.port()).unwrap();
    let host_port = format!("127.0.0.1:{}", proxy.port());
    let url = format!("redis://:{PASSWORD}@{host_port}");
    let client = client_via(
        url.clone(),
        Duration::from_millis(900),
        Duration::from_millis(200),
    )
    .await;
    let mut conn = redis::Client::open(format!("redis://:{PASSWORD}@127.0.0.1:{}", server.port()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();

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
    client.wait_idle().await;

    // Every connection is cut and new ones are refused for a while (renewals and the
    // pub/sub hub reconnect, and fail), then let through again: the hub reconnects.
    let broken = client
        .lock(&unique("observed-broken"))
        .lock()
        .await
        .unwrap();
    let reconnects = client.stats().hub_reconnects;
    proxy.set(Fault::Refuse);
    proxy.reset_connections();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    proxy.set(Fault::Pass);
    let reconnected = eventually(Duration::from_secs(10), || async {
        client.stats().hub_reconnects > reconnects && client.stats().hub_connected
    })
    .await;
    assert!(reconnected, "the hub reconnected: {:?}", client.stats());
    drop(broken);
    client.wait_idle().await;

    // A client that cannot connect: its error names the server, not the password.
    proxy.set(Fault::Refuse);
    let refused = keylatch::Client::connect_with(
        keylatch::Config::builder()
            .url(url.clone())
            .connect_timeout(Duration::from_millis(500))
            .build()
            .unwrap(),
    )
    .await
    .expect_err("the proxy refuses connections");
    proxy.set(Fault::Pass);
    let shown = format!("{refused} / {refused:?}");
    println!("refused: {shown}");

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
    // The check is not vacuous: events were captured that name the server.
    let naming = text.lines().filter(|l| l.contains(&host_port)).count();
    println!("{naming} events name {host_port}");
    assert!(
        naming > 0,
        "no captured event names the server ({host_port})"
    );
    assert!(!text.contains(PASSWORD), "the password is in the events");
    assert!(!text.contains("password"), "no secret in the events");
    assert!(
        !shown.contains(PASSWORD),
        "the password is in the error: {shown}"
    );
}
