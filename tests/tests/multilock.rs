//! MultiLock: tasks take random overlapping subsets of five locks of different primitives; no
//! deadlock, no two tasks inside one lock at once (a read-then-write counter per lock loses no
//! increment), nothing left behind; a part that cannot be taken releases the parts taken
//! before it; a dropped acquire releases what it took; `lost()` fires when any part is lost.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keylatch::{Client, DistributedLock, Error, MultiLock};
use keylatch_tests::{client_with, server};
use tokio::time::Instant;

const NAMES: [&str; 5] = ["ml:a", "ml:b", "ml:c", "ml:d", "ml:e"];

/// The lock behind `name`, by its last letter: `c` a fair lock, `d` a write lock, `e` a
/// semaphore's lock view (its permits set up by the test), anything else a reentrant lock.
fn part(client: &Client, name: &str) -> Arc<dyn DistributedLock> {
    match name.chars().last() {
        Some('c') => Arc::new(client.fair_lock(name)),
        Some('d') => Arc::new(client.rw_lock(name).write_lock()),
        Some('e') => Arc::new(client.semaphore(name).as_lock()),
        _ => Arc::new(client.lock(name)),
    }
}

fn multi(client: &Client, names: &[&str]) -> MultiLock {
    MultiLock::new(names.iter().map(|n| part(client, n))).unwrap()
}

/// A small deterministic generator, one per task.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_subsets_never_deadlock_and_never_overlap() {
    let server = server();
    let run = if std::env::var_os("KEYLATCH_FULL").is_some() {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(3)
    };
    let clients = [
        client_with(&server, Duration::from_secs(30), Duration::from_millis(500)).await,
        client_with(&server, Duration::from_secs(30), Duration::from_millis(500)).await,
    ];
    clients[0]
        .semaphore("ml:e")
        .try_set_permits(1)
        .await
        .unwrap();
    // Per lock: a counter read, then written back plus one after a yield, inside the section.
    let counters: Arc<Mutex<HashMap<&str, u64>>> = Arc::default();
    let sections: Arc<Mutex<HashMap<&str, u64>>> = Arc::default();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..8u64 {
        let client = clients[(task % 2) as usize].clone();
        let (counters, sections) = (counters.clone(), sections.clone());
        tasks.push(tokio::spawn(async move {
            let mut seed = 0x9e37_79b9_7f4a_7c15 ^ (task + 1);
            let (mut taken, mut timed_out) = (0u64, 0u64);
            while started.elapsed() < run {
                let bits = next(&mut seed);
                let mut chosen: Vec<&str> = NAMES
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| bits >> i & 1 == 1)
                    .map(|(_, n)| *n)
                    .collect();
                if chosen.len() < 2 {
                    chosen = vec![NAMES[(bits % 5) as usize], NAMES[((bits + 2) % 5) as usize]];
                }
                // The given order is scrambled on purpose; the lock takes its own order.
                if bits & 0x100 != 0 {
                    chosen.reverse();
                }
                let set = multi(&client, &chosen);
                let guard = if bits & 0x200 != 0 {
                    Some(set.lock().await.unwrap())
                } else {
                    set.try_lock_for(Duration::from_millis(300), None)
                        .await
                        .unwrap()
                };
                let Some(guard) = guard else {
                    timed_out += 1;
                    continue;
                };
                let seen: Vec<u64> = {
                    let counters = counters.lock().unwrap();
                    chosen
                        .iter()
                        .map(|n| counters.get(n).copied().unwrap_or(0))
                        .collect()
                };
                tokio::time::sleep(Duration::from_millis(1)).await;
                {
                    let mut counters = counters.lock().unwrap();
                    let mut sections = sections.lock().unwrap();
                    for (name, value) in chosen.iter().zip(seen) {
                        counters.insert(name, value + 1);
                        *sections.entry(name).or_default() += 1;
                    }
                }
                assert!(!guard.is_lost());
                guard.unlock().await.unwrap();
                taken += 1;
            }
            (taken, timed_out)
        }));
    }
    let mut totals = (0, 0);
    for task in tasks {
        let (taken, timed_out) = tokio::time::timeout(run + Duration::from_secs(30), task)
            .await
            .expect("a task deadlocked")
            .unwrap();
        totals.0 += taken;
        totals.1 += timed_out;
    }
    let counters = counters.lock().unwrap().clone();
    let sections = sections.lock().unwrap().clone();
    println!(
        "8 tasks, {run:?}: {} sets taken, {} bounded waits ran out; per lock: {counters:?}",
        totals.0, totals.1
    );
    assert!(totals.0 > 50, "the tasks made progress");
    for name in NAMES {
        assert_eq!(
            counters.get(name),
            sections.get(name),
            "{name}: an increment was lost, two tasks were inside at once"
        );
    }
    for client in &clients {
        client.shutdown().await.unwrap();
    }
    let check = client_with(&server, Duration::from_secs(30), Duration::from_secs(2)).await;
    for name in NAMES {
        assert!(
            !part(&check, name).is_locked().await.unwrap(),
            "{name} left held"
        );
    }
    assert_eq!(
        check.semaphore("ml:e").available_permits().await.unwrap(),
        1
    );
}

#[tokio::test]
async fn a_part_that_cannot_be_taken_releases_the_ones_before_it() {
    let server = server();
    let client = keylatch_tests::client(&server).await;
    let other = keylatch_tests::client(&server).await;
    let blocker = part(&other, "ml2:c").lock().await.unwrap();
    let set = multi(&client, &["ml2:c", "ml2:a", "ml2:b"]);
    assert_eq!(set.names().collect::<Vec<_>>(), ["ml2:a", "ml2:b", "ml2:c"]);
    let started = Instant::now();
    let taken = set
        .try_lock_for(Duration::from_millis(300), None)
        .await
        .unwrap();
    println!("gave up after {:?}", started.elapsed());
    assert!(taken.is_none());
    for name in ["ml2:a", "ml2:b"] {
        assert!(!client.lock(name).is_locked().await.unwrap(), "{name} kept");
    }
    // try_lock: one try each, no wait.
    assert!(set.try_lock().await.unwrap().is_none());
    blocker.unlock().await.unwrap();
    let all = set.try_lock().await.unwrap().expect("every part is free");
    assert_eq!(all.guards().len(), 3);
    assert!(all.valid_until().is_some());
    all.unlock().await.unwrap();
}

#[tokio::test]
async fn a_dropped_acquire_releases_what_it_took() {
    let server = server();
    let client = keylatch_tests::client(&server).await;
    let other = keylatch_tests::client(&server).await;
    let blocker = other.lock("ml3:z").lock().await.unwrap();
    let set = multi(&client, &["ml3:a", "ml3:b", "ml3:z"]);
    let waiting = tokio::spawn(async move { set.lock().await.map(drop) });
    // a and b are taken; the acquire waits for z.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !client.lock("ml3:b").is_locked().await.unwrap() {
        assert!(Instant::now() < deadline, "the first parts were not taken");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    waiting.abort();
    let _ = waiting.await;
    client.wait_idle().await;
    for name in ["ml3:a", "ml3:b"] {
        assert!(!client.lock(name).is_locked().await.unwrap(), "{name} kept");
    }
    blocker.unlock().await.unwrap();
}

#[tokio::test]
async fn lost_fires_when_any_part_is_lost() {
    let server = server();
    let client = client_with(&server, Duration::from_millis(600), Duration::from_secs(2)).await;
    let set = multi(&client, &["ml4:a", "ml4:b"]);
    let guard = set.lock().await.unwrap();
    let lost = guard.lost();
    assert!(client.lock("ml4:b").force_unlock().await.unwrap());
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), lost)
        .await
        .expect("lost() fires when one part is lost");
    println!(
        "lost() fired {:?} after one part was forced open",
        started.elapsed()
    );
    assert!(guard.is_lost());
    assert!(guard.valid_until().is_none());
    drop(guard);
}

#[test]
fn bad_sets_are_refused() {
    assert!(matches!(
        MultiLock::new(Vec::<Arc<dyn DistributedLock>>::new()),
        Err(Error::InvalidName { .. })
    ));
}

#[tokio::test]
async fn duplicate_names_are_refused_before_anything_is_sent() {
    let server = server();
    let client = keylatch_tests::client(&server).await;
    let err = MultiLock::new([part(&client, "ml5:a"), part(&client, "ml5:a")]).unwrap_err();
    assert!(matches!(err, Error::InvalidName { .. }), "{err}");
    assert_eq!(server.cli(&["DBSIZE"]).unwrap(), "0");
}
