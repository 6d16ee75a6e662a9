//! `WriteLock`: the write side of a read-write lock.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::{
    AcquireOptions, Attempt, DistributedLock, Error, HoldKey, LockGuard, MAX_LEASE, Owner, OwnerId,
    Renewal, Result, UndoGuard, lease_millis, validate_lease,
};
use keylatch_redis::WakeMode;
use keylatch_redis::redis::Value;
use tokio::time::Instant;

use crate::intent::IntentGuard;
use crate::release::write_field;
use crate::scripts::{WRITE_ACQUIRE, WRITE_RENEW};
use crate::shared::Shared;

/// How long a waiting writer's intent lasts without a refresh, by default.
pub(crate) const DEFAULT_WRITER_INTENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The write side of a [`RwLock`](crate::RwLock), from
/// [`RwLock::write_lock`](crate::RwLock::write_lock): the same methods as the reentrant lock,
/// and the shared [`DistributedLock`] trait.
///
/// - **Exclusion**: one owner at a time, and no reader meanwhile, across every process using
///   the name.
/// - **Reentrancy**: per [`Owner`], when asked for (`with_owner`); by default each acquisition
///   is a new owner. The writer may also take the read lock for its own owner (downgrade: after
///   its last write unlock its read holds remain). An owner that holds only read holds gets
///   [`Error::UpgradeRefused`] at once: waiting for its own readers to leave would never end.
/// - **Fairness**: no writer starvation. A waiting writer records its intent in
///   `{name}:write_intent`; new keylatch readers wait behind it while current readers finish
///   (readers that re-enter pass). Writers are not ordered among themselves, and while writers
///   keep coming, new readers keep waiting (writer preference).
/// - **Leases**: as the reentrant lock's (watchdog mode without a lease). The intent is kept
///   fresh by the watchdog while the writer waits and expires after the writer intent timeout
///   (default 5 s, [`with_writer_intent_timeout`](WriteLock::with_writer_intent_timeout)) if
///   its process dies.
#[derive(Clone, Debug)]
pub struct WriteLock {
    shared: Arc<Shared>,
    owner: Option<Owner>,
    intent_timeout: Duration,
    fencing: bool,
}

/// The fixed parts of one write acquire.
struct Request<'a> {
    owner: OwnerId,
    field: &'a str,
    write_field: &'a str,
    /// The hold: (the lock, `write_field`).
    write_key: &'a HoldKey,
    lease: Duration,
    renewal: Renewal,
    /// The intent timeout in ms, or 0 when the caller does not wait.
    intent_ms: u64,
}

impl WriteLock {
    pub(crate) fn new(
        shared: Arc<Shared>,
        owner: Option<Owner>,
        intent_timeout: Duration,
    ) -> WriteLock {
        WriteLock {
            shared,
            owner,
            intent_timeout,
            fencing: false,
        }
    }

    /// A handle whose acquisitions are all for `owner`: they re-enter each other's holds
    /// (see [`Owner`]). The handle it is called on keeps its own setting.
    #[must_use]
    pub fn with_owner(&self, owner: Owner) -> Self {
        WriteLock {
            owner: Some(owner),
            ..self.clone()
        }
    }

    /// How long a waiting writer's intent keeps new readers out without a refresh (default
    /// 5 s). The watchdog refreshes it every third of this while the writer waits; after the
    /// writer's process dies, readers stop deferring to it within this time. Checked when an
    /// acquire starts: at least 30 ms and at most [`MAX_LEASE`], else
    /// [`Error::InvalidConfig`].
    #[must_use]
    pub fn with_writer_intent_timeout(&self, timeout: Duration) -> Self {
        let mut handle = self.clone();
        handle.intent_timeout = timeout;
        handle
    }

    /// Issue a fencing token with every write acquisition (string
    /// `redisson_lock_token:{name}`, incremented per acquisition, never expires; the same
    /// counter a reentrant or fair lock of the name would use):
    /// [`LockGuard::fencing_token`].
    #[must_use]
    pub fn with_fencing(&self, enabled: bool) -> Self {
        let mut handle = self.clone();
        handle.fencing = enabled;
        handle
    }

    /// The lock name (the hash key).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The wake-up channel, `redisson_rwlock:{name}`.
    pub fn channel(&self) -> &str {
        &self.shared.channel
    }

    keylatch_core::acquire_shorthands! {
        lock: "Waits as long as it takes; watchdog mode.",
        lock_with_lease: "Waits as long as it takes; the hold ends after `lease`.",
        try_lock: "Tries once; watchdog mode. `None` when anyone else holds the lock. Records no intent.",
        try_lock_for: "Waits at most `wait`; `lease` of `None` means watchdog mode.",
    }

    /// Acquires with `options`; `None` when the wait bound passed first. While it waits, the
    /// writer's intent keeps new readers out; it is withdrawn when the wait ends.
    ///
    /// # Errors
    /// [`Error::UpgradeRefused`] when the owner holds a read hold and not the write hold;
    /// [`Error::InvalidName`], [`Error::InvalidConfig`] (the writer intent timeout),
    /// [`Error::WrongType`], [`Error::NoTtl`] (the key is held without an expiry: waiting would
    /// never end), Redis errors; [`Error::InvalidLease`] for a lease out of range.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind — no hold (a request already sent is undone), no
    /// subscription, and the writer's intent is withdrawn in the background.
    pub async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        let shared = &*self.shared;
        shared.client.validate_name(&shared.name)?;
        if self.intent_timeout < Duration::from_millis(30) || self.intent_timeout > MAX_LEASE {
            return Err(Error::InvalidConfig {
                field: "writer_intent_timeout",
                reason: "must be between 30ms and 30 days",
            });
        }
        let (lease, renewal) = match options.lease() {
            Some(lease) => {
                validate_lease(lease)?;
                (lease, Renewal::Lease)
            }
            None => (
                shared.client.config().watchdog_timeout,
                WRITE_RENEW.renewal(),
            ),
        };
        let owner = shared.client.owner_id(Owner::or_unique(self.owner));
        let field = owner.to_string();
        // The hold's name, formatted once for every attempt, the undo and the registration.
        let write_key = HoldKey::new(&shared.name, write_field(owner));
        let waits = options.wait() != Some(Duration::ZERO);
        let request = Request {
            owner,
            field: &field,
            write_field: write_key.field(),
            write_key: &write_key,
            lease,
            renewal,
            intent_ms: if waits {
                lease_millis(self.intent_timeout)
            } else {
                0
            },
        };
        let deadline = options.deadline();
        let intent = Mutex::new(IntentGuard::new(
            self.shared.clone(),
            field.clone(),
            self.intent_timeout,
        ));
        // One writer per message: only one can take the lock, and the others would only run
        // their acquire script for nothing (a herd). Readers waiting on the same channel ask
        // for every message to wake everyone, as several of them may proceed.
        let result = keylatch_redis::wait_for(
            &shared.client,
            "write",
            Some(owner),
            &shared.channel,
            WakeMode::One,
            deadline,
            || self.attempt(&request, &intent),
        )
        .await;
        let intent = intent.into_inner().unwrap_or_else(PoisonError::into_inner);
        // A no-op once the lock was acquired (the acquire removed the intent); otherwise the
        // readers that deferred to this writer are let in now. If this fails, it goes on in
        // the background.
        let _ = intent.withdraw().await;
        result
    }

    async fn attempt(
        &self,
        request: &Request<'_>,
        intent: &Mutex<IntentGuard>,
    ) -> Result<Attempt<LockGuard>> {
        let shared = &*self.shared;
        let watchdog = shared.client.watchdog();
        // Background work of this owner on this lock (a release, an undo, a withdrawal) lands
        // first, so the server is in the state this client believes.
        watchdog.settled(&shared.name, request.write_field).await;
        watchdog.settled(&shared.name, request.field).await;
        watchdog.settled(&shared.intent_key, request.field).await;
        let expected = watchdog.local_count(&shared.name, request.write_field) as u64 + 1;
        let undo = UndoGuard::arm_for_key(
            shared.client.background(),
            shared.write_release.clone(),
            request.owner,
            expected,
            request.write_key,
        );
        if request.intent_ms > 0 {
            lock(intent).arm();
        }
        let call = WRITE_ACQUIRE
            .call()
            .key(&*shared.name)
            .key(&*shared.intent_key)
            .key(&*shared.token_key)
            .arg(lease_millis(request.lease))
            .arg(request.field)
            .arg(request.write_field)
            .arg(request.intent_ms)
            .arg(if self.fencing { "1" } else { "0" });
        let sent_at = Instant::now();
        let reply = shared.send(&call, undo).await?;
        let (reply, token) = match reply {
            Value::Array(items) => match items.as_slice() {
                [Value::Int(token)] => (Value::Nil, u64::try_from(*token).ok()),
                _ => (Value::Array(items), None),
            },
            other => (other, None),
        };
        match reply {
            Value::Nil => {
                lock(intent).acquired();
                let hold = watchdog.register(
                    request.write_key.clone(),
                    request.lease,
                    request.renewal,
                    sent_at,
                );
                Ok(Attempt::Done(
                    LockGuard::new(
                        shared.client.background().clone(),
                        shared.name.clone(),
                        request.owner,
                        shared.write_release.clone(),
                        hold,
                        token,
                    )
                    .extendable(shared.write_release.clone()),
                ))
            }
            Value::Int(-3) => Err(self.upgrade_refused()),
            Value::Int(-1) => Err(Error::NoTtl {
                key: shared.name.to_string(),
            }),
            Value::Int(pttl) if pttl >= 0 => {
                if request.intent_ms > 0 {
                    lock(intent).recorded(sent_at);
                }
                Ok(Attempt::Retry(Some(Duration::from_millis(
                    pttl.unsigned_abs(),
                ))))
            }
            _ => Err(Error::UnexpectedReply {
                what: "rwlock_write_acquire",
            }),
        }
    }

    fn upgrade_refused(&self) -> Error {
        Error::UpgradeRefused {
            name: self.shared.name.to_string(),
        }
    }

    /// Releases the write lock whoever holds it, if the lock is in write mode (as Redisson's
    /// write lock does), with the writer's read holds, and publishes `1`. Returns whether it
    /// released anything. The old holder's guards then get [`Error::NotHeld`] from `unlock`.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.shared.force_unlock("write").await
    }

    /// Whether the lock is in write mode.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.shared.mode().await?.as_deref() == Some("write"))
    }

    /// Whether this handle's owner (set with [`with_owner`](WriteLock::with_owner)) holds the
    /// write lock; `false` for a handle without an owner scope.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    pub async fn is_held_by_current_owner(&self) -> Result<bool> {
        Ok(self.hold_count().await? > 0)
    }

    /// How many times this handle's owner holds the write lock (0: not at all, and always 0
    /// for a handle without an owner scope).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    pub async fn hold_count(&self) -> Result<u64> {
        let Some(owner) = self.owner else {
            self.shared.client.validate_name(&self.shared.name)?;
            return Ok(0);
        };
        let owner = self.shared.client.owner_id(owner);
        self.shared.count(&write_field(owner)).await
    }

    /// The time left on the lock's hash; `None` when it is free.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::NoTtl`] for a key without an expiry, Redis errors.
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.shared.remaining_ttl().await
    }
}

fn lock(intent: &Mutex<IntentGuard>) -> std::sync::MutexGuard<'_, IntentGuard> {
    intent.lock().unwrap_or_else(PoisonError::into_inner)
}

#[async_trait]
impl DistributedLock for WriteLock {
    fn name(&self) -> &str {
        &self.shared.name
    }

    async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        WriteLock::acquire(self, options).await
    }

    async fn is_locked(&self) -> Result<bool> {
        WriteLock::is_locked(self).await
    }

    async fn force_unlock(&self) -> Result<bool> {
        WriteLock::force_unlock(self).await
    }
}
