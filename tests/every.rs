//! Every primitive through one path: a holder takes it, a waiter waits (woken by pub/sub on
//! Redis, by a watch on ZooKeeper) and takes it after the release, then releases. Used by the
//! TLS, ACL, Sentinel, cluster and ZooKeeper tests; and a cancellation storm over every
//! primitive, run on one server, on a cluster and on ZooKeeper.
//!
//! Store-neutral: on a `zk://` client the holder acquires without a lease (a ZooKeeper hold
//! lasts as long as its session), wake-up messages are not counted (there are none), and both
//! semaphores are the facade's on Curator's semaphore, of one lease (`with_permits(1)`).

use std::sync::Arc;
use std::time::Duration;

use keylatch::{AcquireOptions, Client, DistributedLock, StoreKind};
use keylatch_testkit::RedisServer;

/// A lease long enough that only a wake-up message can end a wait early.
pub const LONG_LEASE: Duration = Duration::from_secs(20);

fn on_zookeeper(client: &Client) -> bool {
    client.store_kind() == StoreKind::ZooKeeper
}

/// How the holder acquires: with [`LONG_LEASE`] on Redis (so only a wake-up can end a wait
/// early); without a lease on ZooKeeper, which has none (a hold ends with its release or its
/// session).
fn holder_options(zookeeper: bool) -> AcquireOptions {
    if zookeeper {
        AcquireOptions::new()
    } else {
        AcquireOptions::new().with_lease(LONG_LEASE)
    }
}

/// The lock names [`primitive_pairs`] uses on ZooKeeper for `name`: each is a znode under the
/// client's base path (`/keylatch/<name>`); the semaphore's contenders are under its `leases`
/// and `locks` children.
pub fn zookeeper_names(name: &str) -> Vec<String> {
    ["lock", "fair", "rw", "rw2", "semaphore", "expirable"]
        .iter()
        .map(|suffix| format!("{name}-{suffix}"))
        .collect()
}

/// What a primitive is, and the holder's and the waiter's handle of it.
pub type Pair = (
    &'static str,
    Arc<dyn DistributedLock>,
    Arc<dyn DistributedLock>,
);

/// Each primitive on `name` (with a suffix per primitive) as the holder's and the waiter's
/// lock: reentrant, fair, write-then-read, write-then-write, semaphore and permit-expirable
/// semaphore of one permit. On ZooKeeper the semaphores are the facade's on Curator's
/// semaphore, their maximum of one given by `with_permits` (ZooKeeper stores none).
pub async fn primitive_pairs(
    holder: &Client,
    waiter: &Client,
    name: &str,
) -> keylatch::Result<Vec<Pair>> {
    let n = |suffix: &str| format!("{name}-{suffix}");
    let semaphore = n("semaphore");
    let expirable = n("expirable");
    let zookeeper = on_zookeeper(holder);
    if !zookeeper {
        holder.semaphore(&semaphore).try_set_permits(1).await?;
        holder
            .permit_expirable_semaphore(&expirable)
            .try_set_permits(1)
            .await?;
    }
    // On Redis the count is stored (set above); on ZooKeeper each client gives it.
    let sized = |client: &Client| {
        let (plain, expiring) = (
            client.semaphore(&semaphore),
            client.permit_expirable_semaphore(&expirable),
        );
        if zookeeper {
            (plain.with_permits(1), expiring.with_permits(1))
        } else {
            (plain, expiring)
        }
    };
    let ((held, held_expiring), (waited, waited_expiring)) = (sized(holder), sized(waiter));
    let mut pairs = lock_pairs(holder, waiter, name);
    pairs.extend([
        (
            "semaphore",
            Arc::new(held.as_lock()) as Arc<dyn DistributedLock>,
            Arc::new(waited.as_lock()) as Arc<dyn DistributedLock>,
        ),
        (
            "permit-expirable semaphore",
            Arc::new(held_expiring.as_lock()),
            Arc::new(waited_expiring.as_lock()),
        ),
    ]);
    Ok(pairs)
}

/// The lock family's pairs of [`primitive_pairs`], the same on both stores.
fn lock_pairs(holder: &Client, waiter: &Client, name: &str) -> Vec<Pair> {
    let n = |suffix: &str| format!("{name}-{suffix}");
    vec![
        (
            "reentrant lock",
            Arc::new(holder.lock(&n("lock"))),
            Arc::new(waiter.lock(&n("lock"))),
        ),
        (
            "fair lock",
            Arc::new(holder.fair_lock(&n("fair"))),
            Arc::new(waiter.fair_lock(&n("fair"))),
        ),
        (
            "read lock behind a writer",
            Arc::new(holder.rw_lock(&n("rw")).write_lock()),
            Arc::new(waiter.rw_lock(&n("rw")).read_lock()),
        ),
        (
            "write lock",
            Arc::new(holder.rw_lock(&n("rw2")).write_lock()),
            Arc::new(waiter.rw_lock(&n("rw2")).write_lock()),
        ),
    ]
}

/// For every primitive: `holder` acquires with a long lease (on ZooKeeper: without a lease);
/// the server must then say the lock is taken and the waiter's try must be refused; `waiter`
/// waits (it must still be waiting when the holder releases after 100 ms), acquires before
/// the lease could have ended the hold, the server says it is taken, the waiter releases and
/// the server says it is free. On Redis, asserts that a wake-up message reached the waiter's
/// client for each primitive that ran (ZooKeeper wakes a waiter by a watch, not a message).
/// Returns how many primitives passed every one of these checks: a primitive whose operation
/// failed, was skipped or did not exclude is not counted (what went wrong is printed).
pub async fn exercise_every_primitive(holder: &Client, waiter: &Client, name: &str) -> usize {
    let redis = !on_zookeeper(waiter);
    assert!(
        !redis || waiter.config().fallback_poll >= LONG_LEASE,
        "the waiter must not poll: only a message may wake it"
    );
    let pairs = primitive_pairs(holder, waiter, name)
        .await
        .expect("set up the semaphores");
    let messages_before = waiter.stats().hub_messages;
    let mut ran = 0;
    for (what, held, waited) in &pairs {
        match exercise(!redis, held, waited).await {
            Ok(()) => ran += 1,
            Err(failure) => println!("{what}: FAILED: {failure}"),
        }
    }
    // Each run that passed was woken by a message.
    let messages = waiter.stats().hub_messages - messages_before;
    assert!(
        !redis || messages >= ran as u64,
        "{messages} wake-up messages for {ran} primitives that ran"
    );
    ran
}

/// One primitive's run of [`exercise_every_primitive`] (on ZooKeeper when `zookeeper`); what
/// went wrong, if anything.
async fn exercise(
    zookeeper: bool,
    held: &Arc<dyn DistributedLock>,
    waited: &Arc<dyn DistributedLock>,
) -> Result<(), String> {
    let taken = |lock: &Arc<dyn DistributedLock>, who: &'static str| {
        let lock = lock.clone();
        async move {
            lock.is_locked()
                .await
                .map_err(|err| format!("asking the server whether it is taken ({who}): {err}"))
        }
    };
    if taken(held, "before").await? {
        return Err("taken before the holder acquired it".into());
    }
    let guard = held
        .acquire(holder_options(zookeeper))
        .await
        .map_err(|err| format!("the holder's acquire failed: {err}"))?
        .ok_or("an unbounded acquire returned no guard")?;
    if !taken(held, "held").await? {
        return Err("the server does not have the holder's hold".into());
    }
    match waited.try_lock().await {
        Ok(None) => {}
        Ok(Some(_)) => return Err("the waiter acquired it while the holder held it".into()),
        Err(err) => return Err(format!("the waiter's try failed: {err}")),
    }
    let waiting_for = waited.clone();
    let started = tokio::time::Instant::now();
    let waiting = tokio::spawn(async move {
        let guard = waiting_for
            .acquire(AcquireOptions::new().with_wait(LONG_LEASE * 2))
            .await;
        (guard, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    if waiting.is_finished() {
        let (guard, after) = waiting.await.map_err(|err| err.to_string())?;
        return Err(format!(
            "the waiter's acquire ended after {after:?}, before the holder released: {:?}",
            guard.map(|g| g.is_some())
        ));
    }
    guard
        .unlock()
        .await
        .map_err(|err| format!("the holder's unlock failed: {err}"))?;
    let (guard, after) = waiting
        .await
        .map_err(|err| format!("the waiting task: {err}"))?;
    let guard = guard
        .map_err(|err| format!("the waiter's acquire failed: {err}"))?
        .ok_or("the waiter timed out")?;
    println!(
        "{}: the waiter acquired {after:?} after it started waiting",
        held.name()
    );
    if after >= LONG_LEASE / 2 {
        return Err(format!(
            "the waiter was not woken by the release ({after:?})"
        ));
    }
    if !taken(waited, "waiter").await? {
        return Err("the server does not have the waiter's hold".into());
    }
    guard
        .unlock()
        .await
        .map_err(|err| format!("the waiter's unlock failed: {err}"))?;
    if taken(held, "after").await? || taken(waited, "after").await? {
        return Err("still taken after both released".into());
    }
    Ok(())
}

/// Every primitive of each of `names` held by `holder` while `storm` starts waits on them and
/// drops them at every stage (before sending, in flight, subscribed, queued); then the holds
/// are released. Asserts that nothing is left on any of `nodes` (the servers, or a cluster's
/// primaries): no hold, queue entry or taken permit (a semaphore keeps its one permit), no
/// subscription, classic or sharded, and none in `storm`. On ZooKeeper (`nodes` is empty
/// then), asserts that `storm`'s view of each lock and semaphore lists no contender and no
/// lease; the caller lists the znodes itself, through a session of its own. Every aborted
/// wait is awaited: returns how many ended cancelled, and how the others ended.
pub async fn cancellation_storm(
    holder: &Client,
    storm: &Client,
    names: &[String],
    nodes: &[&RedisServer],
) -> StormTally {
    let mut tally = StormTally::default();
    for name in names {
        let pairs = primitive_pairs(holder, storm, name).await.unwrap();
        let mut guards = Vec::new();
        for (_, held, _) in &pairs {
            guards.push(held.acquire(AcquireOptions::new()).await.unwrap().unwrap());
        }
        for round in 0..10u64 {
            for (what, _, waiter) in &pairs {
                let waiter = waiter.clone();
                let acquiring = tokio::spawn(async move {
                    waiter
                        .acquire(AcquireOptions::new().with_wait(LONG_LEASE))
                        .await
                });
                tokio::time::sleep(Duration::from_micros(round * 700)).await;
                acquiring.abort();
                // The lock is held throughout: a wait can only end by being cancelled.
                match acquiring.await {
                    Err(err) if err.is_cancelled() => tally.cancelled += 1,
                    Err(err) => tally
                        .finished
                        .push(format!("{what}: the task failed: {err}")),
                    Ok(Ok(Some(guard))) => {
                        tally.finished.push(format!("{what}: acquired while held"));
                        drop(guard);
                    }
                    Ok(Ok(None)) => tally.finished.push(format!("{what}: timed out")),
                    Ok(Err(err)) => tally.finished.push(format!("{what}: {err}")),
                }
            }
        }
        for guard in guards {
            guard.unlock().await.unwrap();
        }
    }
    storm.wait_idle().await;
    // Once the channels' linger ends, nothing is subscribed and nothing is held anywhere.
    tokio::time::sleep(storm.config().subscription_linger + Duration::from_millis(350)).await;
    assert_eq!(storm.stats().subscribers, 0);
    let mut left = Vec::new();
    if let Some(zookeeper) = storm.as_zookeeper() {
        for name in names.iter().flat_map(|name| zookeeper_names(name)) {
            let contenders = zookeeper.contenders(&name, 0).await.unwrap();
            for node in contenders.nodes.iter().chain(&contenders.leases) {
                left.push(format!("{}/{} ({})", contenders.path, node.node, node.kind));
            }
        }
    }
    for node in nodes {
        let keys = node.cli(&["KEYS", "*"]).unwrap();
        for key in keys.lines().filter(|k| !k.is_empty()) {
            let kind = node.cli(&["TYPE", key]).unwrap();
            // Request markers expire on their own; fencing counters stay by design.
            if key.contains(":req:") || key.contains("fencing") || key.contains("lock_token") {
                continue;
            }
            if kind == "string" && !key.contains("lock") {
                let value = node.cli(&["GET", key]).unwrap();
                assert_eq!(value, "1", "{key}: a permit is missing");
                continue;
            }
            if kind == "zset" && key.contains("permits") {
                let taken = node.cli(&["ZCARD", key]).unwrap();
                assert_eq!(taken, "0", "{key}: a permit is still taken");
                continue;
            }
            left.push(format!("{} {key} ({kind})", node.port()));
        }
        for command in ["CHANNELS", "SHARDCHANNELS"] {
            let channels = node.cli(&["PUBSUB", command]).unwrap();
            assert!(
                channels.trim().is_empty(),
                "node {}: still subscribed to {channels} ({command})",
                node.port()
            );
        }
        let patterns = node.cli(&["PUBSUB", "NUMPAT"]).unwrap();
        assert_eq!(
            patterns.trim(),
            "0",
            "node {}: a pattern is still subscribed",
            node.port()
        );
    }
    println!(
        "{} acquisitions cancelled and {} finished over {} names on {} node(s): {:?}; left: {left:?}",
        tally.cancelled,
        tally.finished.len(),
        names.len(),
        nodes.len(),
        tally.finished
    );
    assert!(left.is_empty(), "left behind: {left:?}");
    tally
}

/// How the aborted waits of [`cancellation_storm`] ended.
#[derive(Debug, Default)]
pub struct StormTally {
    /// Waits whose task ended cancelled by the abort (`JoinError::is_cancelled`).
    pub cancelled: usize,
    /// Waits whose task finished before the abort could cancel it, and how (each one is a
    /// failure: the lock was held all along).
    pub finished: Vec<String>,
}
