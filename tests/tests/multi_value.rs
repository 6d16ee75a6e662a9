//! The multi-value lock on one server: all-or-nothing over overlapping value sets, the hash
//! layout, reentrancy, leases and the watchdog's renewal of every value, wake-ups, cancel
//! safety, typed errors for bad value sets, and no deadlock among many tasks taking random
//! overlapping sets.
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keylatch::redis::AsyncCommands;
use keylatch::{Error, Owner};
use keylatch_tests::{client, client_with, dropped_in_flight, raw, server, unique};

async fn fields(
    conn: &mut keylatch::redis::aio::MultiplexedConnection,
    group: &str,
) -> HashMap<String, String> {
    conn.hgetall(group).await.unwrap()
}

#[tokio::test]
async fn values_are_taken_all_or_nothing() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let group = unique("mv-all");
    let ab_lock = client.multi_value_lock(&group, ["a", "b"]);
    let ab = ab_lock.try_lock().await.unwrap();
    let ab = ab.expect("a free group is taken");
    let owner = ab.owner_id().to_string();
    let layout = fields(&mut conn, &group).await;
    assert_eq!(layout.len(), 6, "two values, three fields each: {layout:?}");
    for value in ab_lock.fields() {
        assert_eq!(&layout[value], &owner);
        assert_eq!(layout[&format!("{value}:{owner}:lock_count")], "1");
        assert!(layout.contains_key(&format!("{value}:{owner}:expire_time")));
    }
    // {b,c} shares b: refused, and c is left untouched.
    let bc = client.multi_value_lock(&group, ["b", "c"]);
    assert!(bc.try_lock().await.unwrap().is_none());
    assert!(
        !fields(&mut conn, &group)
            .await
            .contains_key(&bc.fields()[1])
    );
    assert!(bc.is_locked().await.unwrap());
    // {c,d} is disjoint: taken alongside.
    let cd = client
        .multi_value_lock(&group, ["c", "d"])
        .try_lock()
        .await
        .unwrap();
    let cd = cd.expect("disjoint values are taken");
    ab.unlock().await.unwrap();
    let bc_guard = bc.try_lock().await.unwrap();
    assert!(bc_guard.is_none(), "c is still held by {{c,d}}");
    cd.unlock().await.unwrap();
    let bc_guard = bc
        .try_lock()
        .await
        .unwrap()
        .expect("free after both released");
    bc_guard.unlock().await.unwrap();
    let exists: bool = conn.exists(&group).await.unwrap();
    assert!(!exists, "the group key remains after the last unlock");
}

#[tokio::test]
async fn an_owner_re_enters_and_releases_per_hold() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let group = unique("mv-reenter");
    let lock = client
        .multi_value_lock(&group, ["x", "y"])
        .with_owner(Owner::unique());
    let first = lock.lock().await.unwrap();
    let second = lock.lock().await.unwrap();
    let owner = first.owner_id().to_string();
    assert_eq!(
        fields(&mut conn, &group).await[&format!("{}:{owner}:lock_count", lock.fields()[0])],
        "2"
    );
    first.unlock().await.unwrap();
    assert!(
        client
            .multi_value_lock(&group, ["y"])
            .try_lock()
            .await
            .unwrap()
            .is_none()
    );
    second.unlock().await.unwrap();
    let exists: bool = conn.exists(&group).await.unwrap();
    assert!(!exists);
}

#[tokio::test]
async fn bad_value_sets_and_leases_are_typed_errors() {
    let server = server();
    let client = client(&server).await;
    let group = unique("mv-bad");
    let many: Vec<String> = (0..=keylatch::MAX_MULTI_VALUES)
        .map(|i| i.to_string())
        .collect();
    let bad: Vec<Vec<String>> = vec![
        vec![],
        vec!["a".into(), "a".into()],
        vec!["a".into(), String::new()],
        many,
    ];
    for values in bad {
        let lock = client.multi_value_lock(&group, values);
        assert!(matches!(
            lock.try_lock().await,
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            lock.force_unlock().await,
            Err(Error::InvalidName { .. })
        ));
    }
    let lock = client.multi_value_lock(&group, ["a"]);
    let zero = lock
        .try_lock_for(Duration::ZERO, Some(Duration::ZERO))
        .await;
    assert!(matches!(zero, Err(Error::InvalidLease { .. })));
    let mut conn = raw(&server).await;
    let _: () = conn.set(&group, "text").await.unwrap();
    assert!(matches!(
        lock.try_lock().await,
        Err(Error::WrongType { .. })
    ));
}

#[tokio::test]
async fn the_watchdog_renews_every_value_and_a_lease_ends() {
    let server = server();
    let client = client_with(&server, Duration::from_secs(1), Duration::from_secs(2)).await;
    let mut conn = raw(&server).await;
    let group = unique("mv-renew");
    let pq = client.multi_value_lock(&group, ["p", "q"]);
    let guard = pq.lock().await.unwrap();
    let owner = guard.owner_id().to_string();
    let before = fields(&mut conn, &group).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let after = fields(&mut conn, &group).await;
    for value in pq.fields() {
        let key = format!("{value}:{owner}:expire_time");
        let (b, a): (i64, i64) = (before[&key].parse().unwrap(), after[&key].parse().unwrap());
        assert!(
            a > b + 1000,
            "{value}'s expire_time was not renewed: {b} -> {a}"
        );
    }
    let other = client.multi_value_lock(&group, ["q"]);
    assert!(
        other.try_lock().await.unwrap().is_none(),
        "a renewed value was taken"
    );
    guard.unlock().await.unwrap();

    let leased = client
        .multi_value_lock(&group, ["p", "q"])
        .try_lock_for(Duration::ZERO, Some(Duration::from_millis(300)))
        .await
        .unwrap()
        .expect("free");
    let started = Instant::now();
    let taken = other
        .try_lock_for(Duration::from_secs(10), None)
        .await
        .unwrap();
    assert!(
        taken.is_some(),
        "the value was not taken after its lease ended"
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
    drop(leased);
    taken.unwrap().unlock().await.unwrap();
}

#[tokio::test]
async fn a_release_wakes_a_waiter_on_a_shared_value() {
    let server = server();
    // A 30 s watchdog and a 60 s fallback poll: only a wake-up lets the waiter in within the
    // bound below.
    let client = client_with(&server, Duration::from_secs(30), Duration::from_secs(60)).await;
    let group = unique("mv-wake");
    let holder = client
        .multi_value_lock(&group, ["a", "b"])
        .lock()
        .await
        .unwrap();
    let waiter = client.multi_value_lock(&group, ["b", "c"]);
    let waiting =
        tokio::spawn(async move { waiter.try_lock_for(Duration::from_secs(20), None).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished());
    holder.unlock().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter was not woken")
        .unwrap()
        .unwrap();
    got.expect("taken").unlock().await.unwrap();
}

#[tokio::test]
async fn an_acquire_dropped_in_flight_leaves_no_field() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let group = unique("mv-drop");
    let lock = client.multi_value_lock(&group, ["a", "b", "c"]);
    assert!(dropped_in_flight(&mut conn, lock.lock()).await);
    client.wait_idle().await;
    let exists: bool = conn.exists(&group).await.unwrap();
    assert!(
        !exists,
        "the dropped acquire left fields: {:?}",
        fields(&mut conn, &group).await
    );
    assert_eq!(client.stats().watchdog.holds, 0);
}

#[tokio::test]
async fn a_re_entry_dropped_in_flight_leaves_the_count_of_the_guards() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let group = unique("mv-drop-reentry");
    let lock = client
        .multi_value_lock(&group, ["a", "b"])
        .with_owner(Owner::unique());
    let guard = lock.lock().await.unwrap();
    let owner = guard.owner_id().to_string();
    assert!(dropped_in_flight(&mut conn, lock.lock()).await);
    client.wait_idle().await;
    let layout = fields(&mut conn, &group).await;
    for field in lock.fields() {
        assert_eq!(
            layout[&format!("{field}:{owner}:lock_count")],
            "1",
            "{layout:?}"
        );
    }
    guard.unlock().await.unwrap();
    let exists: bool = conn.exists(&group).await.unwrap();
    assert!(!exists);
}

#[tokio::test]
async fn force_unlock_frees_the_values_of_any_holder() {
    let server = server();
    let client = client(&server).await;
    let group = unique("mv-force");
    let guard = client
        .multi_value_lock(&group, ["a", "b"])
        .lock()
        .await
        .unwrap();
    let other = client.multi_value_lock(&group, ["b"]);
    assert!(other.force_unlock().await.unwrap());
    assert!(!other.is_locked().await.unwrap());
    let taken = other.try_lock().await.unwrap().expect("b was freed");
    assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));
    taken.unlock().await.unwrap();
}

const VALUES: usize = 6;

/// Many tasks on two clients lock random overlapping subsets; a flag per value catches any
/// overlap, and the whole run must end (no deadlock) within a bound far above its need.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_overlapping_sets_never_overlap_nor_deadlock() {
    let server = server();
    let clients = [client(&server).await, client(&server).await];
    let group = unique("mv-random");
    let busy: Arc<Vec<AtomicBool>> =
        Arc::new((0..VALUES).map(|_| AtomicBool::new(false)).collect());
    let overlaps = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for task in 0..8u64 {
        let client = clients[task as usize % 2].clone();
        let (group, busy, overlaps) = (group.clone(), busy.clone(), overlaps.clone());
        tasks.push(tokio::spawn(async move {
            let mut seed = task * 7919 + 17;
            for _ in 0..25 {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let mask = ((seed >> 33) as usize % ((1 << VALUES) - 1)) + 1;
                let picked: Vec<usize> = (0..VALUES).filter(|v| mask & (1 << v) != 0).collect();
                let values: Vec<String> = picked.iter().map(|v| format!("v{v}")).collect();
                let guard = client
                    .multi_value_lock(&group, values)
                    .lock()
                    .await
                    .unwrap();
                for &v in &picked {
                    if busy[v].swap(true, Ordering::SeqCst) {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                }
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_millis(1)).await;
                for &v in &picked {
                    busy[v].store(false, Ordering::SeqCst);
                }
                guard.unlock().await.unwrap();
            }
        }));
    }
    let all = async {
        for task in tasks {
            task.await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(120), all)
        .await
        .expect("the tasks did not finish: a deadlock or a lost wake-up");
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "two holders held one value at once"
    );
    let mut conn = raw(&server).await;
    let exists: bool = conn.exists(&group).await.unwrap();
    assert!(!exists);
}
