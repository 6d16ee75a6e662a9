//! Dropping a fair-lock acquire at any point leaves nothing behind: no hold, no queue or
//! deadline entry, no subscription (locally or on the server), no watchdog entry (neither a
//! hold nor a waiter refresh).
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch::{FairLock, Owner};
use keylatch_tests::{
    assert_client_unsubscribed, assert_server_unsubscribed, client, dropped_in_flight, poll_once,
    raw, server, unique,
};
use tokio::time::Instant;

/// xorshift64*: the tests' random points, reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

async fn assert_clean(
    clients: &[keylatch::Client],
    server: &keylatch_tests::RedisServer,
    name: &str,
) {
    for client in clients {
        client.wait_idle().await;
    }
    let mut conn = raw(server).await;
    for key in [
        name.to_owned(),
        format!("redisson_lock_queue:{{{name}}}"),
        format!("redisson_lock_timeout:{{{name}}}"),
        format!("{{{name}}}:keylatch_waiters"),
        format!("{{{name}}}:keylatch_grants"),
    ] {
        let exists: bool = conn.exists(&key).await.unwrap();
        let left: Vec<String> = conn.lrange(&key, 0, 4).await.unwrap_or_default();
        assert!(!exists, "{key} was left behind (first entries {left:?})");
    }
    for client in clients {
        let stats = client.stats();
        assert_eq!(
            stats.watchdog.holds, 0,
            "a watchdog entry was left behind: {stats:?}"
        );
        assert_client_unsubscribed(client).await;
    }
    assert_server_unsubscribed(&conn, name).await;
}

#[tokio::test]
async fn poll_once_then_drop_leaves_nothing() {
    let server = server();
    let client = client(&server).await;
    let name = unique("fair-poll-once");
    let lock = client.fair_lock(&name);
    for _ in 0..50 {
        poll_once(lock.lock());
        poll_once(lock.try_lock());
        poll_once(lock.try_lock_for(Duration::from_secs(5), None));
    }
    let holder = client
        .fair_lock(&name)
        .with_owner(Owner::unique())
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    for _ in 0..50 {
        poll_once(lock.lock());
        let waiting = tokio::spawn({
            let lock = lock.clone();
            async move { lock.lock().await }
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
        waiting.abort();
        let _ = waiting.await;
    }
    holder.unlock().await.unwrap();
    assert_clean(&[client], &server, &name).await;
}

/// A thousand waits on three clients, each dropped at a random point — before it is sent,
/// while the enqueue is in flight, while queued, just as it is woken, while it acquires —
/// while a holder takes and releases the lock at random.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_cancelled_waits_leave_nothing() {
    cancelled_storm(false).await;
}

/// As above with waits that accept the lock handed to them on release (a new owner per
/// wait): drops also land while a grant is on its way, and each such grant is released and
/// handed on by the wait's leave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_cancelled_waits_handed_the_lock_leave_nothing() {
    cancelled_storm(true).await;
}

/// A thousand waits cancelled at random points; `grants`: the waiting tasks' waits each have
/// an owner of their own and accept grants (otherwise one owner per task, which does not).
async fn cancelled_storm(grants: bool) {
    const CANCELLED: usize = 1000;
    let server = server();
    let clients = vec![
        client(&server).await,
        client(&server).await,
        client(&server).await,
    ];
    let name = unique("fair-storm");
    let seed = 0x5eed_0000_0000_0001 ^ u64::from(std::process::id());
    println!("seed {seed:#x}");
    let cancelled = Arc::new(AtomicUsize::new(0));
    let acquired = Arc::new(AtomicUsize::new(0));
    let timed_out = Arc::new(AtomicUsize::new(0));
    let stop_at = Instant::now() + Duration::from_secs(40);

    // The holder: on and off at random, so drops land in every phase of a wait.
    let holder = tokio::spawn({
        let lock = clients[0].fair_lock(&name).with_owner(Owner::unique());
        let cancelled = cancelled.clone();
        async move {
            let mut rng = Rng(seed ^ 0xabcdef);
            while cancelled.load(Ordering::Relaxed) < CANCELLED && Instant::now() < stop_at {
                if let Ok(Some(guard)) = lock
                    .try_lock_for(Duration::from_millis(50), Some(Duration::from_secs(30)))
                    .await
                {
                    tokio::time::sleep(Duration::from_micros(rng.below(2_000))).await;
                    guard.unlock().await.unwrap();
                }
                tokio::time::sleep(Duration::from_micros(rng.below(4_000))).await;
            }
        }
    });
    let mut tasks = Vec::new();
    for t in 0..12u64 {
        let client = clients[t as usize % clients.len()].clone();
        let (cancelled, acquired, timed_out) =
            (cancelled.clone(), acquired.clone(), timed_out.clone());
        let name = name.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng(seed.wrapping_add(t * 7919));
            // One owner per task, as a worker that waits again and again; or one per wait.
            let lock: FairLock = if grants {
                client.fair_lock(&name)
            } else {
                client.fair_lock(&name).with_owner(Owner::unique())
            };
            while cancelled.load(Ordering::Relaxed) < CANCELLED && Instant::now() < stop_at {
                let after = Duration::from_nanos(rng.below(4_000_000));
                match rng.below(4) {
                    // Cancelled by a timeout around the whole wait.
                    0 | 1 => match tokio::time::timeout(after, lock.lock()).await {
                        Ok(guard) => {
                            acquired.fetch_add(1, Ordering::Relaxed);
                            drop(guard.unwrap());
                        }
                        Err(_) => {
                            cancelled.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                    // A bounded wait that may time out by itself, or be dropped first.
                    2 => match tokio::time::timeout(
                        after,
                        lock.try_lock_for(Duration::from_nanos(rng.below(3_000_000)), None),
                    )
                    .await
                    {
                        Ok(Ok(Some(guard))) => {
                            acquired.fetch_add(1, Ordering::Relaxed);
                            guard.unlock().await.unwrap();
                        }
                        Ok(Ok(None)) => {
                            timed_out.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(Err(err)) => panic!("{err}"),
                        Err(_) => {
                            cancelled.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                    // A spawned wait, aborted.
                    _ => {
                        let waiting = tokio::spawn({
                            let lock = lock.clone();
                            async move { lock.lock().await }
                        });
                        tokio::time::sleep(after).await;
                        waiting.abort();
                        match waiting.await {
                            Ok(guard) => {
                                acquired.fetch_add(1, Ordering::Relaxed);
                                drop(guard.unwrap());
                            }
                            Err(_) => {
                                cancelled.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    holder.await.unwrap();
    let cancelled = cancelled.load(Ordering::Relaxed);
    let letters: u64 = clients.iter().map(|c| c.stats().letters).sum();
    println!(
        "{cancelled} waits cancelled, {} timed out, {} acquired, {letters} of them by a letter",
        timed_out.load(Ordering::Relaxed),
        acquired.load(Ordering::Relaxed)
    );
    if grants {
        assert!(
            letters > 0,
            "no lock was handed over: grants were not tested"
        );
    }
    assert!(
        cancelled >= CANCELLED,
        "only {cancelled} cancellations in the time allowed"
    );
    assert!(
        acquired.load(Ordering::Relaxed) > 0,
        "the storm never acquired"
    );
    assert_clean(&clients, &server, &name).await;
}

/// Pauses the server so a request is sent but not answered, drops the future meanwhile, and
/// lets the server run it afterwards: the undo and the leave must cancel its effect.
#[tokio::test]
async fn requests_dropped_in_flight_are_undone_after_the_server_runs_them() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("fair-in-flight");
    let lock = client.fair_lock(&name).with_owner(Owner::unique());

    // A fresh acquire of a free lock (it would be granted), dropped in flight.
    assert!(
        dropped_in_flight(&mut conn, lock.lock()).await,
        "the acquire should still be waiting for the paused server"
    );
    client.wait_idle().await;
    let exists: bool = conn.exists(&name).await.unwrap();
    assert!(!exists, "the dropped acquire left a hold behind");

    // An enqueue behind another holder, dropped in flight.
    let holder = client
        .fair_lock(&name)
        .with_owner(Owner::unique())
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    assert!(dropped_in_flight(&mut conn, lock.lock()).await);
    client.wait_idle().await;
    assert!(
        lock.queue().await.unwrap().is_empty(),
        "the dropped enqueue left a queue entry"
    );

    // A re-entry, dropped the same way: the count is what the guards account for.
    holder.unlock().await.unwrap();
    let g1 = lock.lock().await.unwrap();
    assert!(dropped_in_flight(&mut conn, lock.lock()).await);
    client.wait_idle().await;
    assert_eq!(
        lock.hold_count().await.unwrap(),
        1,
        "the dropped re-entry doubled the count"
    );
    g1.unlock().await.unwrap();
    assert_clean(&[client], &server, &name).await;
}
