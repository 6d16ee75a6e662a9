//! First come, first served: waiters on several clients acquire in the order they arrived,
//! and each release wakes the head of the queue only.
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use keylatch::redis::AsyncCommands;
use keylatch::{FairLock, Owner};
use keylatch_tests::{client_with, eventually, pubsub, raw, server, unique};

const SLOW_POLL: Duration = Duration::from_secs(60);

/// Pairs (i, j) with i before j in `order` but i > j.
fn inversions(order: &[usize]) -> usize {
    let mut count = 0;
    for (a, x) in order.iter().enumerate() {
        count += order[a + 1..].iter().filter(|y| *y < x).count();
    }
    count
}

async fn queue_len(lock: &FairLock) -> usize {
    lock.queue().await.unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_waiters_on_three_clients_acquire_in_arrival_order() {
    const WAITERS: usize = 10;
    const ROUNDS: usize = 50;
    let server = server();
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(client_with(&server, Duration::from_secs(30), SLOW_POLL).await);
    }
    let name = unique("fair-order");
    let counter = format!("{name}:counter");
    let gate = clients[0].fair_lock(&name).with_owner(Owner::unique());
    let mut total_inversions = 0;
    let mut total_queue_inversions = 0;
    let mut out_of_order = Vec::new();
    for round in 0..ROUNDS {
        // Everyone queues behind a holder, arriving at least 20 ms apart (and each only once
        // the one before is in the queue, so a stalled scheduler cannot reorder the starts);
        // then the holder lets go.
        let held = gate.lock_with_lease(Duration::from_secs(30)).await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let start = tokio::time::Instant::now();
        let mut ids = Vec::new();
        let mut tasks = Vec::new();
        for i in 0..WAITERS {
            let client = &clients[i % clients.len()];
            let owner = Owner::unique();
            ids.push(client.owner_id(owner).to_string());
            let lock = client.fair_lock(&name).with_owner(owner);
            let order = order.clone();
            let mut conn = raw(&server).await;
            let counter = counter.clone();
            tokio::time::sleep_until(start + Duration::from_millis(20 * i as u64)).await;
            tasks.push(tokio::spawn(async move {
                let guard = lock.lock().await.unwrap();
                order.lock().unwrap().push(i);
                // Read, yield, write: an overlap would lose an increment.
                let value: Option<u64> = conn.get(&counter).await.unwrap();
                tokio::task::yield_now().await;
                let _: () = conn.set(&counter, value.unwrap_or(0) + 1).await.unwrap();
                guard.unlock().await.unwrap();
            }));
            let queued = eventually(Duration::from_secs(10), || async {
                queue_len(&gate).await == i + 1
            })
            .await;
            assert!(queued, "round {round}: waiter {i} did not queue");
        }
        let queued: Vec<String> = gate
            .queue()
            .await
            .unwrap()
            .into_iter()
            .map(|w| w.id)
            .collect();
        held.unlock().await.unwrap();
        for task in tasks {
            task.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        // The server's queue order, as indices into the arrival order.
        let queue_order: Vec<usize> = queued
            .iter()
            .map(|id| ids.iter().position(|x| x == id).unwrap())
            .collect();
        total_queue_inversions += inversions(&queue_order);
        total_inversions += inversions(&order);
        if order != (0..WAITERS).collect::<Vec<_>>() {
            out_of_order.push((round, order));
        }
    }
    let mut conn = raw(&server).await;
    let total: u64 = conn.get(&counter).await.unwrap();
    println!(
        "{ROUNDS} rounds x {WAITERS} waiters on 3 clients: {total_inversions} inversions \
         (queue order vs arrival: {total_queue_inversions}); counter = {total}"
    );
    assert_eq!(
        total_inversions, 0,
        "rounds out of arrival order: {out_of_order:?}"
    );
    assert_eq!(total, (ROUNDS * WAITERS) as u64, "two holders overlapped");
    for client in &clients {
        client.wait_idle().await;
        assert_eq!(client.stats().watchdog.holds, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_release_wakes_the_head_only() {
    const WAITERS: usize = 8;
    let server = server();
    let clients = [
        client_with(&server, Duration::from_secs(30), SLOW_POLL).await,
        client_with(&server, Duration::from_secs(30), SLOW_POLL).await,
    ];
    let name = unique("fair-wake-head");
    let prefix = format!("redisson_lock__channel:{{{name}}}");
    let mut pubsub = pubsub(&server).await;
    pubsub.psubscribe(format!("{prefix}*")).await.unwrap();
    let counts: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
    let collector = tokio::spawn({
        let counts = counts.clone();
        async move {
            let mut messages = pubsub.on_message();
            while let Some(msg) = messages.next().await {
                *counts
                    .lock()
                    .unwrap()
                    .entry(msg.get_channel_name().to_owned())
                    .or_default() += 1;
            }
        }
    });
    let hub_before: u64 = clients.iter().map(|c| c.stats().hub_messages).sum();

    let gate = clients[0].fair_lock(&name).with_owner(Owner::unique());
    let held = gate.lock_with_lease(Duration::from_secs(30)).await.unwrap();
    let mut ids = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..WAITERS {
        let client = &clients[i % 2];
        let owner = Owner::unique();
        ids.push(client.owner_id(owner).to_string());
        let lock = client.fair_lock(&name).with_owner(owner);
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            guard.unlock().await.unwrap();
        }));
        let queued = eventually(Duration::from_secs(5), || async {
            queue_len(&gate).await == i + 1
        })
        .await;
        assert!(queued);
    }
    let subscribed = eventually(Duration::from_secs(5), || async {
        clients.iter().map(|c| c.stats().subscribers).sum::<usize>() == WAITERS
    })
    .await;
    assert!(subscribed, "every waiter listens on its own channel");
    held.unlock().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    // Let the last messages (if any) arrive.
    tokio::time::sleep(Duration::from_millis(200)).await;
    collector.abort();
    let counts = counts.lock().unwrap().clone();
    let hub_messages: u64 =
        clients.iter().map(|c| c.stats().hub_messages).sum::<u64>() - hub_before;
    println!(
        "{WAITERS} waiters, {WAITERS} releases: wake-ups per waiter channel {:?}, on other \
         channels {}; hub messages received: {hub_messages}",
        ids.iter()
            .map(|id| counts.get(&format!("{prefix}:{id}")).copied().unwrap_or(0))
            .collect::<Vec<_>>(),
        counts.values().sum::<usize>()
            - ids
                .iter()
                .map(|id| counts.get(&format!("{prefix}:{id}")).copied().unwrap_or(0))
                .sum::<usize>()
    );
    for id in &ids {
        assert_eq!(
            counts.get(&format!("{prefix}:{id}")).copied().unwrap_or(0),
            1,
            "waiter {id} was not woken exactly once"
        );
    }
    assert_eq!(
        counts.values().sum::<usize>(),
        WAITERS,
        "a release woke more than the head"
    );
    assert_eq!(hub_messages, WAITERS as u64);
}
