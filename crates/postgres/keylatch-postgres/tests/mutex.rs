//! The reentrant lock on a real PostgreSQL server: exclusion, re-entry, fencing, the key a
//! `psql` user computes, leases refused.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use keylatch_core::{AcquireOptions, DistributedLock, Error, Owner};
use keylatch_postgres::AdvisoryKey;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn excludes_between_clients_and_tokens_increase() {
    let server = support::server();
    let (a, b) = (
        support::client(&server).await,
        support::client(&server).await,
    );
    let busy = Arc::new(AtomicBool::new(false));
    let counter = Arc::new(std::sync::Mutex::new(0u64));
    let mut tasks = Vec::new();
    for (i, client) in [a.clone(), b.clone(), a.clone(), b.clone()]
        .into_iter()
        .enumerate()
    {
        let (busy, counter) = (busy.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            let lock = client.lock("exclusion").unwrap();
            let mut tokens = Vec::new();
            for _ in 0..10 {
                let guard = lock.lock().await.unwrap();
                assert!(!busy.swap(true, Ordering::SeqCst), "overlap in task {i}");
                // Read, yield, write: an overlap would lose an increment.
                let seen = *counter.lock().unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
                *counter.lock().unwrap() = seen + 1;
                busy.store(false, Ordering::SeqCst);
                tokens.push(guard.fencing_token().unwrap());
                guard.unlock().await.unwrap();
            }
            tokens
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        let tokens = task.await.unwrap();
        assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
        all.extend(tokens);
    }
    assert_eq!(*counter.lock().unwrap(), 40);
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 40, "every acquisition has its own token");
    assert_eq!(
        server
            .psql("SELECT token FROM keylatch_fencing WHERE name = 'exclusion'")
            .unwrap(),
        "40"
    );
}

#[tokio::test]
async fn reentry_is_counted_by_the_client() {
    let server = support::server();
    let client = support::client(&server).await;
    let other = support::client(&server).await;
    let owner = Owner::unique();
    let lock = client.lock("reentry").unwrap().with_owner(owner);
    let first = lock.lock().await.unwrap();
    let second = lock.try_lock().await.unwrap().expect("re-entered");
    assert_eq!(first.fencing_token(), second.fencing_token());
    // One advisory lock on the server for both guards.
    assert_eq!(support::advisory_rows(&server, "reentry"), vec![true]);
    first.unlock().await.unwrap();
    assert!(
        other
            .lock("reentry")
            .unwrap()
            .try_lock()
            .await
            .unwrap()
            .is_none()
    );
    second.unlock().await.unwrap();
    let third = other.lock("reentry").unwrap().try_lock().await.unwrap();
    assert!(third.is_some(), "free after the last release");
    drop(third);
    other.wait_idle().await;
    // A non-reentrant handle refuses instead.
    let refuse = client.lock("refuse").unwrap().with_owner(owner);
    let _g = refuse.lock().await.unwrap();
    assert!(matches!(
        refuse.non_reentrant().try_lock().await,
        Err(Error::AlreadyHeld { .. })
    ));
}

#[tokio::test]
async fn a_wait_bound_ends_in_none_and_leaves_no_waiter() {
    let server = support::server();
    let client = support::client(&server).await;
    let lock = client.lock("bounded").unwrap();
    let _held = lock.lock().await.unwrap();
    let started = tokio::time::Instant::now();
    let waited = lock
        .try_lock_for(Duration::from_millis(300), None)
        .await
        .unwrap();
    assert!(waited.is_none());
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(support::advisory_rows(&server, "bounded"), vec![true]);
}

#[tokio::test]
async fn a_fixed_lease_is_unsupported_and_sends_nothing() {
    let server = support::server();
    let client = support::client(&server).await;
    let lock = client.lock("leased").unwrap();
    let err = lock
        .acquire(AcquireOptions::new().with_lease(Duration::from_secs(5)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    assert!(support::advisory_rows(&server, "leased").is_empty());
    assert_eq!(
        server
            .psql("SELECT to_regclass('keylatch_fencing') IS NULL")
            .unwrap(),
        "t",
        "nothing written"
    );
}

/// A lock keylatch holds is refused to `psql`'s `pg_try_advisory_lock` with the documented
/// key, and the reverse.
#[tokio::test]
async fn interoperates_with_psql_advisory_locks() {
    let server = support::server();
    let client = support::client(&server).await;
    let lock = client.lock("shared-job").unwrap();
    let guard = lock.lock().await.unwrap();
    assert_eq!(
        server
            .psql("SELECT pg_try_advisory_lock(hashtextextended('shared-job', 0))")
            .unwrap(),
        "f",
        "psql must not get a lock keylatch holds"
    );
    guard.unlock().await.unwrap();
    assert_eq!(
        server
            .psql("SELECT pg_try_advisory_lock(hashtextextended('shared-job', 0))")
            .unwrap(),
        "t"
    );

    // The reverse: a psql session holds it (kept open on its stdin), keylatch waits.
    let mut psql = server
        .psql_command()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = psql.stdin.take().unwrap();
    use std::io::Write;
    writeln!(
        stdin,
        "SELECT pg_advisory_lock(hashtextextended('shared-job', 0));"
    )
    .unwrap();
    writeln!(stdin, "SELECT pg_advisory_lock(7, 9);").unwrap();
    stdin.flush().unwrap();
    support::eventually("psql holds the lock", || {
        support::advisory_rows(&server, "shared-job") == vec![true]
    })
    .await;
    assert!(
        lock.try_lock().await.unwrap().is_none(),
        "keylatch must not get psql's lock"
    );
    assert!(lock.is_locked().await.unwrap());
    let pair = client
        .lock_with_key("pair", AdvisoryKey::Pair(7, 9))
        .unwrap();
    support::eventually("psql holds (7, 9)", || {
        server
            .psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND classid = 7 AND objid = 9")
            .is_ok_and(|n| n == "1")
    })
    .await;
    assert!(pair.try_lock().await.unwrap().is_none());
    drop(stdin); // psql exits: its session ends, and its locks with it
    let _ = psql.wait();
    let guard = lock
        .try_lock_for(Duration::from_secs(10), None)
        .await
        .unwrap()
        .expect("free once psql is gone");
    assert!(pair.try_lock().await.unwrap().is_some());
    guard.unlock().await.unwrap();
}
