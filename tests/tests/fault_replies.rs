//! Fault suite, lost replies: calls whose replies never came while the server was paused are
//! resolved once it answers again. A semaphore ends with all its permits once every holder has
//! released; an unlock gives up after the release timeout and finishes in the background.
use std::time::Duration;

use keylatch::Error;
use keylatch::redis::AsyncCommands;
use keylatch_tests::{eventually, pause, raw, server, unique};

/// A client that calls a reply lost after 300 ms and gives an unlock 500 ms.
async fn impatient(server: &keylatch_tests::RedisServer) -> keylatch::Client {
    let config = keylatch::Config::builder()
        .url(server.url())
        .response_timeout(Duration::from_millis(300))
        .connect_timeout(Duration::from_millis(300))
        .release_timeout(Duration::from_millis(500))
        .fallback_poll(Duration::from_millis(100))
        .build()
        .unwrap();
    keylatch::Client::connect_with(config).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_try_acquire_lost_in_a_pause_takes_no_permit_for_good() {
    let server = server();
    let client = impatient(&server).await;
    let mut conn = raw(&server).await;
    let semaphore = client.semaphore(&unique("lost-acquire"));
    semaphore.try_set_permits(1).await.unwrap();
    let expirable = client.permit_expirable_semaphore(&unique("lost-exp-acquire"));
    expirable.try_set_permits(1).await.unwrap();

    // The pause outlasts the request window (3 × 300 ms + 1 s): the outcome cannot be settled
    // before the server answers again.
    pause(&mut conn, 3000).await;
    let (plain, exp) = tokio::join!(semaphore.try_acquire(), expirable.try_acquire());
    println!(
        "acquires during the pause: {:?} / {:?}",
        plain.as_ref().map(Option::is_some),
        exp.as_ref().map(Option::is_some)
    );
    assert!(plain.is_err() && exp.is_err(), "the server did not answer");
    let back = eventually(Duration::from_secs(10), || {
        let (semaphore, expirable) = (semaphore.clone(), expirable.clone());
        async move {
            semaphore.available_permits().await.ok() == Some(1)
                && expirable.available_permits().await.ok() == Some(1)
        }
    })
    .await;
    client.wait_idle().await;
    let plain_left = semaphore.available_permits().await.unwrap();
    println!("after the pause: plain {plain_left}/1 available");
    assert!(back, "an acquire whose reply was lost kept a permit");
    // And stays so: nothing arrives late to take it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_lost_in_a_pause_is_applied_once() {
    let server = server();
    let client = impatient(&server).await;
    let mut conn = raw(&server).await;
    let semaphore = client.semaphore(&unique("lost-release"));
    semaphore.try_set_permits(2).await.unwrap();
    let permit = semaphore.acquire().await.unwrap();
    let name = unique("lost-unlock");
    let guard = client.lock(&name).lock().await.unwrap();

    pause(&mut conn, 3000).await;
    let released = permit.release().await;
    let unlocked = guard.unlock().await;
    println!("during the pause: release {released:?}, unlock {unlocked:?}");
    // Neither waits for the server beyond the release timeout: each says so.
    assert!(
        matches!(released, Err(Error::Timeout { .. })),
        "{released:?}"
    );
    assert!(
        matches!(unlocked, Err(Error::Timeout { .. })),
        "{unlocked:?}"
    );
    let applied = eventually(Duration::from_secs(10), || {
        let (semaphore, mut conn, name) = (semaphore.clone(), conn.clone(), name.clone());
        async move {
            let free = !conn.exists::<_, bool>(&name).await.unwrap_or(true);
            semaphore.available_permits().await.ok() == Some(2) && free
        }
    })
    .await;
    client.wait_idle().await;
    println!(
        "after the pause: {} of 2 permits, lock held: {}",
        semaphore.available_permits().await.unwrap(),
        conn.exists::<_, bool>(&name).await.unwrap()
    );
    assert!(
        applied,
        "the release and the unlock finished in the background"
    );
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        2,
        "applied once, not twice"
    );
}
