//! Sentinel: every primitive through `redis+sentinel://` (passwords on the data nodes and on
//! the sentinels), and a forced `SENTINEL FAILOVER` while primitives are held and while
//! waiters wait: the holds are still held on the new primary (or reported lost), every wait
//! ends in the lock, the client follows the new primary, and every primitive works there.
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch::{AcquireOptions, Client, Config, DistributedLock, LockGuard};
use keylatch_testkit::SentinelSet;
use keylatch_tests::every::{exercise_every_primitive, primitive_pairs};

const DATA_PASSWORD: &str = "data-pw-Sentinel";
const SENTINEL_PASSWORD: &str = "sentinel-pw-Sentinel";
/// The watchdog's lease: renewals every second.
const WATCHDOG: Duration = Duration::from_secs(3);
/// A wait's bound: far beyond a failover, so that only a hang could reach it.
const WAIT: Duration = Duration::from_secs(30);

async fn connect(set: &SentinelSet) -> Client {
    let config = Config::builder()
        .url(set.url())
        .password(DATA_PASSWORD)
        .sentinel_credentials(None, SENTINEL_PASSWORD)
        .watchdog_timeout(WATCHDOG)
        .fallback_poll(Duration::from_secs(60))
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .build()
        .expect("config");
    Client::connect_with(config)
        .await
        .expect("connect through the sentinels")
}

type Pairs = Vec<(
    &'static str,
    Arc<dyn DistributedLock>,
    Arc<dyn DistributedLock>,
)>;

/// The holder takes every primitive of `pairs` in watchdog mode.
async fn hold_all(pairs: &Pairs) -> Vec<(&'static str, LockGuard)> {
    let mut guards = Vec::new();
    for (what, held, _) in pairs {
        let guard = held.lock().await.unwrap_or_else(|e| panic!("{what}: {e}"));
        guards.push((*what, guard));
    }
    guards
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_primitive_through_the_sentinels_and_across_a_failover() {
    let set = tokio::task::spawn_blocking(|| {
        SentinelSet::builder()
            .password(DATA_PASSWORD)
            .sentinel_password(SENTINEL_PASSWORD)
            .start()
    })
    .await
    .unwrap()
    .expect("start a sentinel set");
    let first_primary = set.primary_port().unwrap();
    let holder = connect(&set).await;
    let waiter = connect(&set).await;
    let show = format!("{:?} {}", holder.config(), holder.config().url);
    assert!(
        !show.contains(DATA_PASSWORD) && !show.contains(SENTINEL_PASSWORD),
        "{show}"
    );

    assert_eq!(
        exercise_every_primitive(&holder, &waiter, "app:sentinel").await,
        6
    );

    // Held across the failover: every primitive, in watchdog mode.
    let held_pairs = primitive_pairs(&holder, &waiter, "app:held").await.unwrap();
    let held = hold_all(&held_pairs).await;
    // Waiting across the failover: the waiter waits for every primitive the holder holds.
    let waited_pairs = primitive_pairs(&holder, &waiter, "app:waited")
        .await
        .unwrap();
    let blocking = hold_all(&waited_pairs).await;
    let mut waits = Vec::new();
    for (what, _, waited) in &waited_pairs {
        let waited = waited.clone();
        let what = *what;
        waits.push(tokio::spawn(async move {
            let result = waited.acquire(AcquireOptions::new().with_wait(WAIT)).await;
            (what, result, Instant::now())
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let moves_before = (holder.stats().primary_moves, waiter.stats().primary_moves);

    // SENTINEL FAILOVER while all of that is going on.
    let took = tokio::task::spawn_blocking(move || {
        let took = set.failover().expect("failover");
        (set, took)
    });
    let (set, took) = took.await.unwrap();
    let new_primary = set.primary_port().unwrap();
    assert_ne!(new_primary, first_primary);
    println!(
        "the sentinels switched the primary from {first_primary} to {new_primary} in {took:?}"
    );

    // The client follows: the first acquisition that succeeds after the switch.
    let probe = holder.lock("app:probe");
    let switch = Instant::now();
    let mut attempts = 0;
    let guard = loop {
        attempts += 1;
        match probe.try_lock().await {
            Ok(Some(guard)) => break guard,
            Ok(None) => panic!("nobody holds app:probe"),
            Err(e) if attempts < 100 => {
                println!("probe attempt {attempts}: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("the client did not follow the new primary: {e}"),
        }
    };
    println!(
        "the client's next acquisition succeeded {:?} after the switch ({attempts} attempt(s))",
        switch.elapsed()
    );
    guard.unlock().await.unwrap();

    // Two renewal rounds later, a hold is either still held on the new primary or reported
    // lost; never believed held while the new primary has no trace of it.
    tokio::time::sleep(WATCHDOG * 2 / 3).await;
    let (mut kept, mut lost) = (0, 0);
    for ((what, guard), (_, lock, _)) in held.iter().zip(&held_pairs) {
        if guard.is_lost() {
            lost += 1;
            println!("{what}: reported lost after the failover");
            continue;
        }
        let locked = lock.is_locked().await.unwrap();
        assert!(
            locked,
            "{what}: the holder believes it holds, the new primary does not"
        );
        kept += 1;
    }
    println!("holds across the failover: {kept} kept, {lost} reported lost");
    assert_eq!(kept + lost, 6);
    // Nothing was written during the switch: every hold reached the replicas.
    assert_eq!(kept, 6, "quiet holds are replicated before the failover");
    for (what, guard) in held {
        guard
            .unlock()
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }

    // The waits: release what they wait for; each ends in the lock, well before its bound.
    let released = Instant::now();
    for (_, guard) in blocking {
        guard.unlock().await.unwrap();
    }
    let mut acquired = 0;
    for wait in waits {
        let (what, result, at) = tokio::time::timeout(WAIT + Duration::from_secs(10), wait)
            .await
            .expect("a wait never hangs")
            .unwrap();
        let guard = result
            .unwrap_or_else(|e| panic!("{what}: the wait ended in an error: {e}"))
            .unwrap_or_else(|| panic!("{what}: the wait timed out"));
        println!(
            "{what}: the wait across the failover acquired {:?} after the releases began",
            at.saturating_duration_since(released)
        );
        guard.unlock().await.unwrap();
        acquired += 1;
    }
    assert_eq!(acquired, 6);

    let moves_after = (holder.stats().primary_moves, waiter.stats().primary_moves);
    println!(
        "primary moves seen: holder {} → {}, waiter {} → {}; lookups {} and {}",
        moves_before.0,
        moves_after.0,
        moves_before.1,
        moves_after.1,
        holder.stats().primary_lookups,
        waiter.stats().primary_lookups
    );
    assert!(moves_after.0 > moves_before.0, "the holder saw the move");
    assert!(moves_after.1 > moves_before.1, "the waiter saw the move");

    // Every primitive works on the new primary, and its data is there.
    assert_eq!(
        exercise_every_primitive(&holder, &waiter, "app:after").await,
        6
    );
    let new = set.primary().unwrap();
    assert_eq!(new.port(), new_primary);
    let keys = new.cli(&["KEYS", "app:after-*"]).unwrap();
    assert!(keys.contains("app:after-semaphore"), "{keys}");
    holder.shutdown().await.unwrap();
    waiter.shutdown().await.unwrap();
}

/// TLS everywhere (sentinels, data nodes, replication), with passwords: every primitive before
/// and after a failover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_primitive_through_tls_sentinels_and_after_a_failover() {
    if keylatch_testkit::skip_without_tls() {
        return;
    }
    let files = Arc::new(keylatch_testkit::TlsFiles::generate().unwrap());
    let ca = files.ca_file();
    let set = tokio::task::spawn_blocking(move || {
        SentinelSet::builder()
            .tls(files)
            .password(DATA_PASSWORD)
            .sentinel_password(SENTINEL_PASSWORD)
            .start()
    })
    .await
    .unwrap()
    .expect("start a TLS sentinel set");
    assert!(set.url().starts_with("rediss+sentinel://"));
    let connect = || {
        let config = Config::builder()
            .url(set.url())
            .tls_ca_file(&ca)
            .password(DATA_PASSWORD)
            .sentinel_credentials(None, SENTINEL_PASSWORD)
            .fallback_poll(Duration::from_secs(60))
            .connect_timeout(Duration::from_secs(2))
            .build()
            .expect("config");
        Client::connect_with(config)
    };
    let holder = connect()
        .await
        .expect("connect over TLS through the sentinels");
    let waiter = connect()
        .await
        .expect("connect over TLS through the sentinels");
    assert_eq!(
        exercise_every_primitive(&holder, &waiter, "app:tls-sentinel").await,
        6
    );
    let (set, took) = tokio::task::spawn_blocking(move || {
        let took = set.failover().expect("failover");
        (set, took)
    })
    .await
    .unwrap();
    println!("TLS sentinels switched the primary in {took:?}");
    assert_eq!(
        exercise_every_primitive(&holder, &waiter, "app:tls-sentinel-after").await,
        6
    );
    assert!(holder.stats().primary_moves > 0 && waiter.stats().primary_moves > 0);
    let keys = set
        .primary()
        .unwrap()
        .cli(&["KEYS", "app:tls-sentinel-after-*"])
        .unwrap();
    assert!(keys.contains("app:tls-sentinel-after-semaphore"), "{keys}");
    holder.shutdown().await.unwrap();
    waiter.shutdown().await.unwrap();
}
