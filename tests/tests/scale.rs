//! Scale: renewals are batched, and many waiters share one pub/sub connection.
use std::time::Duration;

use keylatch::redis;
use keylatch_tests::{client, client_with, eventually, raw, server, unique};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_held_locks_cost_ten_script_calls_per_renewal_tick() {
    let server = server();
    let watchdog = Duration::from_millis(900);
    let client = client_with(&server, watchdog, Duration::from_secs(2)).await;
    let prefix = unique("batch");
    let mut guards = Vec::new();
    for i in 0..1_000 {
        guards.push(client.lock(&format!("{prefix}:{i}")).lock().await.unwrap());
    }
    let start = client.stats().watchdog;
    // Wait for three more ticks.
    let ticked = eventually(Duration::from_secs(5), || async {
        client.stats().watchdog.ticks >= start.ticks + 3
    })
    .await;
    assert!(ticked);
    let end = client.stats().watchdog;
    let ticks = end.ticks - start.ticks;
    let calls = end.renew_calls - start.renew_calls;
    let renewed = end.renewed_keys - start.renewed_keys;
    println!("1000 held locks: {calls} renewal calls over {ticks} ticks, {renewed} keys renewed");
    assert!(
        calls <= ticks * 10,
        "more than 10 script calls per tick: {calls} over {ticks}"
    );
    assert!(
        renewed >= 1_000 * (ticks - 1),
        "not every hold was renewed each tick"
    );
    assert!(guards.iter().all(|g| !g.is_lost()));
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    assert_eq!(client.stats().watchdog.holds, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiters_on_a_hundred_locks_share_one_pubsub_connection() {
    let server = server();
    let holder = client(&server).await;
    let waiter = client(&server).await;
    let prefix = unique("fanout");
    let mut held = Vec::new();
    for i in 0..100 {
        held.push(
            holder
                .lock(&format!("{prefix}:{i}"))
                .lock_with_lease(Duration::from_secs(60))
                .await
                .unwrap(),
        );
    }
    let mut tasks = Vec::new();
    for w in 0..1_000 {
        let lock = waiter.lock(&format!("{prefix}:{}", w % 100));
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock_with_lease(Duration::from_secs(60)).await?;
            guard.unlock().await
        }));
    }
    let all_waiting = eventually(Duration::from_secs(20), || async {
        waiter.stats().subscribers == 1_000
    })
    .await;
    assert!(all_waiting, "{:?}", waiter.stats());
    assert_eq!(waiter.stats().channels, 100);
    let mut conn = raw(&server).await;
    let pubsub_clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut conn)
        .await
        .unwrap();
    // Redis lists a connection as pub/sub while it has subscriptions: only the waiter's.
    let connections: Vec<&str> = pubsub_clients.lines().filter(|l| !l.is_empty()).collect();
    println!(
        "1000 waiters on 100 locks: {} pub/sub connection(s) on the server",
        connections.len()
    );
    assert_eq!(
        connections.len(),
        1,
        "one pub/sub connection for all waiters: {connections:?}"
    );
    assert!(
        connections[0].contains(" sub=100 "),
        "it carries the 100 channels: {}",
        connections[0]
    );
    for guard in held {
        guard.unlock().await.unwrap();
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("a waiter stalled")
            .unwrap()
            .unwrap();
    }
    let unsubscribed = eventually(Duration::from_secs(5), || async {
        waiter.stats().channels == 0
    })
    .await;
    assert!(unsubscribed);
}
