//! Replica acknowledgement (`Config::replicas`) on a sentinel set: every primitive works with
//! it; with the replicas paused (so they miss the write) every acquisition fails with
//! `NotReplicated` and leaves nothing behind; and without it, the documented risk: an
//! acquisition the replicas never saw is lost when the primary dies, and a second client gets
//! the same lock from the promoted replica (the first is told: its guard reports the loss).
use std::time::{Duration, Instant};

use keylatch::{AcquireOptions, Client, Config, Error};
use keylatch_testkit::SentinelSet;
use keylatch_tests::every::{exercise_every_primitive, primitive_pairs};

const ACK_TIMEOUT: Duration = Duration::from_millis(300);

async fn connect(set: &SentinelSet, replicas: u32) -> Client {
    let config = Config::builder()
        .url(set.url())
        .replicas(replicas, ACK_TIMEOUT)
        .watchdog_timeout(Duration::from_secs(3))
        .fallback_poll(Duration::from_secs(60))
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .build()
        .expect("config");
    Client::connect_with(config)
        .await
        .expect("connect through the sentinels")
}

/// The median of `rounds` lock + unlock pairs on `client`.
async fn median_pair(client: &Client, name: &str, rounds: usize) -> Duration {
    let lock = client.lock(name);
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        let guard = lock.lock().await.unwrap();
        guard.unlock().await.unwrap();
        times.push(started.elapsed());
    }
    times.sort();
    times[times.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_wait_for_replicas_and_fail_when_they_do_not_answer() {
    let mut set = tokio::task::spawn_blocking(SentinelSet::start)
        .await
        .unwrap()
        .expect("start a sentinel set");

    // Every primitive, each acquisition acknowledged by both replicas.
    let holder = connect(&set, 2).await;
    let waiter = connect(&set, 2).await;
    assert_eq!(
        exercise_every_primitive(&holder, &waiter, "app:acked").await,
        6
    );

    // The cost, side by side in one run (printed, not asserted).
    let plain = connect(&set, 0).await;
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for round in 0..3 {
        without.push(median_pair(&plain, &format!("app:cost-plain-{round}"), 100).await);
        with.push(median_pair(&holder, &format!("app:cost-acked-{round}"), 100).await);
    }
    with.sort();
    without.sort();
    println!(
        "lock+unlock p50: {:?} with acknowledgement by 2 replicas, {:?} without: {:.2}x",
        with[1],
        without[1],
        with[1].as_secs_f64() / without[1].as_secs_f64()
    );

    // Both replicas miss every write: each primitive's acquisition fails, and is undone.
    for node in &set.nodes()[1..] {
        node.pause().unwrap();
    }
    let acked = connect(&set, 1).await;
    let pairs = primitive_pairs(&acked, &plain, "app:unacked")
        .await
        .unwrap();
    for (what, lock, other) in &pairs {
        let started = Instant::now();
        let err = lock
            .acquire(AcquireOptions::new().with_wait(Duration::ZERO))
            .await
            .expect_err("no replica can acknowledge");
        println!("{what}: refused after {:?}: {err}", started.elapsed());
        assert!(
            matches!(
                err,
                Error::NotReplicated {
                    acknowledged: 0,
                    wanted: 1,
                    ..
                }
            ),
            "{what}: {err:?}"
        );
        // Nothing is left: the other client takes it at once (acknowledgement off).
        let guard = other
            .acquire(AcquireOptions::new().with_wait(Duration::ZERO))
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"))
            .unwrap_or_else(|| panic!("{what}: the refused acquisition left a hold behind"));
        guard.unlock().await.unwrap();
    }
    let semaphore = plain.semaphore("app:unacked-semaphore");
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    let expirable = plain.permit_expirable_semaphore("app:unacked-expirable");
    assert_eq!(expirable.available_permits().await.unwrap(), 1);

    // Without acknowledgement, the documented risk: the replicas never see the hold, the
    // primary dies, a replica is promoted, and a second client gets the same lock. (The
    // primary drops its paused replicas' links first: bytes already sent to a paused process
    // would still reach it from its socket buffer once it runs again.)
    set.nodes()[0]
        .cli(&["CLIENT", "KILL", "TYPE", "replica"])
        .unwrap();
    let first = plain.lock("app:risk").lock().await.unwrap();
    let old = set.primary_port().unwrap();
    set.nodes_mut()[0].kill();
    for node in &set.nodes()[1..] {
        node.resume().unwrap();
    }
    let set_ref = &set;
    let switched = tokio::task::block_in_place(|| {
        set_ref.wait_for_new_primary(old, Instant::now() + Duration::from_secs(30))
    })
    .expect("the sentinels promote a replica");
    println!("primary killed: the sentinels promoted a replica after {switched:?}");
    let second = connect(&set, 0).await;
    let taken = second
        .lock("app:risk")
        .try_lock()
        .await
        .unwrap()
        .expect("the promoted replica never had the first hold");
    println!("without acknowledgement: a second client acquired the lock the first still holds");
    // The first holder is told: its hold is checked on the new primary.
    let told = tokio::time::timeout(Duration::from_secs(10), first.lost()).await;
    assert!(told.is_ok(), "the first holder's guard reports the loss");
    println!("the first holder's lost() fired");
    taken.unlock().await.unwrap();
    drop(first);
    for client in [holder, waiter, plain, acked, second] {
        let _ = tokio::time::timeout(Duration::from_secs(10), client.shutdown()).await;
    }
}
