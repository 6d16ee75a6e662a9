//! Fault suite, undos that outlast the request window: an acquisition cut off at its wait
//! bound while the server is stopped (`SIGSTOP`) longer than the request window is undone once
//! the server runs again, on each semaphore. The acquire waits in the server's socket and is
//! applied when the server resumes; its undo, handed to the background and retried while the
//! client lives, gives the permit back. Before, the undo was dropped when the wait bound cut
//! the call while the undo ran, or gave up once the request window had passed, and the permit
//! was gone for good.
use std::time::Duration;

use keylatch_tests::{eventually, server, unique};

/// A client that calls a reply lost after 300 ms, with a 2-second request window.
async fn impatient(server: &keylatch_tests::RedisServer) -> keylatch::Client {
    let config = keylatch::Config::builder()
        .url(server.url())
        .response_timeout(Duration::from_millis(300))
        .connect_timeout(Duration::from_millis(300))
        .release_timeout(Duration::from_millis(500))
        .settle_window(Duration::from_secs(2))
        .fallback_poll(Duration::from_millis(100))
        .build()
        .unwrap();
    keylatch::Client::connect_with(config).await.unwrap()
}

/// Stops the server for `pause` while `attempt` runs, then lets it run again.
async fn with_server_stopped<T>(
    server: &keylatch_tests::RedisServer,
    pause: Duration,
    attempt: impl Future<Output = T>,
) -> T {
    server.pause().unwrap();
    let resume = async {
        tokio::time::sleep(pause).await;
        server.resume().unwrap();
    };
    let (out, ()) = tokio::join!(attempt, resume);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_try_acquire_cut_in_a_long_pause_loses_no_permit() {
    let server = server();
    let client = impatient(&server).await;
    let semaphore = client.semaphore(&unique("undo-pause"));
    semaphore.try_set_permits(1).await.unwrap();

    // Twice the request window: the undo must outlast it.
    let outcome =
        with_server_stopped(&server, Duration::from_secs(4), semaphore.try_acquire()).await;
    assert!(outcome.is_err(), "the server did not answer: {outcome:?}");

    let back = eventually(Duration::from_secs(15), || {
        let semaphore = semaphore.clone();
        async move { semaphore.available_permits().await.ok() == Some(1) }
    })
    .await;
    let left = semaphore.available_permits().await.unwrap();
    assert!(
        back,
        "a permit was lost to a timed-out acquisition: {left}/1 available"
    );
    client.wait_idle().await;
    // And stays so: nothing arrives late to take it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    client.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expirable_try_acquire_cut_in_a_long_pause_loses_no_permit() {
    let server = server();
    let client = impatient(&server).await;
    let semaphore = client.permit_expirable_semaphore(&unique("undo-pause-exp"));
    semaphore.try_set_permits(1).await.unwrap();

    // A lease far longer than the check: a permit kept by the late acquire would stay taken.
    let attempt = semaphore.acquire_with(
        keylatch::AcquireOptions::new()
            .with_wait(Duration::ZERO)
            .with_lease(Duration::from_secs(300)),
    );
    let outcome = with_server_stopped(&server, Duration::from_secs(4), attempt).await;
    assert!(outcome.is_err(), "the server did not answer: {outcome:?}");

    let back = eventually(Duration::from_secs(15), || {
        let semaphore = semaphore.clone();
        async move { semaphore.available_permits().await.ok() == Some(1) }
    })
    .await;
    let left = semaphore.available_permits().await.unwrap();
    assert!(
        back,
        "a permit was lost to a timed-out acquisition: {left}/1 available"
    );
    client.wait_idle().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    client.shutdown().await.unwrap();
}
