//! No input panics: arbitrary durations (up to `Duration::MAX`), counts and names, driven
//! through the public API against a real server. Every call returns a value or a typed error,
//! and a refused call leaves the keyspace as it was.
use std::time::Duration;

use keylatch::{AcquireOptions, Config, Error};
use keylatch_tests::{keyspace, raw, server};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        Just(Duration::from_nanos(1)),
        (0u64..3_000).prop_map(Duration::from_millis),
        any::<u64>().prop_map(Duration::from_millis),
        any::<u64>().prop_map(Duration::from_secs),
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z]{1,12}",
        "\\PC{0,20}",
        "[{}a-z]{1,8}",
        (1020usize..1030).prop_map(|n| "n".repeat(n)),
    ]
}

/// The errors a call may return, each of which says nothing was changed: bad input
/// (`InvalidName`, `InvalidLease`, `InvalidPermits`, `InvalidConfig`) and the few refusals of
/// a call on a permit that is no longer held. A Lua error, an unexpected reply, a timeout or
/// any other error fails the test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Allowed {
    Name,
    Lease,
    Permits,
    Setting,
    UnknownPermit,
    UnknownPermits,
}

impl Allowed {
    fn matches(self, err: &Error) -> bool {
        match self {
            Allowed::Name => matches!(err, Error::InvalidName { .. }),
            Allowed::Lease => matches!(err, Error::InvalidLease { .. }),
            Allowed::Permits => matches!(err, Error::InvalidPermits { .. }),
            Allowed::Setting => matches!(err, Error::InvalidConfig { .. }),
            Allowed::UnknownPermit => matches!(err, Error::UnknownPermit { .. }),
            Allowed::UnknownPermits => matches!(err, Error::UnknownPermits { .. }),
        }
    }
}

/// Whether a call may wait for something the case does not provide (permits), and so may
/// still be running when the bound ends.
#[derive(Clone, Copy, Debug)]
enum Waits {
    /// The call answers at once (the keyspace is empty: every lock is free).
    Never,
    /// The call may wait up to this long.
    UpTo(Duration),
}

/// The bound of a call that may wait: a call still waiting then is dropped (cancel safe).
const WAITING: Duration = Duration::from_millis(150);
/// The bound of a call that must answer by itself: a correctness bound, with slack for a
/// loaded machine.
const ANSWERS: Duration = Duration::from_secs(10);

/// Runs one call and checks its outcome: a value, or an error of `allowed` after which the
/// keyspace is as it was. A call that `waits` longer than [`WAITING`] is dropped then; any
/// other call must answer within [`ANSWERS`].
async fn check<T, F>(
    conn: &mut keylatch::redis::aio::MultiplexedConnection,
    what: &str,
    allowed: &[Allowed],
    waits: Waits,
    call: F,
) -> Option<T>
where
    F: Future<Output = keylatch::Result<T>>,
{
    let before = keyspace(conn).await;
    let bound = match waits {
        Waits::UpTo(wait) if wait >= WAITING => WAITING,
        _ => ANSWERS,
    };
    match tokio::time::timeout(bound, call).await {
        Ok(Ok(value)) => Some(value),
        Ok(Err(err)) => {
            assert!(
                allowed.iter().any(|a| a.matches(&err)),
                "{what}: {err} ({err:?}) is not one of {allowed:?}"
            );
            assert_eq!(
                without_expired(&before, keyspace(conn).await),
                before,
                "{what}: refused ({err}) but wrote"
            );
            None
        }
        Err(_) if bound == WAITING => None,
        Err(_) => panic!("{what}: no answer within {bound:?} ({waits:?})"),
    }
}

/// A release of what a call gave: done, or refused because the hold or permit already
/// ended (a lease of a millisecond); nothing else.
/// `after`, with the keys that had an expiry in `before` and are gone now put back as they
/// were: they expired meanwhile (earlier calls' request markers), nobody wrote them.
fn without_expired(
    before: &[(String, Vec<u8>, i64)],
    after: Vec<(String, Vec<u8>, i64)>,
) -> Vec<(String, Vec<u8>, i64)> {
    let gone = |key: &str| {
        after
            .iter()
            .find(|(k, ..)| k == key)
            .is_none_or(|(_, dump, ttl)| dump.is_empty() && *ttl < 0)
    };
    let mut out: Vec<_> = after
        .iter()
        .filter(|(key, dump, _)| {
            !(dump.is_empty() && before.iter().any(|(k, _, ttl)| k == key && *ttl > 0))
        })
        .cloned()
        .collect();
    for entry in before {
        if entry.2 > 0 && gone(&entry.0) {
            out.push(entry.clone());
        }
    }
    out.sort();
    out
}

fn released(what: &str, result: keylatch::Result<()>) {
    if let Err(err) = result {
        assert!(
            matches!(err, Error::NotHeld { .. } | Error::UnknownPermit { .. }),
            "{what}: releasing failed: {err} ({err:?})"
        );
    }
}

#[tokio::test]
async fn the_longest_waits_and_leases_do_not_overflow() {
    let server = server();
    let client = keylatch_tests::client(&server).await;
    let name = keylatch_tests::unique("max");
    let lock = client.lock(&name);
    let guard = lock
        .try_lock_for(Duration::MAX, None)
        .await
        .unwrap()
        .expect("a free lock is taken at once");
    // Waiting `Duration::MAX` for a held lock waits (as forever), without panicking.
    let waited = tokio::time::timeout(
        Duration::from_millis(200),
        lock.try_lock_for(Duration::MAX, None),
    )
    .await;
    assert!(waited.is_err(), "still waiting");
    guard.unlock().await.unwrap();
    assert!(matches!(
        lock.try_lock_for(Duration::MAX, Some(Duration::MAX)).await,
        Err(Error::InvalidLease { .. })
    ));
    let semaphore = client.semaphore(&name);
    semaphore.try_set_permits(1).await.unwrap();
    let permit = semaphore
        .try_acquire_for(Duration::MAX, None)
        .await
        .unwrap();
    assert!(permit.is_some());
    for built in [
        Config::builder().fallback_poll(Duration::MAX).build(),
        Config::builder().watchdog_timeout(Duration::MAX).build(),
        Config::builder().response_timeout(Duration::MAX).build(),
        Config::builder().shutdown_timeout(Duration::MAX).build(),
    ] {
        assert!(matches!(built, Err(Error::InvalidConfig { .. })));
    }
}

#[test]
fn arbitrary_input_never_panics_and_refusals_write_nothing() {
    let server = server();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime.block_on(keylatch_tests::client(&server));
    let conn = runtime.block_on(raw(&server));
    let cases = if keylatch_tests::full() { 256 } else { 40 };
    let mut runner = TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let strategy = (
        name(),
        duration(),
        duration(),
        any::<u32>(),
        any::<i64>(),
        prop_oneof![Just(0u32), 1u32..4, Just(u32::MAX)],
    );
    runner
        .run(&strategy, |(name, wait, lease, count, delta, small)| {
            let mut conn = conn.clone();
            runtime.block_on(async {
                let conn = &mut conn;
                // Each case starts from an empty keyspace: nothing of an earlier case can expire
                // (and change the keyspace) while this one compares it.
                let _: () = keylatch::redis::cmd("FLUSHALL")
                    .query_async(conn)
                    .await
                    .unwrap();
                let lease = Some(lease).filter(|l| !l.is_zero() || wait.is_zero());
                let options = AcquireOptions::within(wait, lease);
                use Allowed::{Lease, Name, Permits, Setting, UnknownPermit, UnknownPermits};
                let lock = client.lock(&name);
                if let Some(Some(guard)) = check(
                    conn,
                    "lock",
                    &[Name, Lease],
                    Waits::Never,
                    lock.acquire(options),
                )
                .await
                {
                    released("lock", guard.unlock().await);
                }
                let fair = client.fair_lock(&name).with_waiter_timeout(wait);
                if let Some(Some(guard)) = check(
                    conn,
                    "fair",
                    // The waiter timeout is the case's wait: out of range, a configuration error.
                    &[Name, Lease, Setting],
                    Waits::Never,
                    fair.try_lock_for(wait, lease),
                )
                .await
                {
                    released("fair", guard.unlock().await);
                }
                let rw = client
                    .rw_lock(&name)
                    .with_writer_intent_timeout(lease.unwrap_or(wait));
                if let Some(Some(guard)) = check(
                    conn,
                    "write",
                    // The writer intent timeout is the case's lease (or wait): out of range, a
                    // configuration error.
                    &[Name, Lease, Setting],
                    Waits::Never,
                    rw.write_lock().acquire(options),
                )
                .await
                {
                    released("write", guard.unlock().await);
                }
                let semaphore = client.semaphore(&name);
                check(
                    conn,
                    "try_set",
                    &[Name, Permits],
                    Waits::Never,
                    semaphore.try_set_permits(count),
                )
                .await;
                // A valid time to live is kept long, so the count does not expire mid-case.
                let ttl = if wait < Duration::from_millis(1) || wait > keylatch::MAX_LEASE {
                    wait
                } else {
                    wait.max(Duration::from_secs(600))
                };
                check(
                    conn,
                    "try_set_ttl",
                    &[Name, Permits, Lease],
                    Waits::Never,
                    semaphore.try_set_permits_with_ttl(small, ttl),
                )
                .await;
                check(
                    conn,
                    "add",
                    &[Name, Permits],
                    Waits::Never,
                    semaphore.add_permits(delta),
                )
                .await;
                check(
                    conn,
                    "release",
                    &[Name, Permits],
                    Waits::Never,
                    semaphore.release(count),
                )
                .await;
                if let Some(Some(permit)) = check(
                    conn,
                    "acquire_many",
                    &[Name, Permits, Lease],
                    Waits::UpTo(wait),
                    semaphore.acquire_many(small, options),
                )
                .await
                {
                    released("acquire_many", permit.release().await);
                }
                let expirable = client.permit_expirable_semaphore(&name);
                check(
                    conn,
                    "exp try_set",
                    &[Name, Permits],
                    Waits::Never,
                    expirable.try_set_permits(count),
                )
                .await;
                if let Some(Some(permits)) = check(
                    conn,
                    "exp acquire_many",
                    &[Name, Permits, Lease],
                    Waits::UpTo(wait),
                    expirable.acquire_many(small, options),
                )
                .await
                {
                    for permit in permits {
                        check(
                            conn,
                            "exp remaining",
                            &[Name],
                            Waits::Never,
                            expirable.remaining_lease(permit.id()),
                        )
                        .await;
                        // The permit's lease may have ended (a lease of a millisecond).
                        check(
                            conn,
                            "exp update",
                            &[Name, Lease, UnknownPermit],
                            Waits::Never,
                            expirable.update_lease(permit.id(), wait),
                        )
                        .await;
                        released("exp permit", permit.release().await);
                    }
                }
                check(
                    conn,
                    "exp release_many",
                    &[Name, UnknownPermits],
                    Waits::Never,
                    expirable.release_many(&[name.as_str()]),
                )
                .await;
                check(
                    conn,
                    "exp try_release_many",
                    &[Name],
                    Waits::Never,
                    expirable.try_release_many(&[name.as_str()]),
                )
                .await;
                let config = Config::builder()
                    .url(server.url())
                    .watchdog_timeout(lease.unwrap_or(wait))
                    .fallback_poll(wait)
                    .response_timeout(lease.unwrap_or(Duration::MAX))
                    .build();
                if let Ok(config) = config {
                    assert!(config.validate().is_ok());
                }
                client.wait_idle().await;
            });
            Ok(())
        })
        .unwrap();
    println!("{cases} cases of arbitrary durations, counts and names: no panic");
}
