//! `SpinLock`: the reentrant lock's layout and scripts, waited for by polling with back-off
//! instead of pub/sub (Redisson's `RedissonSpinLock`).
//!
//! May import `keylatch-core`, `keylatch-redis`, `lock.rs`, `backoff.rs`.

use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::lock::{Attempt, retrying};
use keylatch_core::{AcquireOptions, DistributedLock, Error, LockGuard, Owner, OwnerId, Result};
use keylatch_redis::{Client, open};
use tokio::time::Instant;

use crate::backoff::SpinBackoff;
use crate::lock::ReentrantLock;

/// A reentrant distributed lock that never uses pub/sub, compatible with Redisson's
/// `RSpinLock`: a refused acquisition sleeps a [back-off](SpinBackoff) and tries again.
///
/// Everything else is the [`ReentrantLock`]'s: layout (hash `name`, field
/// `<client-uuid>:<owner-number>` → hold count), reentrancy per [`Owner`], leases and the
/// watchdog, fencing, cancel safety. A release publishes nothing, and a wait subscribes to
/// nothing: no pub/sub connection is used, which suits large clusters and servers where
/// pub/sub is unavailable, at the cost of a wake-up up to one pause late and a request per
/// pause while waiting. For many waiters on a busy lock, the reentrant lock wakes them better.
///
/// ```no_run
/// # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
/// use std::time::Duration;
/// use keylatch::SpinBackoff;
///
/// let lock = client
///     .spin_lock("compaction")
///     .with_backoff(SpinBackoff::constant(Duration::from_millis(20)));
/// let guard = lock.lock().await?;
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SpinLock {
    inner: ReentrantLock,
    backoff: SpinBackoff,
}

impl SpinLock {
    /// A handle on the spin lock `name`, with the default back-off (exponential with jitter).
    /// Nothing is sent to Redis; a bad name is reported by the first operation
    /// ([`Error::InvalidName`]).
    pub fn new(client: &Client, name: &str) -> SpinLock {
        SpinLock {
            inner: ReentrantLock::publishing(client, name, ""),
            backoff: SpinBackoff::default(),
        }
    }

    /// A handle whose acquisitions are all for `owner`: they re-enter each other's holds.
    #[must_use]
    pub fn with_owner(&self, owner: Owner) -> Self {
        SpinLock {
            inner: self.inner.with_owner(owner),
            backoff: self.backoff,
        }
    }

    /// Issue a fencing token with every acquisition (string `redisson_lock_token:{name}`).
    #[must_use]
    pub fn with_fencing(&self, enabled: bool) -> Self {
        SpinLock {
            inner: self.inner.with_fencing(enabled),
            backoff: self.backoff,
        }
    }

    /// The pause between attempts (default [`SpinBackoff::default`]); a bad setting is
    /// reported by the next acquisition ([`Error::InvalidConfig`]).
    #[must_use]
    pub fn with_backoff(&self, backoff: SpinBackoff) -> Self {
        SpinLock {
            inner: self.inner.clone(),
            backoff,
        }
    }

    /// The back-off of this handle.
    pub fn backoff(&self) -> SpinBackoff {
        self.backoff
    }

    /// The lock name (the hash key).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    keylatch_core::acquire_shorthands! {
        lock: "Waits as long as it takes; watchdog mode.",
        lock_with_lease: "Waits as long as it takes; the hold ends after `lease`.",
        try_lock: "Tries once; watchdog mode. `None` when someone else holds it.",
        try_lock_for: "Waits at most `wait`; `lease` of `None` means watchdog mode.",
    }

    /// Acquires with `options`: tries, and while refused sleeps the next back-off pause (never
    /// past the deadline) and tries again; `None` when the wait bound passed first.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::InvalidConfig`] (back-off), [`Error::WrongType`],
    /// [`Error::NoTtl`], Redis errors; [`Error::Closed`] when the client shuts down meanwhile;
    /// [`Error::InvalidLease`] for a lease out of range.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind; a request already sent is undone.
    pub async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        self.backoff.validate()?;
        let (owner, hold_key, lease, renewal) = self.inner.prepare(&options)?;
        let client = &self.inner.client;
        let deadline = options.deadline();
        let mut acquisition = client.begin_acquisition("spin")?;
        acquisition.naming(self.name());
        acquisition.owned_by(owner);
        // Each attempt cut off twice the response timeout past the deadline (see `bounded_attempt`).
        let mut attempt = || {
            keylatch_redis::bounded_attempt(
                client,
                deadline,
                self.inner.attempt(owner, &hold_key, lease, renewal),
            )
        };
        let mut failures = 0;
        let mut pauses = self.backoff.pauses();
        let mut refused = false;
        loop {
            match open(
                client,
                retrying(&mut attempt, deadline, &mut failures).await,
            )? {
                Attempt::Done(guard) => {
                    acquisition.finish(if refused {
                        "acquired_after_waiting"
                    } else {
                        "acquired"
                    });
                    return Ok(Some(guard));
                }
                Attempt::Retry(_) => refused = true,
            }
            let now = Instant::now();
            let mut until = now + pauses.next_pause();
            if let Some(deadline) = deadline {
                if deadline <= now {
                    acquisition.finish("timed_out");
                    return Ok(None);
                }
                until = until.min(deadline);
            }
            tokio::select! {
                () = tokio::time::sleep_until(until) => {}
                // The client is shutting down: give up.
                () = client.closing() => return Err(Error::Closed),
            }
        }
    }

    /// Releases the lock whoever holds it (Redisson's `forceUnlock`: publishes nothing).
    /// Returns whether it was held.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.inner.force_unlock().await
    }

    /// Whether anyone holds the lock.
    ///
    /// # Errors
    /// [`Error::InvalidName`], Redis errors.
    pub async fn is_locked(&self) -> Result<bool> {
        self.inner.is_locked().await
    }

    /// Whether `owner` (any owner id, this client's or another's) holds the lock.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn is_held_by(&self, owner: OwnerId) -> Result<bool> {
        self.inner.is_held_by(owner).await
    }

    /// How many times this handle's owner holds the lock (see
    /// [`ReentrantLock::hold_count`]).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    pub async fn hold_count(&self) -> Result<u64> {
        self.inner.hold_count().await
    }

    /// The last fencing token issued for this name, `None` when none was (see
    /// [`ReentrantLock::token`]).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn token(&self) -> Result<Option<u64>> {
        self.inner.token().await
    }

    /// The time left on the lock's lease; `None` when it is free.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::NoTtl`] for a key without an expiry, Redis errors.
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.inner.remaining_ttl().await
    }
}

#[async_trait]
impl DistributedLock for SpinLock {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        SpinLock::acquire(self, options).await
    }

    async fn is_locked(&self) -> Result<bool> {
        SpinLock::is_locked(self).await
    }

    async fn force_unlock(&self) -> Result<bool> {
        SpinLock::force_unlock(self).await
    }
}
