//! Coalesced acquisitions (`Config::coalesce`): concurrent acquisitions on one connection go to
//! Redis together in one script call, and each caller still gets its own result, error and
//! cancellation. Every test checks that calls were in fact coalesced, so it cannot pass by
//! never batching. The clients keep one command connection, and the tests run several times
//! [`COALESCE_AFTER`](keylatch::COALESCE_AFTER) callers at once.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch::{COALESCE_AFTER, Client, Config, Error};
use keylatch_tests::{eventually, raw, script_flush, server, unique};
use tokio::sync::Barrier;

async fn client_of(server: &keylatch_tests::RedisServer, coalesce: bool) -> Client {
    let config = Config::builder()
        .url(server.url())
        .coalesce(coalesce)
        .connections(1)
        .build()
        .unwrap();
    Client::connect_with(config).await.unwrap()
}

/// `tasks` tasks released together, each running `op(shared, i)` with its own clone of
/// `shared`; their results in task order.
async fn together<S, T, F, Fut>(tasks: usize, shared: S, op: F) -> Vec<T>
where
    S: Clone + Send + 'static,
    T: Send + 'static,
    F: Fn(S, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = T> + Send,
{
    let barrier = Arc::new(Barrier::new(tasks));
    let op = Arc::new(op);
    let handles: Vec<_> = (0..tasks)
        .map(|i| {
            let (barrier, op, shared) = (barrier.clone(), op.clone(), shared.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                op(shared, i).await
            })
        })
        .collect();
    let mut out = Vec::new();
    for handle in handles {
        out.push(handle.await.unwrap());
    }
    out
}

/// Waits until `client` has no background work and no hold left (asserted), then returns the
/// keys under `prefix` left on the server.
async fn settled_and_left(
    client: &Client,
    server: &keylatch_tests::RedisServer,
    prefix: &str,
) -> Vec<String> {
    let settled = eventually(Duration::from_secs(10), || {
        let stats = client.stats();
        async move { stats.background_pending == 0 && stats.watchdog.holds == 0 }
    })
    .await;
    assert!(
        settled,
        "background work or holds left: {:?}",
        client.stats()
    );
    raw(server).await.keys(format!("{prefix}*")).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contested_lock_goes_to_exactly_one_caller_of_a_batch() {
    let server = server();
    let client = client_of(&server, true).await;
    let name = unique("coalesce-contested");
    for round in 0..30 {
        let results = together(
            3 * COALESCE_AFTER,
            (client.clone(), name.clone()),
            |(client, name), _| async move { client.lock(&name).try_lock().await },
        )
        .await;
        let mut guards = Vec::new();
        for result in results {
            if let Some(guard) = result.expect("try_lock") {
                guards.push(guard);
            }
        }
        assert_eq!(guards.len(), 1, "round {round}: {} holders", guards.len());
        guards.pop().unwrap().unlock().await.unwrap();
    }
    let stats = client.stats();
    println!(
        "30 rounds of {} callers: {} coalesced calls carried {} acquisitions",
        3 * COALESCE_AFTER,
        stats.coalesced_calls,
        stats.coalesced_requests
    );
    assert!(stats.coalesced_calls > 0, "nothing was coalesced");
    assert!(stats.coalesced_requests >= 2 * stats.coalesced_calls);
    // Connecting loaded the batch scripts with the others: no call needed a reload.
    assert_eq!(stats.script_reloads, 0);
    assert_eq!(client.stats().watchdog.holds, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_in_batches_never_overlap() {
    let server = server();
    let client = client_of(&server, true).await;
    let names: Vec<String> = (0..4).map(|_| unique("coalesce-exclusion")).collect();
    let held: Arc<Vec<AtomicBool>> = Arc::new((0..4).map(|_| AtomicBool::new(false)).collect());
    let overlaps = Arc::new(AtomicUsize::new(0));
    let acquisitions = Arc::new(AtomicUsize::new(0));
    let tasks = 3 * COALESCE_AFTER;
    let shared = (
        client.clone(),
        names.clone(),
        held.clone(),
        overlaps.clone(),
        acquisitions.clone(),
    );
    together(
        tasks,
        shared,
        |(client, names, held, overlaps, acquisitions), task| async move {
            for round in 0..60 {
                let which = (task + round) % names.len();
                let guard = client.lock(&names[which]).lock().await.expect("lock");
                if held[which].swap(true, Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                acquisitions.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
                held[which].store(false, Ordering::SeqCst);
                guard.unlock().await.expect("unlock");
            }
        },
    )
    .await;
    let stats = client.stats();
    println!(
        "{} acquisitions by {tasks} tasks on 4 names: {} overlaps; {} coalesced calls carried {}",
        acquisitions.load(Ordering::SeqCst),
        overlaps.load(Ordering::SeqCst),
        stats.coalesced_calls,
        stats.coalesced_requests
    );
    assert_eq!(acquisitions.load(Ordering::SeqCst), tasks * 60);
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    assert!(stats.coalesced_calls > 0, "nothing was coalesced");
    let mut conn = raw(&server).await;
    for name in &names {
        let exists: bool = conn.exists(name).await.unwrap();
        assert!(!exists, "{name} left behind");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_callers_error_is_its_own() {
    let server = server();
    let client = client_of(&server, true).await;
    let mut conn = raw(&server).await;
    let wrong = unique("coalesce-wrongtype");
    let _: () = conn.set(&wrong, "a string").await.unwrap();
    let before = conn.get::<_, String>(&wrong).await.unwrap();
    let mut coalesced_rounds = 0;
    for round in 0..40 {
        let start = client.stats().coalesced_requests;
        let names: Vec<String> = (0..3 * COALESCE_AFTER)
            .map(|i| {
                if i == 17 {
                    wrong.clone()
                } else {
                    unique("coalesce-fine")
                }
            })
            .collect();
        let results = together(
            3 * COALESCE_AFTER,
            (client.clone(), names.clone()),
            |(client, names), i| async move {
                client.lock(&names[i]).with_fencing(true).try_lock().await
            },
        )
        .await;
        let mut tokens = Vec::new();
        for (i, result) in results.into_iter().enumerate() {
            if i == 17 {
                assert!(
                    matches!(result, Err(Error::WrongType { .. })),
                    "round {round}: the string key gave {result:?}"
                );
            } else {
                let guard = result
                    .unwrap_or_else(|e| panic!("round {round}: {e}"))
                    .expect("a free name");
                tokens.push(guard.fencing_token().expect("a fencing token"));
                guard.unlock().await.unwrap();
            }
        }
        assert_eq!(tokens.len(), 3 * COALESCE_AFTER - 1);
        if client.stats().coalesced_requests > start {
            coalesced_rounds += 1;
        }
    }
    println!("40 rounds, {coalesced_rounds} of them coalesced");
    assert!(coalesced_rounds > 0, "nothing was coalesced");
    assert_eq!(conn.get::<_, String>(&wrong).await.unwrap(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_acquisitions_in_batches_leave_nothing() {
    let server = server();
    let client = client_of(&server, true).await;
    let prefix = unique("coalesce-storm");
    let names: Vec<String> = (0..8).map(|i| format!("{prefix}-{i}")).collect();
    let acquired = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    for round in 0..20u64 {
        let shared = (
            client.clone(),
            names.clone(),
            acquired.clone(),
            dropped.clone(),
        );
        together(
            4 * COALESCE_AFTER,
            shared,
            move |(client, names, acquired, dropped), task| async move {
                // Limits from 0 to 2.5 ms: some end while waiting to leave, some while their
                // batch is under way, some after it answered.
                let limit = Duration::from_micros((task as u64 * 397 + round * 131) % 2_500);
                let lock = client.lock(&names[task % names.len()]);
                match tokio::time::timeout(limit, lock.lock()).await {
                    Ok(Ok(guard)) => {
                        acquired.fetch_add(1, Ordering::SeqCst);
                        drop(guard);
                    }
                    Ok(Err(e)) => panic!("lock: {e}"),
                    Err(_) => {
                        dropped.fetch_add(1, Ordering::SeqCst);
                    }
                }
            },
        )
        .await;
    }
    let left = settled_and_left(&client, &server, &prefix).await;
    let stats = client.stats();
    println!(
        "{} acquisitions: {} acquired, {} dropped; {} coalesced calls carried {}; left: {left:?}",
        20 * 4 * COALESCE_AFTER,
        acquired.load(Ordering::SeqCst),
        dropped.load(Ordering::SeqCst),
        stats.coalesced_calls,
        stats.coalesced_requests
    );
    assert!(left.is_empty(), "holds left behind: {left:?}");
    assert!(
        dropped.load(Ordering::SeqCst) > 0,
        "no acquisition was dropped"
    );
    assert!(stats.coalesced_calls > 0, "nothing was coalesced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_caller_and_a_client_without_coalescing_never_batch() {
    let server = server();
    let client = client_of(&server, true).await;
    let name = unique("coalesce-lone");
    for _ in 0..50 {
        client
            .lock(&name)
            .lock()
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
    }
    assert_eq!(client.stats().coalesced_calls, 0, "a lone caller waited");

    let off = client_of(&server, false).await;
    let results = together(48, off.clone(), |off, _| async move {
        off.lock(&unique("coalesce-off")).try_lock().await
    })
    .await;
    assert!(results.iter().all(|r| matches!(r, Ok(Some(_)))));
    assert_eq!(off.stats().coalesced_calls, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_after_script_flush_is_reloaded_unseen_and_runs_once() {
    let server = server();
    let client = client_of(&server, true).await;
    let mut conn = raw(&server).await;
    let prefix = unique("coalesce-flush");
    let mut coalesced_rounds = 0;
    for round in 0..20 {
        // After the flush, a burst of acquisitions reloads the acquisitions' batch script;
        // then releases and acquisitions leave together, in batches of two scripts of which
        // only the releases' is missing. The acquisitions ran and must not run again when it
        // is reloaded (an acquisition run twice would count the hold twice and leak it).
        script_flush(&mut conn).await;
        let start = client.stats().coalesced_calls;
        let held = together(
            2 * COALESCE_AFTER,
            (client.clone(), prefix.clone()),
            move |(client, prefix), i| async move {
                let name = format!("{prefix}-{round}-held-{i}");
                Some(client.lock(&name).lock().await.unwrap())
            },
        )
        .await;
        let held = Arc::new(std::sync::Mutex::new(held));
        let results = together(
            4 * COALESCE_AFTER,
            (client.clone(), prefix.clone(), held.clone()),
            move |(client, prefix, held), i| async move {
                if i % 2 == 0 {
                    let guard = held.lock().unwrap()[i / 2].take().unwrap();
                    guard.unlock().await
                } else {
                    let name = format!("{prefix}-{round}-fresh-{i}");
                    match client.lock(&name).try_lock().await {
                        Ok(Some(guard)) => guard.unlock().await,
                        Ok(None) => panic!("{name} is free"),
                        Err(e) => Err(e),
                    }
                }
            },
        )
        .await;
        for result in results {
            result.expect("no NOSCRIPT reaches the caller");
        }
        if client.stats().coalesced_calls > start {
            coalesced_rounds += 1;
        }
    }
    let left = settled_and_left(&client, &server, &prefix).await;
    println!(
        "20 flushes: {coalesced_rounds} rounds coalesced, {} reloads; left: {left:?}",
        client.stats().script_reloads
    );
    assert!(
        left.is_empty(),
        "holds counted twice and left behind: {left:?}"
    );
    assert_eq!(client.stats().watchdog.holds, 0);
    assert!(coalesced_rounds > 0, "nothing was coalesced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_go_together_and_dropped_ones_still_release_once() {
    let server = server();
    let client = client_of(&server, true).await;
    let prefix = unique("coalesce-release");
    let mut coalesced_rounds = 0;
    for round in 0..20u64 {
        // Half the names are held twice by one owner (a hold count of 2): their first unlock
        // is not the last and must leave the lock held by the second guard.
        let mut guards = Vec::new();
        for i in 0..6 * COALESCE_AFTER {
            let lock = client
                .lock(&format!("{prefix}-{round}-{i}"))
                .with_owner(keylatch::Owner::unique());
            let first = lock.lock().await.unwrap();
            let second = if i % 2 == 0 {
                Some(lock.lock().await.unwrap())
            } else {
                None
            };
            guards.push((first, second));
        }
        let start = client.stats().coalesced_calls;
        let guards = Arc::new(std::sync::Mutex::new(
            guards.into_iter().map(Some).collect::<Vec<_>>(),
        ));
        let seconds = together(6 * COALESCE_AFTER, guards, move |guards, i| async move {
            let (first, second) = guards.lock().unwrap()[i].take().unwrap();
            // Some unlocks are dropped part-way: the guard's undo finishes them.
            let limit = Duration::from_micros((i as u64 * 211 + round * 97) % 1_500);
            let _ = tokio::time::timeout(limit, first.unlock()).await;
            second
        })
        .await;
        if client.stats().coalesced_calls > start {
            coalesced_rounds += 1;
        }
        // Every lock held twice is still held, once, by its second guard.
        for (i, second) in seconds.into_iter().enumerate() {
            let name = format!("{prefix}-{round}-{i}");
            if let Some(second) = second {
                let still = eventually(Duration::from_secs(5), || {
                    let (client, name) = (client.clone(), name.clone());
                    async move {
                        client.stats().background_pending == 0
                            && client.lock(&name).is_locked().await.unwrap()
                    }
                })
                .await;
                assert!(still, "round {round}: {name} was released twice");
                second.unlock().await.expect("the second guard still holds");
            }
        }
    }
    let left = settled_and_left(&client, &server, &prefix).await;
    println!(
        "20 rounds of {} unlocks: {coalesced_rounds} rounds coalesced; left: {left:?}",
        6 * COALESCE_AFTER
    );
    assert!(left.is_empty(), "holds left behind: {left:?}");
    assert!(coalesced_rounds > 0, "nothing was coalesced");
}
