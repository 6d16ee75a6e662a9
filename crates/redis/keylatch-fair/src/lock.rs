//! `FairLock`: the public face.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::{
    AcquireOptions, DistributedLock, Error, HoldHandle, LockGuard, MAX_LEASE, Owner, OwnerId,
    Result,
};
use keylatch_redis::Client;
use keylatch_redis::redis;

use crate::keys::Keys;
use crate::release::FairRelease;
use crate::scripts::{FORCE_UNLOCK, QUEUE};
use crate::waiter::{QueuedWaiter, parse_queue};

/// How long a queued waiter keeps its place without being refreshed: the default of
/// [`FairLock::with_waiter_timeout`] (keylatch's counterpart of Redisson's `threadWaitTime`,
/// which keylatch leaves to Redisson's own waiters).
pub const DEFAULT_WAITER_TIMEOUT: Duration = Duration::from_secs(5);

/// The shortest waiter timeout accepted (the watchdog refreshes every third of it).
pub const MIN_WAITER_TIMEOUT: Duration = Duration::from_millis(30);

/// A fair (FIFO) distributed lock, compatible with Redisson's `RFairLock`.
///
/// - **Exclusion**: one owner at a time across every process using the name.
/// - **Fairness**: first come, first served among live waiters. A waiter takes its place in
///   the queue with its first attempt, and the lock goes to the head of the queue: a newcomer
///   never overtakes a waiter, not even through [`try_lock`](FairLock::try_lock) while the
///   lock is free but someone is queued. A release hands the lock to the head of the queue and
///   tells it so ([`with_direct_grant`](FairLock::with_direct_grant)), or wakes the head only,
///   on its own channel.
/// - **Waiter liveness**: a queued waiter's place has a deadline (server clock), which its
///   client refreshes every third of the [waiter timeout](FairLock::with_waiter_timeout)
///   (batched with every other refresh and renewal of the client), so a live waiter keeps its
///   place however long it waits. A waiter whose process died is evicted once its deadline
///   passes: it delays the queue by at most the waiter timeout (default 5 s).
/// - **Cancellation**: a wait that is cancelled (its future dropped) or times out leaves the
///   queue at once, and wakes the next waiter if it was first.
///   [`try_lock`](FairLock::try_lock) never queues.
/// - **Reentrancy**: explicit, per [`Owner`], as the reentrant lock: by default every
///   acquisition is a new owner (two acquisitions exclude each other even inside one task);
///   an acquisition for a holder's owner (`lock.with_owner(guard.owner())`) re-enters without
///   queueing, and returns its own guard. Two concurrent waits of one owner share one place in
///   the queue.
/// - **Leases**: as the reentrant lock. Without a lease the hold is in watchdog mode (lease =
///   the client's watchdog timeout, renewed every third of it while the guard lives); with a
///   lease it ends after the lease, renewed by no one.
/// - **Fencing** (opt-in, [`with_fencing`](FairLock::with_fencing)): each acquisition gets a
///   token that strictly increases per name.
/// - **Hand-over** by owner id: [`adopt`](FairLock::adopt) takes over another process's hold
///   with a guard of this client, [`unlock_as`](FairLock::unlock_as) releases one without its
///   guard; either way the release hands the lock to the head of the queue.
///
/// - **Redisson waiters** (`RFairLock`) share the queue: the lock goes in arrival order across
///   both, and each side's waiters keep their place under the other's score arithmetic.
///
/// Layout (Redisson's): hash `name`, field `<client-uuid>:<owner-number>` → hold count, with
/// PEXPIRE = lease; list `redisson_lock_queue:{name}` (waiter ids, first in front); zset
/// `redisson_lock_timeout:{name}` (waiter id → Redisson's score; a keylatch waiter's lies
/// beyond the reach of Redisson's arithmetic while it lives); a waiter is woken on
/// `redisson_lock__channel:{name}:<waiter-id>` with message `0`. keylatch's own: zset
/// `{name}:keylatch_waiters` (keylatch waiter id → liveness deadline, ms since the epoch on
/// the server's clock), which expires once every keylatch waiter in it would have, and hash
/// `{name}:keylatch_grants` (the grant offers and marks of the
/// [direct grant](FairLock::with_direct_grant), whose letter `=<token>:<attempt>` replaces the
/// `0`). The
/// list and Redisson's zset never get an expiry (a Redisson waiter's place would go with
/// them).
///
/// ```no_run
/// # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
/// use std::time::Duration;
///
/// let lock = client
///     .fair_lock("print-queue")
///     .with_waiter_timeout(Duration::from_secs(2));
/// let guard = lock.lock().await?; // served in arrival order
/// // ... the job ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct FairLock {
    pub(crate) client: Client,
    pub(crate) keys: Arc<Keys>,
    pub(crate) owner: Option<Owner>,
    pub(crate) fencing: bool,
    pub(crate) waiter_timeout: Duration,
    pub(crate) direct_grant: bool,
    /// `false` for [`FairLock::non_reentrant`].
    pub(crate) reentrant: bool,
    pub(crate) release: Arc<FairRelease>,
}

impl FairLock {
    /// A handle on the fair lock `name`. Nothing is sent to Redis; a bad name is reported by
    /// the first operation ([`Error::InvalidName`]).
    pub fn new(client: &Client, name: &str) -> FairLock {
        let keys = Arc::new(Keys::new(&client.key_name(name)));
        FairLock {
            client: client.clone(),
            release: Arc::new(FairRelease {
                client: client.clone(),
                keys: keys.clone(),
            }),
            keys,
            owner: None,
            fencing: false,
            waiter_timeout: DEFAULT_WAITER_TIMEOUT,
            direct_grant: true,
            reentrant: true,
        }
    }

    /// A handle on the fair lock `name` that is **not reentrant** (Redisson's
    /// `getNonReentrantFairLock`, same layout): an acquisition by the owner that already holds
    /// it fails at once with [`Error::AlreadyHeld`], without queueing, and leaves that hold as
    /// it was. Other owners queue as usual.
    pub fn non_reentrant(client: &Client, name: &str) -> FairLock {
        FairLock {
            reentrant: false,
            ..FairLock::new(client, name)
        }
    }

    /// Whether an owner's second acquisition re-enters (`false` for
    /// [`non_reentrant`](FairLock::non_reentrant) handles).
    pub fn is_reentrant(&self) -> bool {
        self.reentrant
    }

    /// A handle whose acquisitions are all for `owner`: they re-enter each other's holds
    /// (see [`Owner`]). The handle it is called on keeps its own setting.
    #[must_use]
    pub fn with_owner(&self, owner: Owner) -> Self {
        FairLock {
            owner: Some(owner),
            ..self.clone()
        }
    }

    /// Issue a fencing token with every acquisition (string `redisson_lock_token:{name}`,
    /// incremented per acquisition, never expires).
    #[must_use]
    pub fn with_fencing(&self, enabled: bool) -> Self {
        let mut handle = self.clone();
        handle.fencing = enabled;
        handle
    }

    /// How long a waiter of this handle keeps its place in the queue if its process stops
    /// refreshing it (default [`DEFAULT_WAITER_TIMEOUT`], 5 s): the most a crashed waiter
    /// delays the ones behind it. A live waiter is refreshed every third of it and never
    /// loses its place. Between [`MIN_WAITER_TIMEOUT`] and [`MAX_LEASE`]; a value outside is
    /// reported by the next acquire ([`Error::InvalidConfig`]).
    #[must_use]
    pub fn with_waiter_timeout(&self, timeout: Duration) -> Self {
        let mut handle = self.clone();
        handle.waiter_timeout = timeout;
        handle
    }

    /// Whether this handle's waiters accept the lock handed to them on release (default
    /// `true`). The release that frees the lock then writes the hold for the head of the queue
    /// and tells it so in the wake-up message: the waiter has the lock when the message
    /// arrives, one message delivery after the release, with no request of its own. Otherwise
    /// (`false`, and always for Redisson's waiters) the head is woken and sends its own
    /// acquire, a round trip more.
    ///
    /// Only a wait with an owner of its own takes grants (not one of a handle made with
    /// [`with_owner`](FairLock::with_owner)), and only in watchdog mode or with a lease no
    /// longer than the [waiter timeout](FairLock::with_waiter_timeout). The granted hold ends
    /// no later than the waiter's queue deadline until the waiter renews it (early, in
    /// watchdog mode), so a grant to a waiter that died just now delays the queue no more than
    /// its deadline would have. A wait that ends before it takes the grant (cancelled, timed
    /// out) releases it as it leaves the queue, and the lock goes to the next waiter.
    #[must_use]
    pub fn with_direct_grant(&self, enabled: bool) -> Self {
        let mut handle = self.clone();
        handle.direct_grant = enabled;
        handle
    }

    /// The guard of a hold registered for `owner`: released (handing the lock to the head of
    /// the queue) and extended by this handle.
    pub(crate) fn hold_guard(
        &self,
        owner: OwnerId,
        hold: HoldHandle,
        token: Option<u64>,
    ) -> LockGuard {
        LockGuard::new(
            self.client.background().clone(),
            self.keys.name.clone(),
            owner,
            self.release.clone(),
            hold,
            token,
        )
        .extendable(self.release.clone())
    }

    /// The lock name (the hash key).
    pub fn name(&self) -> &str {
        &self.keys.name
    }

    /// The waiter timeout (see [`with_waiter_timeout`](FairLock::with_waiter_timeout)).
    pub fn waiter_timeout(&self) -> Duration {
        self.waiter_timeout
    }

    /// The queue list, `redisson_lock_queue:{name}`.
    pub fn queue_key(&self) -> &str {
        &self.keys.queue
    }

    /// Redisson's score zset, `redisson_lock_timeout:{name}` (keylatch waiters' liveness
    /// deadlines are in `{name}:keylatch_waiters`).
    pub fn timeout_key(&self) -> &str {
        &self.keys.timeouts
    }

    keylatch_core::acquire_shorthands! {
        lock: "Waits as long as it takes, in arrival order; watchdog mode.",
        lock_with_lease: "Waits as long as it takes, in arrival order; the hold ends after `lease`.",
        try_lock: "Tries once; watchdog mode. `None` when someone holds the lock or is queued for it. Never joins the queue.",
        try_lock_for: "Waits at most `wait`, queued; `lease` of `None` means watchdog mode. A wait that times out leaves the queue before this returns `None`.",
    }

    /// Acquires with `options`; `None` when the wait bound passed first (a zero wait tries
    /// once without queueing).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::InvalidConfig`] (waiter timeout),
    /// [`Error::WrongType`], [`Error::NoTtl`] (the key is held without an expiry: waiting
    /// would never end), [`Error::AlreadyHeld`] (a non-reentrant handle's owner holds it
    /// already), Redis errors; [`Error::InvalidLease`] for a lease out of range.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves no hold, queue entry, subscription or watchdog entry
    /// behind; a request already sent is undone and the queue left in the background.
    pub async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        self.client.validate_name(&self.keys.name)?;
        if !(MIN_WAITER_TIMEOUT..=MAX_LEASE).contains(&self.waiter_timeout) {
            return Err(Error::InvalidConfig {
                field: "waiter_timeout",
                reason: "must be between 30ms and 30 days",
            });
        }
        self.acquire_checked(options).await
    }

    /// Releases the lock whoever holds it and wakes the head of the queue (also when the lock
    /// was already free: a nudge for a head waiting on its timer). Returns whether it was held.
    /// Guards of the old holder then get [`Error::NotHeld`] from `unlock`.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// The release happens or not as a whole; a dropped call may or may not have run.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.client.validate_name(&self.keys.name)?;
        let released: i64 = self.client.eval(&self.keys.call(&FORCE_UNLOCK)).await?;
        Ok(released == 1)
    }

    /// Whether anyone holds the lock.
    ///
    /// # Errors
    /// [`Error::InvalidName`], Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn is_locked(&self) -> Result<bool> {
        self.client.validate_name(&self.keys.name)?;
        let exists: i64 = self
            .client
            .query(redis::cmd("EXISTS").arg(self.name()), self.name())
            .await?;
        Ok(exists == 1)
    }

    /// Whether this handle's owner (set with [`with_owner`](FairLock::with_owner)) holds the
    /// lock; `false` for a handle without an owner scope.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn is_held_by_current_owner(&self) -> Result<bool> {
        Ok(self.hold_count().await? > 0)
    }

    /// How many times this handle's owner holds the lock (0: not at all, and always 0 for a
    /// handle without an owner scope).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn hold_count(&self) -> Result<u64> {
        self.client.validate_name(&self.keys.name)?;
        let Some(owner) = self.owner else {
            return Ok(0);
        };
        let field = self.client.owner_id(owner).to_string();
        let count: Option<u64> = self
            .client
            .query(redis::cmd("HGET").arg(self.name()).arg(field), self.name())
            .await?;
        Ok(count.unwrap_or(0))
    }

    /// The time left on the lock's lease; `None` when it is free.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::NoTtl`] for a key without an expiry, Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.client.validate_name(&self.keys.name)?;
        self.client.remaining_ttl(self.name()).await
    }

    /// The waiters, first in line first, with their deadlines (changes nothing: a dead
    /// waiter still listed shows `expires_in` zero until a script evicts it).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`] (naming the queue or deadline key), Redis
    /// errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn queue(&self) -> Result<Vec<QueuedWaiter>> {
        self.client.validate_name(&self.keys.name)?;
        let call = QUEUE
            .call()
            .key(self.keys.queue.as_str())
            .key(self.keys.timeouts.as_str())
            .key(self.keys.waiters.as_str());
        parse_queue(self.client.eval_value(&call).await?)
    }
}

#[async_trait]
impl DistributedLock for FairLock {
    fn name(&self) -> &str {
        &self.keys.name
    }

    async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        FairLock::acquire(self, options).await
    }

    async fn is_locked(&self) -> Result<bool> {
        FairLock::is_locked(self).await
    }

    async fn force_unlock(&self) -> Result<bool> {
        FairLock::force_unlock(self).await
    }
}
