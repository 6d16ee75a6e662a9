//! `ReadLock`: the read side of a read-write lock.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::{
    AcquireOptions, Attempt, DistributedLock, Error, HoldKey, LockGuard, Owner, OwnerId, Renewal,
    Result, UndoGuard, lease_millis, validate_lease,
};
use keylatch_redis::WakeMode;
use keylatch_redis::redis::Value;
use tokio::time::Instant;

use crate::release::write_field;
use crate::scripts::{READ_ACQUIRE, READ_RENEW};
use crate::shared::Shared;

/// The read side of a [`RwLock`](crate::RwLock), from
/// [`RwLock::read_lock`](crate::RwLock::read_lock): the same methods as the reentrant lock, and
/// the shared [`DistributedLock`] trait.
///
/// - **Sharing**: any number of owners may hold the read lock at once, in any number of
///   processes, while no one holds the write lock.
/// - **Reentrancy**: per [`Owner`], when asked for (`with_owner`); by default each acquisition
///   is a new owner. Each acquisition is one hold with its own guard and its own expiry key.
///   The owner of the write lock may take the read lock too (downgrade:
///   `read_lock().with_owner(write_guard.owner())`).
/// - **Fairness**: a new reader waits while a keylatch writer is waiting (no writer
///   starvation); an owner that already holds a read hold, or the write hold, re-enters at
///   once. Among readers and writers there is no FIFO order.
/// - **Leases**: each read hold expires on its own (`{name}:<owner-id>:rwlock_timeout:<n>`);
///   in watchdog mode the client renews only its own owners' holds, so a crashed reader's hold
///   ends after its lease even while other readers keep the lock. The hash lives as long as
///   its longest hold. A guard's `extend`, `set_lease` and `watchdog` change the leases of all
///   its owner's read holds on this lock, and the hash's expiry follows (a shortened lease
///   ends this owner's hold, not another reader's).
#[derive(Clone, Debug)]
pub struct ReadLock {
    shared: Arc<Shared>,
    owner: Option<Owner>,
}

impl ReadLock {
    pub(crate) fn new(shared: Arc<Shared>, owner: Option<Owner>) -> ReadLock {
        ReadLock { shared, owner }
    }

    /// A handle whose acquisitions are all for `owner`: they re-enter each other's holds
    /// (see [`Owner`]). The writer downgrades by taking a read hold for its
    /// own owner: `rw.read_lock().with_owner(write_guard.owner())`. The handle it is called on keeps its own setting.
    #[must_use]
    pub fn with_owner(&self, owner: Owner) -> Self {
        ReadLock {
            owner: Some(owner),
            ..self.clone()
        }
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
        try_lock: "Tries once; watchdog mode. `None` when a writer holds the lock or is waiting for it.",
        try_lock_for: "Waits at most `wait`; `lease` of `None` means watchdog mode.",
    }

    /// Acquires with `options`; `None` when the wait bound passed first.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], [`Error::NoTtl`] (the key is held without
    /// an expiry: waiting would never end), Redis errors;
    /// [`Error::InvalidLease`] for a lease out of range.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind; a request already sent is undone.
    pub async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        self.shared.client.validate_name(&self.shared.name)?;
        let (lease, renewal) = match options.lease() {
            Some(lease) => {
                validate_lease(lease)?;
                (lease, Renewal::Lease)
            }
            None => (
                self.shared.client.config().watchdog_timeout,
                READ_RENEW.renewal(),
            ),
        };
        let owner = self.shared.client.owner_id(Owner::or_unique(self.owner));
        // The hold's name, formatted once for every attempt, the undo and the registration.
        let hold_key = HoldKey::new(&self.shared.name, owner);
        let write_field = write_field(owner);
        let deadline = options.deadline();
        keylatch_redis::wait_for(
            &self.shared.client,
            "read",
            Some(owner),
            &self.shared.channel,
            WakeMode::All,
            deadline,
            || self.attempt(owner, &hold_key, &write_field, lease, renewal),
        )
        .await
    }

    async fn attempt(
        &self,
        owner: OwnerId,
        hold_key: &HoldKey,
        write_field: &str,
        lease: Duration,
        renewal: Renewal,
    ) -> Result<Attempt<LockGuard>> {
        let shared = &*self.shared;
        let field = hold_key.field();
        let watchdog = shared.client.watchdog();
        watchdog.settled(&shared.name, field).await;
        let expected = watchdog.local_count(&shared.name, field) as u64 + 1;
        let undo = UndoGuard::arm_for_key(
            shared.client.background(),
            shared.read_release.clone(),
            owner,
            expected,
            hold_key,
        );
        let call = READ_ACQUIRE
            .call()
            .key(&*shared.name)
            .key(&*shared.intent_key)
            .arg(lease_millis(lease))
            .arg(field)
            .arg(write_field);
        let sent_at = Instant::now();
        match shared.send(&call, undo).await? {
            Value::Nil => {
                let hold = watchdog.register(hold_key.clone(), lease, renewal, sent_at);
                Ok(Attempt::Done(
                    LockGuard::new(
                        shared.client.background().clone(),
                        shared.name.clone(),
                        owner,
                        shared.read_release.clone(),
                        hold,
                        None,
                    )
                    .extendable(shared.read_release.clone()),
                ))
            }
            Value::Int(-1) => Err(Error::NoTtl {
                key: shared.name.to_string(),
            }),
            Value::Int(wait) if wait >= 0 => Ok(Attempt::Retry(Some(Duration::from_millis(
                wait.unsigned_abs(),
            )))),
            _ => Err(Error::UnexpectedReply {
                what: "rwlock_read_acquire",
            }),
        }
    }

    /// Releases every read hold, whoever holds them, if the lock is in read mode (as
    /// Redisson's read lock does), deleting their expiry keys, and publishes `0`. Returns
    /// whether it released anything. Their guards then get [`Error::NotHeld`] from `unlock`.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.shared.force_unlock("read").await
    }

    /// Whether the lock is in read mode (as Redisson's read lock answers; a writer that also
    /// holds read holds keeps the lock in write mode).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.shared.mode().await?.as_deref() == Some("read"))
    }

    /// Whether this handle's owner (set with [`with_owner`](ReadLock::with_owner)) holds a read
    /// hold; `false` for a handle without an owner scope.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    pub async fn is_held_by_current_owner(&self) -> Result<bool> {
        Ok(self.hold_count().await? > 0)
    }

    /// How many read holds this handle's owner has (0: none, and always 0 for a handle
    /// without an owner scope).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    pub async fn hold_count(&self) -> Result<u64> {
        let Some(owner) = self.owner else {
            self.shared.client.validate_name(&self.shared.name)?;
            return Ok(0);
        };
        self.shared.count(&self.shared.field(owner)).await
    }

    /// The time left on the lock's hash (the longest of its holds); `None` when it is free.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::NoTtl`] for a key without an expiry, Redis errors.
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.shared.remaining_ttl().await
    }
}

#[async_trait]
impl DistributedLock for ReadLock {
    fn name(&self) -> &str {
        &self.shared.name
    }

    async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        ReadLock::acquire(self, options).await
    }

    async fn is_locked(&self) -> Result<bool> {
        ReadLock::is_locked(self).await
    }

    async fn force_unlock(&self) -> Result<bool> {
        ReadLock::force_unlock(self).await
    }
}
