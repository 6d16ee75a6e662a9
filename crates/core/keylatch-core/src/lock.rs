//! The shared lock trait, acquire options, and the parts of the wait loop every store shares
//! (the attempt's outcome, retries of transient failures, jitter).

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::error::Result;
use crate::hold::LockGuard;

/// How long to wait and how long to hold.
///
/// ```
/// use std::time::Duration;
/// use keylatch::AcquireOptions;
///
/// // Wait up to 2 s; hold for 10 s at most, with no watchdog.
/// let options = AcquireOptions::new()
///     .with_wait(Duration::from_secs(2))
///     .with_lease(Duration::from_secs(10));
/// assert_eq!(options.wait(), Some(Duration::from_secs(2)));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[must_use]
pub struct AcquireOptions {
    wait: Option<Duration>,
    lease: Option<Duration>,
}

impl AcquireOptions {
    /// Wait forever; watchdog mode.
    pub fn new() -> Self {
        Self::default()
    }

    /// Wait at most `wait` (zero: try once). On Redis (every primitive but RedLock) the call
    /// returns by `wait` plus twice the response timeout whatever the servers do:
    /// a try still running then ends in a timeout error, and what it may have taken is undone
    /// in the background.
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// A fixed lease: the hold ends after `lease` unless released before; no watchdog.
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Wait at most `wait`, with a fixed `lease` or, for `None`, in watchdog mode (the options
    /// of `try_lock_for`).
    pub fn within(wait: Duration, lease: Option<Duration>) -> Self {
        AcquireOptions {
            wait: Some(wait),
            lease,
        }
    }

    /// The wait bound; `None` waits forever.
    pub fn wait(&self) -> Option<Duration> {
        self.wait
    }

    /// The instant the wait ends, from now; `None` waits forever (so does a wait too long for
    /// the clock, such as `Duration::MAX`).
    pub fn deadline(&self) -> Option<Instant> {
        self.wait.and_then(deadline_after)
    }

    /// The fixed lease; `None` means watchdog mode.
    pub fn lease(&self) -> Option<Duration> {
        self.lease
    }
}

/// The lock interface every keylatch lock implements: the reentrant lock, the fair lock, the
/// read and write sides of the read-write lock, and a semaphore through one permit.
///
/// It is object safe, so the primitive can be chosen at run time:
///
/// ```no_run
/// # async fn demo(lock: std::sync::Arc<dyn keylatch::DistributedLock>) -> keylatch::Result<()> {
/// let guard = lock.lock().await?;
/// // ... critical section ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
///
/// Leases: with no lease (`lock`, `try_lock`, `try_lock_for(.., None)`) the hold is in
/// watchdog mode: its lease is the client's watchdog timeout and a background task renews it
/// until the guard is released. With a lease, the hold ends after it; nothing renews it.
#[async_trait]
pub trait DistributedLock: Send + Sync + fmt::Debug {
    /// The lock's name.
    fn name(&self) -> &str;

    /// Acquires with the given options; `Ok(None)` when the wait bound passed first.
    ///
    /// # Errors
    /// Bad input (an invalid lease), Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped acquire leaves no hold, queue entry, subscription or watchdog
    /// entry behind (a request already sent is undone in the background).
    async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>>;

    /// Where a release of this lock is announced to every waiter: the store's client that
    /// hears it (the Redis layer's `Client`, whose pub/sub hub subscribes) and the channel. A
    /// lock made of locks on several servers (a RedLock) waits on all of them. `None` (the
    /// default) when the primitive has no such channel (a fair lock wakes each waiter on its
    /// own).
    fn release_channel(&self) -> Option<(&(dyn std::any::Any + Send + Sync), &str)> {
        None
    }

    /// Whether anyone holds the lock.
    ///
    /// # Errors
    /// Redis errors.
    async fn is_locked(&self) -> Result<bool>;

    /// Releases the lock whoever holds it, and wakes a waiter. Returns whether it was held.
    ///
    /// # Errors
    /// Redis errors.
    async fn force_unlock(&self) -> Result<bool>;

    /// Waits as long as it takes; watchdog mode.
    ///
    /// # Errors
    /// Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`acquire`](DistributedLock::acquire).
    async fn lock(&self) -> Result<LockGuard> {
        unbounded(self.acquire(AcquireOptions::new()).await)
    }

    /// Waits as long as it takes; the hold ends after `lease`.
    ///
    /// # Errors
    /// [`InvalidLease`](crate::Error::InvalidLease), Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`acquire`](DistributedLock::acquire).
    async fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        unbounded(self.acquire(AcquireOptions::new().with_lease(lease)).await)
    }

    /// Tries once, without waiting; watchdog mode.
    ///
    /// # Errors
    /// Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`acquire`](DistributedLock::acquire).
    async fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.acquire(AcquireOptions::new().with_wait(Duration::ZERO))
            .await
    }

    /// Waits at most `wait`; `lease` as in [`AcquireOptions::with_lease`] (`None`: watchdog).
    ///
    /// # Errors
    /// [`InvalidLease`](crate::Error::InvalidLease), Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`acquire`](DistributedLock::acquire).
    async fn try_lock_for(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.acquire(AcquireOptions::within(wait, lease)).await
    }
}

/// The outcome of a wait without a bound, which ends with a guard or an error, never with
/// `None`. For a primitive's own `lock()`, which calls its `acquire` directly (through the
/// trait, each call would box two futures).
pub fn unbounded<G>(acquired: Result<Option<G>>) -> Result<G> {
    acquired.map(|guard| guard.expect("an unbounded wait returns a guard"))
}

/// The instant `wait` from now, or `None` (wait forever) when that is beyond the clock's range.
pub fn deadline_after(wait: Duration) -> Option<Instant> {
    Instant::now().checked_add(wait)
}

/// The outcome of one acquire attempt, for a store's wait loop.
#[derive(Debug)]
pub enum Attempt<T> {
    /// Acquired.
    Done(T),
    /// Not acquired; the holder's remaining lease when known.
    Retry(Option<Duration>),
}

/// How many transient failures in a row an acquire rides out before it reports the error.
pub const TRANSIENT_RETRIES: u32 = 8;

/// One attempt; a transient failure (connection lost, reply timed out — the attempt has already
/// undone whatever it may have done) is retried after a short back-off while the deadline allows,
/// up to [`TRANSIENT_RETRIES`] in a row (`failures` counts them across calls and is reset by an
/// answer), so a killed connection or a failover does not fail a waiting acquire. The inner
/// loop of every store's wait loop, and of primitives that run their own.
///
/// # Errors
/// The attempt's error when it is not transient, or when the retries or the deadline ran out.
pub async fn retrying<T, F, Fut>(
    attempt: &mut F,
    deadline: Option<Instant>,
    failures: &mut u32,
) -> Result<Attempt<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>>>,
{
    loop {
        // The pause is decided before it is awaited, so the attempt's result is not kept in
        // this future during the pause (every acquisition's future holds this one).
        let backoff = match attempt().await {
            Err(err) if err.is_transient() && *failures < TRANSIENT_RETRIES => {
                *failures += 1;
                let backoff = crate::Backoff::nth(
                    Duration::from_millis(20),
                    Duration::from_millis(640),
                    *failures - 1,
                );
                if deadline.is_some_and(|d| d <= Instant::now() + backoff) {
                    return Err(err);
                }
                tracing::debug!(target: "keylatch::lock", error = %err, "transient failure; retrying the acquire");
                backoff
            }
            Err(err) => return Err(err),
            Ok(outcome) => {
                *failures = 0;
                return Ok(outcome);
            }
        };
        // Boxed: a retry is rare, and its timer inline would grow every acquisition's future.
        Box::pin(tokio::time::sleep(backoff)).await;
    }
}

/// `base` ± 20 %, so waiters that time out together do not retry together.
pub fn jitter(base: Duration) -> Duration {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEED: AtomicU64 = AtomicU64::new(0x9e37_79b9_7f4a_7c15);
    let mut x = SEED.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    let permille = 800 + (x % 401);
    base * u32::try_from(permille).unwrap_or(1000) / 1000
}

/// Writes a lock handle's shorthands on top of its
/// `acquire(&self, AcquireOptions) -> Result<Option<LockGuard>>`, as inherent methods (so
/// callers need not import [`DistributedLock`]): `lock`, `lock_with_lease`, `try_lock` and
/// `try_lock_for`, each with the summary line given for it; their errors and cancel safety are
/// `acquire`'s. Used inside an `impl` block:
///
/// ```ignore
/// impl MyLock {
///     keylatch_core::acquire_shorthands! {
///         lock: "Waits as long as it takes; watchdog mode.",
///         lock_with_lease: "Waits as long as it takes; the hold ends after `lease`.",
///         try_lock: "Tries once; watchdog mode. `None` when someone else holds it.",
///         try_lock_for: "Waits at most `wait`; `lease` of `None` means watchdog mode.",
///     }
/// }
/// ```
#[macro_export]
macro_rules! acquire_shorthands {
    (
        lock: $lock:literal,
        lock_with_lease: $lock_with_lease:literal,
        try_lock: $try_lock:literal,
        try_lock_for: $try_lock_for:literal $(,)?
    ) => {
        #[doc = $lock]
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire).
        ///
        /// # Cancel safety
        /// As [`acquire`](Self::acquire).
        pub async fn lock(&self) -> $crate::Result<$crate::LockGuard> {
            $crate::unbounded(self.acquire($crate::AcquireOptions::new()).await)
        }

        #[doc = $lock_with_lease]
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire), and [`Error::InvalidLease`]($crate::Error::InvalidLease).
        ///
        /// # Cancel safety
        /// As [`acquire`](Self::acquire).
        pub async fn lock_with_lease(
            &self,
            lease: ::std::time::Duration,
        ) -> $crate::Result<$crate::LockGuard> {
            $crate::unbounded(
                self.acquire($crate::AcquireOptions::new().with_lease(lease))
                    .await,
            )
        }

        #[doc = $try_lock]
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire).
        ///
        /// # Cancel safety
        /// As [`acquire`](Self::acquire).
        pub async fn try_lock(&self) -> $crate::Result<Option<$crate::LockGuard>> {
            self.acquire($crate::AcquireOptions::new().with_wait(::std::time::Duration::ZERO))
                .await
        }

        #[doc = $try_lock_for]
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire), and [`Error::InvalidLease`]($crate::Error::InvalidLease).
        ///
        /// # Cancel safety
        /// As [`acquire`](Self::acquire).
        pub async fn try_lock_for(
            &self,
            wait: ::std::time::Duration,
            lease: Option<::std::time::Duration>,
        ) -> $crate::Result<Option<$crate::LockGuard>> {
            self.acquire($crate::AcquireOptions::within(wait, lease))
                .await
        }
    };
}
