//! `RwLock`: the handle on one read-write lock name.

use std::sync::Arc;
use std::time::Duration;

use keylatch_core::{LockGuard, Owner, Result};

use keylatch_redis::Client;

use crate::read::ReadLock;
use crate::shared::Shared;
use crate::write::{DEFAULT_WRITER_INTENT_TIMEOUT, WriteLock};

/// A distributed read-write lock, compatible with Redisson's `RReadWriteLock`: many readers or
/// one writer.
///
/// - **Sharing and exclusion**: any number of owners hold the read lock at once, or one owner
///   holds the write lock, across every process using the name.
/// - **Reentrancy**: explicit, per [`Owner`]: by default every acquisition is a new owner (two
///   acquisitions exclude each other even inside one task); acquisitions for one owner
///   (`with_owner(guard.owner())`, or an owner scope) re-enter. The writer may take the read
///   lock for its own owner too (**downgrade**: after its write unlock, its reads remain). A reader asking for the write lock gets
///   [`Error::UpgradeRefused`](keylatch_core::Error::UpgradeRefused) at once, never a
///   deadlock: release the read lock first.
/// - **Fairness**: no writer starvation. While a writer waits, new readers wait behind it;
///   readers that already hold the lock (re-entering) and the writer itself pass. Otherwise
///   there is no FIFO order, and a steady stream of writers keeps readers waiting (writer
///   preference). Do not make a read holder wait for another task that needs a *new* read hold
///   on the same lock: with a writer waiting in between, that deadlocks (as with any
///   writer-preferring lock, tokio's included).
/// - **Leases**: without a lease the hold is in watchdog mode (the client's watchdog timeout,
///   renewed every third of it while the guard lives); with one it ends after the lease. Each
///   read hold has its own expiry key, and the watchdog renews only this client's read holds,
///   so a crashed reader's hold ends on time even while other readers keep the lock. A guard
///   changes its hold's lease with [`LockGuard::extend`], [`set_lease`](LockGuard::set_lease)
///   and [`watchdog`](LockGuard::watchdog): a read guard changes all of its owner's read holds
///   (and a shortened one ends while other readers keep theirs); a write guard never sets the
///   lock's expiry below its owner's own read holds.
///
/// `read`/`write`/`try_read`/`try_write` are shortcuts in tokio's naming;
/// [`read_lock`](RwLock::read_lock) and [`write_lock`](RwLock::write_lock) return the two sides
/// as lock handles with the reentrant lock's full set of methods (leases, bounded waits, hold
/// counts) and the shared
/// [`DistributedLock`](keylatch_core::DistributedLock) trait.
///
/// Layout (Redisson's): hash `name` with `mode` = `read`/`write`, `<owner-id>` → read count,
/// `<owner-id>:write` → write count; one string `{name}:<owner-id>:rwlock_timeout:<n>` per read
/// hold with its own PEXPIRE; the hash's PEXPIRE = the longest hold; channel
/// `redisson_rwlock:{name}`, messages `0` (last reader gone) and `1` (writer gone). keylatch
/// adds the zset `{name}:write_intent` of waiting writers.
///
/// ```no_run
/// # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
/// let cache = client.rw_lock("product-cache");
/// {
///     let read = cache.read().await?; // many readers at once
///     // serve from the cache
///     read.unlock().await?;
/// }
/// let write = cache.write().await?; // alone: no reader, no other writer
/// // rebuild the cache
/// write.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RwLock {
    shared: Arc<Shared>,
    owner: Option<Owner>,
    intent_timeout: Duration,
    fencing: bool,
}

impl RwLock {
    /// A handle on the read-write lock `name`. Nothing is sent to Redis; a bad name is reported
    /// by the first operation ([`Error::InvalidName`](keylatch_core::Error::InvalidName)).
    pub fn new(client: &Client, name: &str) -> RwLock {
        RwLock {
            shared: Shared::new(client, &client.key_name(name)),
            owner: None,
            intent_timeout: DEFAULT_WRITER_INTENT_TIMEOUT,
            fencing: false,
        }
    }

    /// A handle whose acquisitions, on both sides, are all for `owner`: they re-enter each
    /// other's holds, and its write holder may also read (downgrade). See [`Owner`]. The handle
    /// it is called on keeps its own setting.
    #[must_use]
    pub fn with_owner(&self, owner: Owner) -> Self {
        RwLock {
            owner: Some(owner),
            ..self.clone()
        }
    }

    /// Fencing tokens on the write side: see [`WriteLock::with_fencing`].
    #[must_use]
    pub fn with_fencing(&self, enabled: bool) -> Self {
        let mut handle = self.clone();
        handle.fencing = enabled;
        handle
    }

    /// See [`WriteLock::with_writer_intent_timeout`] (default 5 s).
    #[must_use]
    pub fn with_writer_intent_timeout(&self, timeout: Duration) -> Self {
        let mut handle = self.clone();
        handle.intent_timeout = timeout;
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

    /// The zset of waiting writers, `{name}:write_intent` (keylatch's addition to the layout).
    pub fn writer_intent_key(&self) -> &str {
        &self.shared.intent_key
    }

    /// The read side, as a lock handle.
    pub fn read_lock(&self) -> ReadLock {
        ReadLock::new(self.shared.clone(), self.owner)
    }

    /// The write side, as a lock handle.
    pub fn write_lock(&self) -> WriteLock {
        WriteLock::new(self.shared.clone(), self.owner, self.intent_timeout)
            .with_fencing(self.fencing)
    }

    /// Takes a read hold, waiting as long as it takes (watchdog mode).
    ///
    /// # Errors
    /// As [`ReadLock::lock`].
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind; a request already sent is undone.
    pub async fn read(&self) -> Result<LockGuard> {
        self.read_lock().lock().await
    }

    /// Takes the write hold, waiting as long as it takes (watchdog mode).
    ///
    /// # Errors
    /// As [`WriteLock::lock`], including
    /// [`Error::UpgradeRefused`](keylatch_core::Error::UpgradeRefused) for a reader.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind; a request already sent is undone and the writer's
    /// intent is withdrawn.
    pub async fn write(&self) -> Result<LockGuard> {
        self.write_lock().lock().await
    }

    /// Tries once to take a read hold; `None` when a writer holds the lock or waits for it.
    ///
    /// # Errors
    /// As [`ReadLock::lock`].
    ///
    /// # Cancel safety
    /// As [`read`](RwLock::read).
    pub async fn try_read(&self) -> Result<Option<LockGuard>> {
        self.read_lock().try_lock().await
    }

    /// Tries once to take the write hold; `None` when anyone else holds the lock.
    ///
    /// # Errors
    /// As [`WriteLock::lock`].
    ///
    /// # Cancel safety
    /// As [`write`](RwLock::write).
    pub async fn try_write(&self) -> Result<Option<LockGuard>> {
        self.write_lock().try_lock().await
    }

    /// Whether anyone holds the lock, for reading or writing.
    ///
    /// # Errors
    /// [`Error::InvalidName`](keylatch_core::Error::InvalidName),
    /// [`Error::WrongType`](keylatch_core::Error::WrongType), Redis errors.
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.shared.mode().await?.is_some())
    }

    /// Releases every hold, read or write, whoever holds them, and wakes the waiters. Returns
    /// whether anything was held.
    ///
    /// # Errors
    /// [`Error::InvalidName`](keylatch_core::Error::InvalidName),
    /// [`Error::WrongType`](keylatch_core::Error::WrongType), Redis errors.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.shared.force_unlock("any").await
    }
}
