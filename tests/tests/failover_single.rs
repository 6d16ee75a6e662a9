//! Failover safety on one server: fencing tokens never go back, even when the counter is lost
//! (a restart without persistence, `FLUSHALL`), and a restart is seen at once: every hold is
//! checked when the connection comes back, not at the next renewal.
use std::time::Duration;

use keylatch::redis;
use keylatch_tests::{raw, server, unique};
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_never_go_back_when_the_counter_is_lost() {
    let mut server = server();
    let client = keylatch_tests::client(&server).await;
    let name = unique("fence-restart");
    let lock = client.lock(&name).with_fencing(true);
    let fair = client.fair_lock(&format!("{name}-fair")).with_fencing(true);
    let write = client
        .rw_lock(&format!("{name}-rw"))
        .write_lock()
        .with_fencing(true);
    let mut issued = Vec::new();
    for _ in 0..3 {
        for guard in [
            lock.lock().await.unwrap(),
            fair.lock().await.unwrap(),
            write.lock().await.unwrap(),
        ] {
            issued.push(guard.fencing_token().unwrap());
            guard.unlock().await.unwrap();
        }
    }
    let highest = *issued.iter().max().unwrap();
    println!("issued {issued:?}");

    // A restart without persistence: the counters are gone.
    server.restart().unwrap();
    println!("restarted");
    let after_restart = tokio::time::timeout(Duration::from_secs(10), lock.lock())
        .await
        .unwrap()
        .unwrap();
    let token = after_restart.fencing_token().unwrap();
    println!("highest token before the restart {highest}, first after it {token}");
    assert!(
        token > highest,
        "a token went back: {token} after {highest}"
    );
    after_restart.unlock().await.unwrap();

    // FLUSHALL: the same, for the write side too.
    let _: () = redis::cmd("FLUSHALL")
        .query_async(&mut raw(&server).await)
        .await
        .unwrap();
    let again = tokio::time::timeout(Duration::from_secs(10), write.lock())
        .await
        .expect("the write lock after FLUSHALL")
        .unwrap();
    assert!(again.fencing_token().unwrap() > token);
    again.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_is_seen_at_once_with_a_long_watchdog() {
    let mut server = server();
    // A long watchdog: 60 s, renewed every 20 s. Only the check on reconnect can see the
    // loss within the bound below; the next renewal comes 20 s after the acquire.
    let watchdog = Duration::from_secs(60);
    let client = keylatch_tests::client_with(&server, watchdog, Duration::from_secs(30)).await;
    let guard = client.lock(&unique("seen-at-once")).lock().await.unwrap();
    let acquired = Instant::now();
    let lost = guard.lost();
    server.restart().unwrap();
    let answering = Instant::now();
    let renewal = watchdog / 3;
    // Well below the renewal interval, with slack for a loaded machine (the reconnect
    // itself backs off).
    let bound = renewal / 3;
    let seen = tokio::time::timeout(bound, lost).await;
    let after = answering.elapsed();
    println!(
        "restart without persistence (took {:?}): lost() {after:?} after the server answered again",
        answering - acquired
    );
    assert!(
        seen.is_ok(),
        "the loss was not seen within {bound:?} of the restart: it waited for the next renewal"
    );
    assert!(
        acquired.elapsed() < renewal,
        "the bound must end before the first renewal could have come"
    );
}
