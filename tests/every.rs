//! Every primitive through one path: a holder takes it, a waiter waits (woken by pub/sub) and
//! takes it after the release, then releases. Used by the TLS, ACL and Sentinel tests.

use std::sync::Arc;
use std::time::Duration;

use keylatch::{AcquireOptions, Client, DistributedLock};

/// A lease long enough that only a wake-up message can end a wait early.
pub const LONG_LEASE: Duration = Duration::from_secs(20);

/// Each primitive on `name` (with a suffix per primitive) as the holder's and the waiter's
/// lock: reentrant, fair, write-then-read, write-then-write, semaphore and permit-expirable
/// semaphore of one permit.
pub async fn primitive_pairs(
    holder: &Client,
    waiter: &Client,
    name: &str,
) -> keylatch::Result<
    Vec<(
        &'static str,
        Arc<dyn DistributedLock>,
        Arc<dyn DistributedLock>,
    )>,
> {
    let n = |suffix: &str| format!("{name}-{suffix}");
    let semaphore = n("semaphore");
    holder.semaphore(&semaphore).try_set_permits(1).await?;
    let expirable = n("expirable");
    holder
        .permit_expirable_semaphore(&expirable)
        .try_set_permits(1)
        .await?;
    Ok(vec![
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
        (
            "semaphore",
            Arc::new(holder.semaphore(&semaphore).as_lock()),
            Arc::new(waiter.semaphore(&semaphore).as_lock()),
        ),
        (
            "permit-expirable semaphore",
            Arc::new(holder.permit_expirable_semaphore(&expirable).as_lock()),
            Arc::new(waiter.permit_expirable_semaphore(&expirable).as_lock()),
        ),
    ])
}

/// For every primitive: `holder` acquires with a long lease, `waiter` waits, the holder
/// releases after 100 ms, the waiter acquires and releases. Asserts that each waiter got the
/// lock before the lease could have ended it, and that wake-up messages reached the waiter's
/// client. Returns how many primitives ran.
pub async fn exercise_every_primitive(holder: &Client, waiter: &Client, name: &str) -> usize {
    assert!(
        waiter.config().fallback_poll >= LONG_LEASE,
        "the waiter must not poll: only a message may wake it"
    );
    let pairs = primitive_pairs(holder, waiter, name)
        .await
        .expect("set up the semaphores");
    let messages_before = waiter.core().hub().messages();
    for (what, held, waited) in &pairs {
        let guard = held
            .acquire(AcquireOptions::new().with_lease(LONG_LEASE))
            .await
            .unwrap_or_else(|err| panic!("{what}: the holder's acquire failed: {err}"))
            .expect("an unbounded acquire returns a guard");
        let waited = waited.clone();
        let started = tokio::time::Instant::now();
        let waiting = tokio::spawn(async move {
            let guard = waited
                .acquire(AcquireOptions::new().with_wait(LONG_LEASE * 2))
                .await;
            (guard, started.elapsed())
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        guard
            .unlock()
            .await
            .unwrap_or_else(|err| panic!("{what}: the holder's unlock failed: {err}"));
        let (guard, after) = waiting.await.expect("the waiting task");
        let guard = guard
            .unwrap_or_else(|err| panic!("{what}: the waiter's acquire failed: {err}"))
            .unwrap_or_else(|| panic!("{what}: the waiter timed out"));
        println!("{what}: the waiter acquired {after:?} after it started waiting");
        assert!(
            after < LONG_LEASE / 2,
            "{what}: the waiter was not woken by the release ({after:?})"
        );
        guard
            .unlock()
            .await
            .unwrap_or_else(|err| panic!("{what}: the waiter's unlock failed: {err}"));
    }
    let messages = waiter.core().hub().messages() - messages_before;
    assert!(
        messages >= pairs.len() as u64,
        "{messages} wake-up messages for {} primitives",
        pairs.len()
    );
    pairs.len()
}
