//! `ReentrantLock`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::{
    AcquireOptions, Attempt, DistributedLock, Error, HoldHandle, HoldKey, LockGuard, Owner,
    OwnerId, Renewal, Result, UndoGuard, validate_lease,
};
use keylatch_redis::redis::{self, Value};
use keylatch_redis::{Client, WakeMode, prefixed};
use tokio::time::Instant;

use crate::release::ReentrantRelease;
use crate::scripts::{ACQUIRE, FORCE_UNLOCK, UNLOCK_MESSAGE};

/// A reentrant distributed lock, compatible with Redisson's `RLock`.
///
/// - **Exclusion**: one owner at a time across every process using the name.
/// - **Reentrancy**: explicit, per [`Owner`]. By default every acquisition is a new owner, so
///   two acquisitions exclude each other even inside one task (`join!`, `select!`). To re-enter,
///   acquire for the holder's owner (`lock.with_owner(guard.owner())`) or through a handle with
///   an owner scope (`lock.with_owner(Owner::unique())`); each acquisition returns its own
///   guard, and the lock is free when every guard has been released.
/// - **Leases**: without a lease the hold is in watchdog mode (lease = the client's watchdog
///   timeout, renewed every third of it while the guard lives); with a lease it ends after the
///   lease, renewed by no one.
/// - **Fairness**: none. Waiters are woken through pub/sub and race; use the fair lock for FIFO
///   order.
/// - **Fencing** (opt-in, [`with_fencing`](ReentrantLock::with_fencing)): each acquisition gets
///   a token that strictly increases per name.
///
/// Layout (Redisson's): hash `name`, field `<client-uuid>:<owner-number>` → hold count, with
/// PEXPIRE = lease; channel `redisson_lock__channel:{name}`, message `0` on full release.
///
/// ```no_run
/// # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
/// let lock = client.lock("nightly-report");
/// let guard = lock.lock().await?;
/// // only one process runs this at a time
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ReentrantLock {
    pub(crate) client: Client,
    pub(crate) name: Arc<str>,
    pub(crate) owner: Option<Owner>,
    fencing: bool,
    /// `false` for [`ReentrantLock::non_reentrant`].
    reentrant: bool,
    /// The longest a watchdog-mode hold is renewed (see [`ReentrantLock::with_max_hold`]).
    max_hold: Option<Duration>,
    pub(crate) release: Arc<ReentrantRelease>,
}

impl ReentrantLock {
    /// A handle on the lock `name`. Nothing is sent to Redis; a bad name is reported by the
    /// first operation ([`Error::InvalidName`]).
    pub fn new(client: &Client, name: &str) -> ReentrantLock {
        ReentrantLock::publishing(client, name, UNLOCK_MESSAGE)
    }

    /// A handle on the lock `name` that is **not reentrant** (Redisson's
    /// `getNonReentrantLock`, same layout): an acquisition by the owner that already holds it
    /// fails at once with [`Error::AlreadyHeld`] and leaves that hold as it was, where the
    /// reentrant lock would re-enter. Other owners wait as usual.
    pub fn non_reentrant(client: &Client, name: &str) -> ReentrantLock {
        ReentrantLock {
            reentrant: false,
            ..ReentrantLock::new(client, name)
        }
    }

    /// A handle whose full release publishes `message` (`""`: nothing, for the spin lock).
    pub(crate) fn publishing(client: &Client, name: &str, message: &'static str) -> ReentrantLock {
        let name: Arc<str> = Arc::from(client.key_name(name));
        ReentrantLock {
            client: client.clone(),
            release: Arc::new(ReentrantRelease {
                client: client.clone(),
                channel: prefixed("redisson_lock__channel", &name),
                token_key: prefixed("redisson_lock_token", &name),
                // Without metadata the lock's own key stands in (the scripts then touch no
                // `keylatch_meta:*` key, which an ACL may not allow).
                meta_key: if client.config().holder_metadata {
                    keylatch_redis::holder_meta_key(&name)
                } else {
                    name.to_string()
                },
                name: name.clone(),
                message,
            }),
            name,
            owner: None,
            fencing: false,
            reentrant: true,
            max_hold: None,
        }
    }

    /// A handle whose acquisitions are all for `owner`: they re-enter each other's holds
    /// (see [`Owner`]). The handle it is called on keeps its own setting.
    #[must_use]
    pub fn with_owner(&self, owner: Owner) -> Self {
        ReentrantLock {
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

    /// Caps how long the watchdog renews a hold acquired without a lease: from `max` after the
    /// acquisition on it renews no more, the hold ends when its last renewal's lease does (at
    /// most the watchdog timeout later), and its guard reports it lost with
    /// [`LossReason::MaxHoldReached`](keylatch_core::LossReason::MaxHoldReached). Holds with
    /// a fixed lease are not affected. The handle it is called on keeps its own setting.
    #[must_use]
    pub fn with_max_hold(&self, max: Duration) -> Self {
        let mut handle = self.clone();
        handle.max_hold = Some(max);
        handle
    }

    /// Whether an owner's second acquisition re-enters (`false` for
    /// [`non_reentrant`](ReentrantLock::non_reentrant) handles).
    pub fn is_reentrant(&self) -> bool {
        self.reentrant
    }

    /// The lock name (the hash key).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The wake-up channel, `redisson_lock__channel:{name}`.
    pub fn channel(&self) -> &str {
        &self.release.channel
    }

    keylatch_core::acquire_shorthands! {
        lock: "Waits as long as it takes; watchdog mode.",
        lock_with_lease: "Waits as long as it takes; the hold ends after `lease`.",
        try_lock: "Tries once; watchdog mode. `None` when someone else holds it.",
        try_lock_for: "Waits at most `wait`; `lease` of `None` means watchdog mode.",
    }

    /// Acquires with `options`; `None` when the wait bound passed first.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], [`Error::NoTtl`] (the key is held without
    /// an expiry: waiting would never end), [`Error::AlreadyHeld`] (a non-reentrant handle's
    /// owner holds it already), Redis errors; [`Error::InvalidLease`] for a lease out of range.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind; a request already sent is undone.
    pub async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        let (owner, hold_key, lease, renewal) = self.prepare(&options)?;
        let deadline = options.deadline();
        keylatch_redis::wait_for(
            &self.client,
            "reentrant",
            Some(owner),
            self.channel(),
            WakeMode::One,
            deadline,
            || self.attempt(owner, &hold_key, lease, renewal),
        )
        .await
    }

    /// Checks the name and lease and draws the owner: what every attempt of one acquisition
    /// shares.
    pub(crate) fn prepare(
        &self,
        options: &AcquireOptions,
    ) -> Result<(OwnerId, HoldKey, Duration, Renewal)> {
        self.client.validate_name(&self.name)?;
        let (lease, renewal) = match options.lease() {
            Some(lease) => {
                validate_lease(lease)?;
                (lease, Renewal::Lease)
            }
            None => (
                self.client.config().watchdog_timeout,
                keylatch_redis::hash_hold_renewal(&self.client),
            ),
        };
        let owner = self.client.owner_id(Owner::or_unique(self.owner));
        // The hold's name, formatted once for every attempt, the undo and the registration.
        let hold_key = HoldKey::new(&self.name, owner);
        Ok((owner, hold_key, lease, renewal))
    }

    /// One acquire attempt (one script call), undone if its reply is lost.
    pub(crate) async fn attempt(
        &self,
        owner: OwnerId,
        hold_key: &HoldKey,
        lease: Duration,
        renewal: Renewal,
    ) -> Result<Attempt<LockGuard>> {
        let field = hold_key.field();
        let watchdog = self.client.watchdog();
        watchdog.settled(&self.name, field).await;
        let expected = watchdog.local_count(&self.name, field) as u64 + 1;
        let undo = UndoGuard::arm_for_key(
            self.client.background(),
            self.release.clone(),
            owner,
            expected,
            hold_key,
        );
        let call = ACQUIRE
            .call()
            .key(&*self.name)
            .key(&self.release.token_key)
            .key(&self.release.meta_key)
            .arg(keylatch_core::lease_millis(lease))
            .arg(field)
            .arg(if self.fencing { "1" } else { "0" })
            .arg(if self.reentrant { "0" } else { "1" })
            .arg(self.client.holder_metadata());
        let sent_at = Instant::now();
        // Boxed on its own: inline, it would make the acquisition's boxed future larger than
        // the allocator's fast sizes (about 1 KiB in glibc's), which costs more than two
        // small allocations.
        let (reply, undo) = Box::pin(self.client.eval_undoable(call, undo)).await;
        let reply = match reply {
            Ok(reply) => {
                undo.disarm();
                reply
            }
            Err(err) if err.is_ambiguous() => {
                // If the undo fails too it goes on in the background, and the next attempt
                // waits for it (`settled`), so a retry never races it.
                let _ = undo.run_now().await;
                return Err(err);
            }
            Err(err) => {
                undo.disarm();
                return Err(err);
            }
        };
        let token = match reply {
            Value::Nil => None,
            Value::Array(items) => match items.as_slice() {
                [Value::Int(token)] => Some(u64::try_from(*token).unwrap_or(0)),
                _ => return Err(self.unexpected()),
            },
            Value::Int(-1) => {
                return Err(Error::NoTtl {
                    key: self.name.to_string(),
                });
            }
            Value::Int(-3) => {
                return Err(Error::AlreadyHeld {
                    name: self.name.to_string(),
                });
            }
            Value::Int(pttl) => {
                let pttl = u64::try_from(pttl).unwrap_or(0);
                return Ok(Attempt::Retry(Some(Duration::from_millis(pttl))));
            }
            _ => return Err(self.unexpected()),
        };
        let hold = watchdog.register(hold_key.clone(), lease, renewal, sent_at);
        if let (Some(max), true) = (self.max_hold, hold.is_watched()) {
            hold.set_max_hold(sent_at + max);
        }
        Ok(Attempt::Done(self.guard(owner, hold, token)))
    }

    /// The guard of a hold registered for `owner`: released and extended by this handle.
    pub(crate) fn guard(&self, owner: OwnerId, hold: HoldHandle, token: Option<u64>) -> LockGuard {
        LockGuard::new(
            self.client.background().clone(),
            self.name.clone(),
            owner,
            self.release.clone(),
            hold,
            token,
        )
        .extendable(self.release.clone())
    }

    fn unexpected(&self) -> Error {
        Error::UnexpectedReply {
            what: "reentrant_acquire",
        }
    }

    /// Releases the lock whoever holds it and wakes a waiter. Returns whether it was held.
    /// Guards of the old holder then get [`Error::NotHeld`] from `unlock`.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.client.validate_name(&self.name)?;
        let call = FORCE_UNLOCK
            .call()
            .key(&*self.name)
            .key(self.channel())
            .key(&self.release.meta_key)
            .arg(self.release.message);
        let released: i64 = self.client.eval(&call).await?;
        Ok(released == 1)
    }

    /// Whether anyone holds the lock.
    ///
    /// # Errors
    /// [`Error::InvalidName`], Redis errors.
    pub async fn is_locked(&self) -> Result<bool> {
        self.client.validate_name(&self.name)?;
        let exists: i64 = self
            .client
            .query(redis::cmd("EXISTS").arg(&*self.name), &self.name)
            .await?;
        Ok(exists == 1)
    }

    /// Whether this handle's owner (set with [`with_owner`](ReentrantLock::with_owner)) holds
    /// the lock; `false` for a handle without an owner scope (each of its acquisitions is a new
    /// owner, so it has no standing owner).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    pub async fn is_held_by_current_owner(&self) -> Result<bool> {
        Ok(self.hold_count().await? > 0)
    }

    /// How many times this handle's owner holds the lock (0: not at all, and always 0 for a
    /// handle without an owner scope).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    pub async fn hold_count(&self) -> Result<u64> {
        self.client.validate_name(&self.name)?;
        let Some(owner) = self.owner else {
            return Ok(0);
        };
        let field = self.client.owner_id(owner).to_string();
        let count: Option<u64> = self
            .client
            .query(redis::cmd("HGET").arg(&*self.name).arg(field), &self.name)
            .await?;
        Ok(count.unwrap_or(0))
    }

    /// The time left on the lock's lease; `None` when it is free.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::NoTtl`] for a key without an expiry, Redis errors.
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.client.validate_name(&self.name)?;
        self.client.remaining_ttl(&self.name).await
    }
}

#[async_trait]
impl DistributedLock for ReentrantLock {
    fn name(&self) -> &str {
        &self.name
    }

    async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        ReentrantLock::acquire(self, options).await
    }

    fn release_channel(&self) -> Option<(&(dyn std::any::Any + Send + Sync), &str)> {
        Some((&self.client, self.channel()))
    }

    async fn is_locked(&self) -> Result<bool> {
        ReentrantLock::is_locked(self).await
    }

    async fn force_unlock(&self) -> Result<bool> {
        ReentrantLock::force_unlock(self).await
    }
}
