//! Redis Cluster under change: a lock's slot migrates while it is held and waited for (holders
//! keep it, waiters are woken on the slot's new node), a primary fails over or is killed while
//! locks are held and waited for (every call ends; waits end in the lock or at their
//! deadline), and a storm of cancelled acquisitions leaves nothing on any node.
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch::{AcquireOptions, Client, Config, DistributedLock};
use keylatch_testkit::{RedisCluster, RedisServer};
use keylatch_tests::every::{LONG_LEASE, cancellation_storm, primitive_pairs};

async fn cluster() -> RedisCluster {
    tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster")
}

/// A client on the cluster whose waits are woken only by messages (the fallback poll is the
/// long lease), renewing every 300 ms, that accepts hash-tagged names.
async fn connect(cluster: &RedisCluster) -> Client {
    Client::connect_with(
        Config::builder()
            .url(cluster.seed_url())
            .fallback_poll(LONG_LEASE)
            .watchdog_timeout(Duration::from_millis(900))
            .response_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(2))
            .hash_tagged_names(true)
            .build()
            .unwrap(),
    )
    .await
    .expect("connect to the cluster")
}

type Pairs = Vec<(
    &'static str,
    Arc<dyn DistributedLock>,
    Arc<dyn DistributedLock>,
)>;

/// A holder's guard and its waiter's task.
type Held = (
    &'static str,
    keylatch::LockGuard,
    tokio::task::JoinHandle<keylatch::Result<Option<keylatch::LockGuard>>>,
);

/// Every pair's holder acquires (watchdog-renewed) and its waiter starts waiting.
async fn hold_and_wait(pairs: &Pairs) -> Vec<Held> {
    let mut held = Vec::new();
    for (what, holder, waiter) in pairs {
        let guard = holder
            .acquire(AcquireOptions::new())
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"))
            .expect("acquired");
        let waiter = waiter.clone();
        let waiting = tokio::spawn(async move {
            waiter
                .acquire(AcquireOptions::new().with_wait(LONG_LEASE))
                .await
        });
        held.push((*what, guard, waiting));
    }
    // The waiters are queued and subscribed.
    tokio::time::sleep(Duration::from_millis(300)).await;
    held
}

/// Releases every hold and checks that its waiter takes over before the fallback poll could
/// have woken it: a message reached it. Returns the slowest hand-off.
async fn release_and_hand_over(held: Vec<Held>) -> Duration {
    let mut slowest = Duration::ZERO;
    for (what, guard, waiting) in held {
        assert!(!guard.is_lost(), "{what}: the holder lost its hold");
        let released = Instant::now();
        guard
            .unlock()
            .await
            .unwrap_or_else(|e| panic!("{what}: unlock: {e}"));
        let taken = waiting
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("{what}: the waiter failed: {e}"))
            .unwrap_or_else(|| panic!("{what}: the waiter timed out"));
        let after = released.elapsed();
        println!("{what}: the waiter took over {after:?} after the release");
        assert!(
            after < LONG_LEASE / 2,
            "{what}: the waiter was not woken by a message ({after:?})"
        );
        slowest = slowest.max(after);
        taken.unlock().await.unwrap();
    }
    slowest
}

fn other_primary<'a>(cluster: &'a RedisCluster, not: &RedisServer) -> &'a RedisServer {
    cluster
        .primaries()
        .into_iter()
        .find(|p| p.port() != not.port())
        .expect("another primary")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_and_waits_survive_a_slot_migration() {
    let cluster = cluster().await;
    let holder = connect(&cluster).await;
    let waiter = connect(&cluster).await;
    // Every primitive's keys in one slot, by a hash tag.
    let pairs = primitive_pairs(&holder, &waiter, "{app:migrating}")
        .await
        .unwrap();
    let slot = cluster.keyslot("app:migrating").unwrap();
    let held = hold_and_wait(&pairs).await;
    let before = holder.stats();

    let from_port = cluster.node_for_key("app:migrating").unwrap().port();
    let (cluster, moved, took) = tokio::task::spawn_blocking(move || {
        let from = cluster.node_for_key("app:migrating").unwrap();
        let to = other_primary(&cluster, from);
        let started = Instant::now();
        let moved = cluster
            .migrate_slot(slot, from, to)
            .expect("migrate the slot");
        (cluster, moved, started.elapsed())
    })
    .await
    .unwrap();
    let to_port = cluster.node_for_key("app:migrating").unwrap().port();
    assert_ne!(from_port, to_port);
    println!("slot {slot} with {moved} keys moved from {from_port} to {to_port} in {took:?}");
    assert!(moved >= 6, "the holds moved with the slot: {moved} keys");

    // The watchdog renews on the new owner (three ticks).
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let after = holder.stats();
    println!(
        "holder: {} redirections followed, {} holds renewed since the migration began",
        after.cluster_redirections - before.cluster_redirections,
        after.watchdog.renewed_keys - before.watchdog.renewed_keys
    );
    assert!(after.cluster_redirections > before.cluster_redirections);
    assert!(after.watchdog.renewed_keys > before.watchdog.renewed_keys);

    let resubscribed = waiter.stats().hub_reconnects;
    let slowest = release_and_hand_over(held).await;
    println!(
        "after the migration: every waiter woken on the new node, slowest {slowest:?}; \
         the waiter's hub resubscribed {resubscribed} time(s)"
    );
    holder.shutdown().await.unwrap();
    waiter.shutdown().await.unwrap();
    // Nothing held is left on the new owner (the semaphores keep their permits).
    let node = cluster.node_for_key("app:migrating").unwrap();
    let keys = node
        .cli(&["CLUSTER", "GETKEYSINSLOT", &slot.to_string(), "100"])
        .unwrap();
    let left: Vec<&str> = keys
        .lines()
        .filter(|k| !k.contains(":req:") && !k.ends_with("semaphore") && !k.ends_with("expirable"))
        .filter(|k| !k.contains("permits") && !k.contains("fencing"))
        .collect();
    println!("keys in the slot after: {keys:?}");
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_and_waits_across_a_failover_and_a_killed_primary() {
    let mut cluster = cluster().await;
    let holder = connect(&cluster).await;
    let waiter = connect(&cluster).await;

    // A forced failover (CLUSTER FAILOVER: the replica is in sync, nothing is lost).
    let pairs = primitive_pairs(&holder, &waiter, "{app:failover}")
        .await
        .unwrap();
    let held = hold_and_wait(&pairs).await;
    let (back, took) = tokio::task::spawn_blocking(move || {
        let primary = cluster.node_for_key("app:failover").unwrap();
        let replica = cluster.replicas_of(primary).unwrap()[0];
        let took = cluster.failover(replica).expect("fail over");
        (cluster, took)
    })
    .await
    .unwrap();
    cluster = back;
    println!("forced failover of the lock's primary in {took:?}");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let slowest = release_and_hand_over(held).await;
    println!("after the forced failover: every hold kept, slowest hand-off {slowest:?}");

    // A killed primary: the cluster promotes its replica after the node timeout. Every call
    // ends; each wait ends in the lock or at its deadline. The holder's lease (5 s) outlasts
    // the failover, so its holds survive on the promoted replica.
    let holder = Client::connect_with(
        Config::builder()
            .url(cluster.seed_url())
            .fallback_poll(LONG_LEASE)
            .watchdog_timeout(Duration::from_secs(5))
            .response_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(2))
            .hash_tagged_names(true)
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    let pairs = primitive_pairs(&holder, &waiter, "{app:killed}")
        .await
        .unwrap();
    let held = hold_and_wait(&pairs).await;
    let port = cluster.node_for_key("app:killed").unwrap().port();
    let killed = Instant::now();
    cluster.node_mut(port).unwrap().kill();
    let cluster = tokio::task::spawn_blocking(move || {
        cluster
            .wait_ok(Duration::from_secs(30))
            .expect("a replica takes over");
        cluster
    })
    .await
    .unwrap();
    println!(
        "primary {port} killed: a replica took over after {:?}",
        killed.elapsed()
    );
    let mut kept = 0;
    for (what, guard, waiting) in held {
        let released = Instant::now();
        let unlocked = tokio::time::timeout(Duration::from_secs(15), guard.unlock()).await;
        let unlocked = unlocked.unwrap_or_else(|_| panic!("{what}: unlock did not end"));
        let waited = tokio::time::timeout(LONG_LEASE + Duration::from_secs(10), waiting)
            .await
            .unwrap_or_else(|_| panic!("{what}: the wait did not end"))
            .unwrap();
        println!(
            "{what}: unlock {:?}, the wait ended {:?} after the release: {}",
            unlocked.as_ref().map(|_| "ok"),
            released.elapsed(),
            match &waited {
                Ok(Some(_)) => "acquired".to_owned(),
                Ok(None) => "at its deadline".to_owned(),
                Err(e) => format!("error {e}"),
            }
        );
        assert!(
            unlocked.is_ok(),
            "{what}: the hold was lost in the failover"
        );
        kept += 1;
        let guard = waited
            .unwrap_or_else(|e| panic!("{what}: the wait failed: {e}"))
            .unwrap_or_else(|| panic!("{what}: the waiter timed out"));
        assert!(
            released.elapsed() < LONG_LEASE / 2,
            "{what}: the waiter was not woken by a message"
        );
        guard.unlock().await.unwrap();
    }
    println!("{kept}/6 holds released on the promoted replica, each waiter woken");
    let _ = tokio::time::timeout(Duration::from_secs(10), holder.shutdown()).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), waiter.shutdown()).await;
    drop(cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancellation_storm_leaves_nothing_on_any_node() {
    let cluster = cluster().await;
    let holder = connect(&cluster).await;
    let storm = connect(&cluster).await;
    // Names on every primary, every primitive on each.
    let mut names = Vec::new();
    let mut ports = std::collections::BTreeSet::new();
    for i in 0..100 {
        let name = format!("app:storm{i}");
        if ports.insert(cluster.node_for_key(&name).unwrap().port()) {
            names.push(name);
        }
    }
    assert_eq!(names.len(), 3);
    let primaries = cluster.primaries();
    let tally = cancellation_storm(&holder, &storm, &names, &primaries).await;
    // Every wait was still waiting (the lock was held) when it was aborted.
    assert_eq!(
        tally.finished,
        Vec::<String>::new(),
        "waits that were not cancelled"
    );
    assert_eq!(tally.cancelled, 3 * 6 * 10);
    holder.shutdown().await.unwrap();
    storm.shutdown().await.unwrap();
}
