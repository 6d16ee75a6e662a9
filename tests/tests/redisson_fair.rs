//! Redisson and keylatch waiters in one fair queue: the lock goes in arrival order whatever the
//! mix, each waiter is woken on its own channel when its turn comes, neither side's score
//! arithmetic costs the other's waiters their place, and keylatch still evicts its own dead
//! waiters within seconds. The Redisson side runs Redisson's scripts and waiting loops
//! (`keylatch_tests::redisson`).
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use keylatch::redis::AsyncCommands;
use keylatch::{LockGuard, Owner};
use keylatch_tests::redisson::{RedissonFairThread, WATCHDOG_LEASE, WokenBy};
use keylatch_tests::{client_with, eventually, pubsub, raw, server, spawn_reporting, unique};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Only wake-ups and the queue's own bounds move a keylatch waiter.
const SLOW_POLL: Duration = Duration::from_secs(60);
/// A short keylatch waiter timeout, so that a score that follows it would run out within the
/// test.
const WAITER_TIMEOUT: Duration = Duration::from_millis(500);
/// The most any of these queues may take to drain.
const DRAIN_BOUND: Duration = Duration::from_secs(20);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Redisson,
    Keylatch,
}

/// Who holds the lock while the others queue.
enum Gate {
    Keylatch(LockGuard),
    Redisson(RedissonFairThread),
}

impl Gate {
    async fn new(side: Side, client: &keylatch::Client, url: &str, name: &str) -> Gate {
        match side {
            Side::Keylatch => Gate::Keylatch(
                client
                    .fair_lock(name)
                    .with_owner(Owner::unique())
                    .lock_with_lease(Duration::from_secs(30))
                    .await
                    .unwrap(),
            ),
            Side::Redisson => {
                let mut thread = RedissonFairThread::new(url, name).await;
                assert_eq!(thread.lock(WATCHDOG_LEASE).await, WokenBy::NoWait);
                Gate::Redisson(thread)
            }
        }
    }

    async fn release(self) {
        match self {
            Gate::Keylatch(guard) => guard.unlock().await.unwrap(),
            Gate::Redisson(mut thread) => assert_eq!(thread.unlock().await, Some(true)),
        }
    }
}

/// Counts the messages on every waiter channel of `name`.
async fn count_wakeups(
    server: &keylatch_tests::RedisServer,
    name: &str,
) -> (Arc<Mutex<BTreeMap<String, usize>>>, JoinHandle<()>) {
    let mut pubsub = pubsub(server).await;
    pubsub
        .psubscribe(format!("redisson_lock__channel:{{{name}}}:*"))
        .await
        .unwrap();
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
    (counts, collector)
}

async fn queue_len(conn: &mut keylatch::redis::aio::MultiplexedConnection, name: &str) -> usize {
    conn.llen(format!("redisson_lock_queue:{{{name}}}"))
        .await
        .unwrap()
}

/// The waiters of `arrivals` queue in that order behind a holder of side `gate`, each holding
/// the lock for `hold` once it gets it; then the holder lets go. Asserts that they acquire in
/// arrival order, that every waiter was woken on its own channel, and that every Redisson
/// waiter's last wait was ended by a message (not by its own timer).
async fn mixed_queue(gate_side: Side, arrivals: &[Side], hold: Duration) {
    let server = server();
    let url = server.url();
    let client = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let name = unique("redisson-fair");
    let mut conn = raw(&server).await;
    let (wakeups, collector) = count_wakeups(&server, &name).await;
    let gate = Gate::new(gate_side, &client, &url, &name).await;

    let order = Arc::new(Mutex::new(Vec::new()));
    let mut ids = Vec::new();
    let mut tasks: Vec<JoinHandle<Option<WokenBy>>> = Vec::new();
    for (i, side) in arrivals.iter().enumerate() {
        let order = order.clone();
        match side {
            Side::Keylatch => {
                // A wait with an owner of its own, so it accepts the lock handed over by a
                // keylatch release (a Redisson release wakes it instead); its id is read from
                // the queue once it is there.
                let lock = client.fair_lock(&name).with_waiter_timeout(WAITER_TIMEOUT);
                tasks.push(tokio::spawn(async move {
                    let guard = lock.lock().await.unwrap();
                    order.lock().unwrap().push(i);
                    tokio::time::sleep(hold).await;
                    guard.unlock().await.unwrap();
                    None
                }));
            }
            Side::Redisson => {
                let mut thread = RedissonFairThread::new(&url, &name).await;
                ids.push(thread.id.clone());
                tasks.push(tokio::spawn(async move {
                    let woken = thread.lock(WATCHDOG_LEASE).await;
                    order.lock().unwrap().push(i);
                    tokio::time::sleep(hold).await;
                    assert_eq!(thread.unlock().await, Some(true));
                    Some(woken)
                }));
            }
        }
        let queued = eventually(Duration::from_secs(5), || {
            let mut conn = conn.clone();
            let name = name.clone();
            async move { queue_len(&mut conn, &name).await == i + 1 }
        })
        .await;
        assert!(queued, "waiter {i} ({side:?}) did not queue");
        if *side == Side::Keylatch {
            let last: Vec<String> = conn
                .lrange(format!("redisson_lock_queue:{{{name}}}"), -1, -1)
                .await
                .unwrap();
            ids.push(last[0].clone());
        }
    }
    let listed: Vec<String> = conn
        .lrange(format!("redisson_lock_queue:{{{name}}}"), 0, -1)
        .await
        .unwrap();
    assert_eq!(listed, ids, "the queue is in arrival order");

    let letters_before = client.stats().letters;
    gate.release().await;
    let mut woken_by = Vec::new();
    for task in tasks {
        let woken = tokio::time::timeout(DRAIN_BOUND, task)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "a waiter was stranded; acquired so far: {:?}",
                    order.lock().unwrap()
                )
            })
            .unwrap();
        woken_by.push(woken);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    collector.abort();
    let order = order.lock().unwrap().clone();
    let wakeups = wakeups.lock().unwrap().clone();
    let per_waiter: Vec<usize> = ids
        .iter()
        .map(|id| {
            wakeups
                .get(&format!("redisson_lock__channel:{{{name}}}:{id}"))
                .copied()
                .unwrap_or(0)
        })
        .collect();
    // A keylatch release hands the lock to a keylatch waiter behind it (the letter); every
    // other hand-off is a wake-up.
    let sides: Vec<Side> = std::iter::once(gate_side)
        .chain(arrivals.iter().copied())
        .collect();
    let grants = sides
        .windows(2)
        .filter(|pair| pair == &[Side::Keylatch, Side::Keylatch])
        .count() as u64;
    let letters = client.stats().letters - letters_before;
    println!(
        "{gate_side:?} holder, arrivals {arrivals:?}, hold {hold:?}: acquired in order \
         {order:?}; wake-ups per waiter {per_waiter:?}; Redisson waiters' last wait ended by \
         {woken_by:?}; {letters} locks handed over by letter"
    );
    assert_eq!(
        letters, grants,
        "every keylatch-to-keylatch hand-off, and no other, is a grant"
    );
    assert_eq!(
        order,
        (0..arrivals.len()).collect::<Vec<_>>(),
        "not in arrival order ({arrivals:?})"
    );
    for (i, count) in per_waiter.iter().enumerate() {
        assert!(*count >= 1, "waiter {i} was never woken on its own channel");
    }
    for (i, woken) in woken_by.iter().enumerate() {
        if let Some(woken) = woken {
            assert_eq!(
                *woken,
                WokenBy::Message,
                "Redisson waiter {i} got the lock by its own timer, not a wake-up"
            );
        }
    }
    let left: i64 = conn
        .exists(&[
            name.clone(),
            format!("redisson_lock_queue:{{{name}}}"),
            format!("redisson_lock_timeout:{{{name}}}"),
            format!("{{{name}}}:keylatch_waiters"),
            format!("{{{name}}}:keylatch_grants"),
        ])
        .await
        .unwrap();
    assert_eq!(left, 0, "keys left behind");
}

use Side::{Keylatch as K, Redisson as R};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_first_short_holds_go_in_arrival_order() {
    mixed_queue(K, &[R, K, R, K], Duration::from_millis(50)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_first_long_holds_go_in_arrival_order() {
    mixed_queue(R, &[R, K, R, K], Duration::from_millis(1200)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keylatch_first_short_holds_go_in_arrival_order() {
    mixed_queue(R, &[K, R, K, R], Duration::from_millis(50)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keylatch_first_long_holds_go_in_arrival_order() {
    mixed_queue(K, &[K, R, K, R], Duration::from_millis(1200)).await;
}

/// A Redisson waiter gives up (`tryLock` times out) ahead of two keylatch waiters: Redisson
/// takes its wait time off every score behind it. Neither keylatch waiter loses its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_waiter_giving_up_costs_keylatch_waiters_nothing() {
    let server = server();
    let url = server.url();
    let client = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let name = unique("redisson-gives-up");
    let conn = raw(&server).await;
    let gate = Gate::new(R, &client, &url, &name).await;
    let mut quitter = RedissonFairThread::new(&url, &name).await;
    let quitting = tokio::spawn(async move {
        // Longer than a keylatch waiter timeout: the scores behind it drop by 1.5 s.
        quitter
            .try_lock(Duration::from_millis(1500), WATCHDOG_LEASE)
            .await
    });
    assert!(
        eventually(Duration::from_secs(5), || {
            let mut conn = conn.clone();
            let name = name.clone();
            async move { queue_len(&mut conn, &name).await == 1 }
        })
        .await
    );
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..2 {
        let lock = client
            .fair_lock(&name)
            .with_owner(Owner::unique())
            .with_waiter_timeout(WAITER_TIMEOUT);
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            order.lock().unwrap().push(i);
            guard.unlock().await.unwrap();
        }));
        assert!(
            eventually(Duration::from_secs(5), || {
                let mut conn = conn.clone();
                let name = name.clone();
                async move { queue_len(&mut conn, &name).await == i + 2 }
            })
            .await
        );
    }
    assert!(!quitting.await.unwrap(), "the Redisson waiter gave up");
    // At once, before any keylatch refresh: Redisson's unlock judges the new head.
    gate.release().await;
    for task in tasks {
        tokio::time::timeout(DRAIN_BOUND, task)
            .await
            .expect("a keylatch waiter was stranded")
            .unwrap();
    }
    let order = order.lock().unwrap().clone();
    println!("keylatch waiters behind a Redisson waiter that gave up acquired in order {order:?}");
    assert_eq!(order, vec![0, 1], "a keylatch waiter lost its place");
}

/// Keylatch waiters give up, each ahead of a Redisson waiter (arrivals: keylatch, Redisson,
/// keylatch, Redisson), and the lock is released well after their waiter timeout: the Redisson
/// waiters keep their places (chained anew on what was ahead of each leaver) and are woken in
/// turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keylatch_waiters_giving_up_leave_redisson_waiters_in_place() {
    let server = server();
    let url = server.url();
    let client = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let name = unique("keylatch-gives-up");
    let mut conn = raw(&server).await;
    let gate = Gate::new(K, &client, &url, &name).await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut quitters = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..4 {
        if i % 2 == 0 {
            let quitter = client
                .fair_lock(&name)
                .with_owner(Owner::unique())
                .with_waiter_timeout(Duration::from_millis(300));
            quitters.push(tokio::spawn(async move {
                quitter.try_lock_for(Duration::from_millis(600), None).await
            }));
        } else {
            let mut thread = RedissonFairThread::new(&url, &name).await;
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let woken = thread.lock(WATCHDOG_LEASE).await;
                order.lock().unwrap().push(i / 2);
                assert_eq!(thread.unlock().await, Some(true));
                woken
            }));
        }
        assert!(
            eventually(Duration::from_secs(5), || {
                let mut conn = conn.clone();
                let name = name.clone();
                async move { queue_len(&mut conn, &name).await == i + 1 }
            })
            .await
        );
    }
    for quitting in quitters {
        assert!(quitting.await.unwrap().unwrap().is_none(), "it gave up");
    }
    // Well past the waiter timeout of those that left.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let listed: usize = queue_len(&mut conn, &name).await;
    assert_eq!(listed, 2, "a Redisson waiter's place vanished");
    gate.release().await;
    let mut woken_by = Vec::new();
    for task in tasks {
        woken_by.push(
            tokio::time::timeout(DRAIN_BOUND, task)
                .await
                .expect("a Redisson waiter was stranded")
                .unwrap(),
        );
    }
    let order = order.lock().unwrap().clone();
    println!(
        "Redisson waiters behind keylatch waiters that gave up: order {order:?}, last waits \
         ended by {woken_by:?}"
    );
    assert_eq!(order, vec![0, 1]);
    assert_eq!(woken_by, vec![WokenBy::Message, WokenBy::Message]);
}

/// A keylatch waiter whose process is killed, first in line ahead of a Redisson waiter and a
/// keylatch waiter: it is evicted within its waiter timeout (+1 s), the Redisson waiter is
/// woken and gets the lock, then the keylatch waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_keylatch_waiter_ahead_of_redisson_is_evicted_within_seconds() {
    const TIMEOUT: Duration = Duration::from_secs(1);
    let server = server();
    let url = server.url();
    let client = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let name = unique("redisson-dead-ahead");
    let conn = raw(&server).await;
    let gate = Gate::new(K, &client, &url, &name).await;
    let (mut child, line) = spawn_reporting(
        env!("CARGO_BIN_EXE_keylatch-test-fair-waiter"),
        &[url.clone(), name.clone(), TIMEOUT.as_millis().to_string()],
        "the waiter process",
    )
    .await;
    assert!(line.unwrap_or_default().starts_with("queued "));
    let mut thread = RedissonFairThread::new(&url, &name).await;
    let redisson = tokio::spawn(async move {
        let woken = thread.lock(WATCHDOG_LEASE).await;
        let at = Instant::now();
        assert_eq!(thread.unlock().await, Some(true));
        (woken, at)
    });
    assert!(
        eventually(Duration::from_secs(5), || {
            let mut conn = conn.clone();
            let name = name.clone();
            async move { queue_len(&mut conn, &name).await == 2 }
        })
        .await
    );
    let last = client
        .fair_lock(&name)
        .with_owner(Owner::unique())
        .with_waiter_timeout(TIMEOUT);
    let keylatch_wait = tokio::spawn(async move { (last.lock().await, Instant::now()) });
    assert!(
        eventually(Duration::from_secs(5), || {
            let mut conn = conn.clone();
            let name = name.clone();
            async move { queue_len(&mut conn, &name).await == 3 }
        })
        .await
    );
    child.kill().await.unwrap();
    let killed = Instant::now();
    gate.release().await;
    let (woken, redisson_at) = tokio::time::timeout(DRAIN_BOUND, redisson)
        .await
        .expect("the Redisson waiter was stranded behind the dead one")
        .unwrap();
    let (guard, keylatch_at) = tokio::time::timeout(DRAIN_BOUND, keylatch_wait)
        .await
        .expect("the keylatch waiter was stranded")
        .unwrap();
    guard.unwrap().unlock().await.unwrap();
    let moved_on = redisson_at - killed;
    println!(
        "dead keylatch waiter ahead of a Redisson waiter: the Redisson waiter got the lock \
         {moved_on:?} after the kill (waiter timeout {TIMEOUT:?}), woken by {woken:?}"
    );
    assert!(
        moved_on <= TIMEOUT + Duration::from_secs(1),
        "the dead waiter held the queue for {moved_on:?}"
    );
    assert_eq!(woken, WokenBy::Message);
    assert!(keylatch_at >= redisson_at, "the keylatch waiter overtook");
}
