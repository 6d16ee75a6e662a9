//! Every key and channel a primitive touches hashes to one cluster slot (Redisson's `{name}`
//! scheme), so a lock's scripts can run on one cluster node. The primitives run on one server
//! with holders, waiters, fencing and request markers; every key and channel that appears is
//! checked with `CLUSTER KEYSLOT` on a cluster node against its lock name's slot.
use std::collections::BTreeMap;
use std::time::Duration;

use keylatch::AcquireOptions;
use keylatch_testkit::RedisCluster;
use keylatch_tests::{client, server};

const NAMES: [&str; 6] = [
    "app:reentrant",
    "app:fair",
    "app:rw",
    "app:semaphore",
    "app:expirable",
    "app:with{braces-in-config}",
];

/// The lock name a key or channel belongs to: the name itself, `{name}` inside it, or, for a
/// name that carries its own hash tag, the name inside it.
fn owner(key: &str) -> Option<&'static str> {
    NAMES
        .iter()
        .find(|n| {
            key == **n
                || key.contains(&format!("{{{n}}}"))
                || (n.contains('{') && key.contains(**n))
        })
        .copied()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_and_channel_of_a_lock_hashes_to_its_slot() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster");
    let server = server();
    let holder = client(&server).await;
    let waiter = client(&server).await;
    let tagged = keylatch::Client::connect_with(
        keylatch::Config::builder()
            .url(server.url())
            .hash_tagged_names(true)
            .build()
            .unwrap(),
    )
    .await
    .unwrap();

    // Holders (with fencing), and a waiter queued behind each.
    let reentrant = holder
        .lock(NAMES[0])
        .with_fencing(true)
        .lock()
        .await
        .unwrap();
    let fair = holder
        .fair_lock(NAMES[1])
        .with_fencing(true)
        .lock()
        .await
        .unwrap();
    let read = holder.rw_lock(NAMES[2]).read_lock().lock().await.unwrap();
    let semaphore = holder.semaphore(NAMES[3]);
    semaphore.try_set_permits(1).await.unwrap();
    let permit = semaphore.acquire().await.unwrap();
    let expirable = holder.permit_expirable_semaphore(NAMES[4]);
    expirable.try_set_permits(1).await.unwrap();
    let lease = expirable
        .acquire_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    let braces = tagged
        .lock(NAMES[5])
        .with_fencing(true)
        .lock()
        .await
        .unwrap();
    let wait = AcquireOptions::new().with_wait(Duration::from_secs(3));
    let waits = vec![
        tokio::spawn({
            let l = waiter.lock(NAMES[0]);
            async move { l.acquire(wait).await.map(drop) }
        }),
        tokio::spawn({
            let l = waiter.fair_lock(NAMES[1]);
            async move { l.acquire(wait).await.map(drop) }
        }),
        tokio::spawn({
            let l = waiter.rw_lock(NAMES[2]).write_lock();
            async move { l.acquire(wait).await.map(drop) }
        }),
        tokio::spawn({
            let l = waiter.semaphore(NAMES[3]);
            async move { l.acquire_with(wait).await.map(drop) }
        }),
        tokio::spawn({
            let l = waiter.permit_expirable_semaphore(NAMES[4]);
            async move { l.acquire_with(wait).await.map(drop) }
        }),
    ];
    tokio::time::sleep(Duration::from_millis(500)).await;
    let keys = server.cli(&["KEYS", "*"]).unwrap();
    let mut channels = server.cli(&["PUBSUB", "CHANNELS"]).unwrap();
    // A fair waiter is woken on a channel of its own, which keylatch receives through one
    // pattern per client and lock (not on a cluster): the channel a release publishes to is
    // named by the waiter's id in the queue.
    let patterns = server.cli(&["PUBSUB", "NUMPAT"]).unwrap();
    assert_eq!(patterns.trim(), "1", "the fair waiter's pattern");
    let queue = format!("redisson_lock_queue:{{{}}}", NAMES[1]);
    for waiter in server.cli(&["LRANGE", &queue, "0", "-1"]).unwrap().lines() {
        channels.push_str(&format!(
            "\nredisson_lock__channel:{{{}}}:{waiter}",
            NAMES[1]
        ));
    }
    drop((reentrant, fair, read, permit, lease, braces));
    for wait in waits {
        let _ = wait.await.unwrap();
    }

    let mut by_name: BTreeMap<&str, Vec<(String, u16)>> = BTreeMap::new();
    let names = keys
        .lines()
        .chain(channels.lines())
        .filter(|k| !k.is_empty());
    for key in names {
        let name = owner(key).unwrap_or_else(|| panic!("{key} belongs to no lock"));
        let slot = cluster.keyslot(key).unwrap();
        by_name
            .entry(name)
            .or_default()
            .push((key.to_owned(), slot));
    }
    for name in NAMES {
        let expected = cluster.keyslot(name).unwrap();
        let entries = by_name.get(name).cloned().unwrap_or_default();
        println!(
            "{name} (slot {expected}): {} keys and channels",
            entries.len()
        );
        assert!(entries.len() >= 2, "{name}: {entries:?}");
        for (key, slot) in &entries {
            assert_eq!(*slot, expected, "{key} of {name} is in another slot");
        }
    }
    assert!(
        channels.lines().count() >= 5,
        "the waiters' channels: {channels:?}"
    );
}
