//! Fault suite, lost data: a semaphore whose keys vanish (a restart without persistence, a
//! `FLUSHALL`) comes back by itself when its handles know the permit count, so waiters queued
//! before the loss still get permits.
use std::time::Duration;

use keylatch_tests::{client_with, server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_queued_before_a_restart_get_their_permits() {
    let mut server = server();
    let client = client_with(
        &server,
        Duration::from_millis(900),
        Duration::from_millis(200),
    )
    .await;
    let plain = client.semaphore("restart-plain").with_permits(1);
    let expirable = client
        .permit_expirable_semaphore("restart-exp")
        .with_permits(1);
    plain.try_set_permits(1).await.unwrap();
    expirable.try_set_permits(1).await.unwrap();
    let held_plain = plain.acquire().await.unwrap().forget();
    let held_exp = expirable.acquire().await.unwrap();
    // Waiters queue behind the holders.
    let plain_waiting = tokio::spawn({
        let plain = plain.clone();
        async move { plain.try_acquire_for(Duration::from_secs(10), None).await }
    });
    let exp_waiting = tokio::spawn({
        let expirable = expirable.clone();
        async move {
            expirable
                .try_acquire_for(Duration::from_secs(10), None)
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The server restarts without persistence: every key is gone.
    server.restart().unwrap();
    let plain_got = plain_waiting.await.unwrap().unwrap();
    let exp_got = exp_waiting.await.unwrap().unwrap();
    println!(
        "after a restart: plain waiter {}, expirable waiter {}",
        if plain_got.is_some() {
            "acquired"
        } else {
            "gave up"
        },
        if exp_got.is_some() {
            "acquired"
        } else {
            "gave up"
        },
    );
    assert!(
        plain_got.is_some(),
        "the plain waiter waited for a semaphore that was gone"
    );
    assert!(
        exp_got.is_some(),
        "the expirable waiter waited for a semaphore that was gone"
    );
    // The expirable holder's permit was lost with the data: its guard says so.
    tokio::time::timeout(Duration::from_secs(3), held_exp.lost())
        .await
        .expect("the old permit is reported lost");
    drop((plain_got, exp_got, held_plain));
    // The dropped permits are given back in the background: let that land before the flush
    // (landing after it, it would set the count up again).
    client.wait_idle().await;
    // A handle that does not know the count does not set it up.
    let _: () = keylatch::redis::cmd("FLUSHALL")
        .query_async(&mut keylatch_tests::raw(&server).await)
        .await
        .unwrap();
    let unknown = client.semaphore("restart-plain");
    assert!(unknown.try_acquire().await.unwrap().is_none());
}
