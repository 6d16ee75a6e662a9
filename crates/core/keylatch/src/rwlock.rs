//! The facade's read-write lock and its two sides, for both stores. On ZooKeeper: Curator's
//! `InterProcessReadWriteLock`.
//!
//! May import: `future.rs`, `store.rs`, `zk.rs`, keylatch-rwlock.

use std::time::Duration;

use keylatch_core::{LockGuard, Owner, Result};

use crate::future::boxed;
use crate::store::{Inner, Store, redis_only_async, store_handle};
use crate::zk::{ZkRw, ZkSide};

/// Redisson's `RReadWriteLock` (`client.rw_lock(name)`): many readers or one writer; a waiting
/// writer holds new readers back. On Redis it is [`keylatch_rwlock::RwLock`]; on ZooKeeper,
/// Curator's `InterProcessReadWriteLock` (fixed leases and the Redis-layout reads answer
/// [`Error::Unsupported`](crate::Error::Unsupported) there).
///
/// ```no_run
/// # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
/// let lock = client.rw_lock("price-cache");
/// let reading = lock.read().await?;
/// reading.unlock().await?;
/// let writing = lock.write().await?;
/// writing.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RwLock(RwInner<keylatch_rwlock::RwLock>);

/// The read side of an [`RwLock`], as a lock handle.
#[derive(Clone, Debug)]
pub struct ReadLock(RwInner<keylatch_rwlock::ReadLock, ZkSide>);

/// The write side of an [`RwLock`], as a lock handle.
#[derive(Clone, Debug)]
pub struct WriteLock(RwInner<keylatch_rwlock::WriteLock, ZkSide>);

type RwInner<R, Z = ZkRw> = Inner<R, Z>;

impl RwLock {
    pub(crate) fn on(store: &Store, name: &str) -> RwLock {
        RwLock(match store {
            Store::Redis(redis) => RwInner::Redis(keylatch_rwlock::RwLock::new(redis, name)),
            Store::ZooKeeper(zk) => RwInner::ZooKeeper(ZkRw::new(zk, name)),
        })
    }

    /// The Redis layer's handle, when the store is Redis.
    pub fn as_redis(&self) -> Option<&keylatch_rwlock::RwLock> {
        match &self.0 {
            RwInner::Redis(redis) => Some(redis),
            RwInner::ZooKeeper(_) => None,
        }
    }

    /// The same lock, acquiring for `owner` (both sides).
    #[must_use]
    pub fn with_owner(&self, owner: Owner) -> Self {
        RwLock(match &self.0 {
            RwInner::Redis(redis) => RwInner::Redis(redis.with_owner(owner)),
            RwInner::ZooKeeper(zk) => RwInner::ZooKeeper(zk.with_owner(owner)),
        })
    }

    /// The same lock, issuing a fencing token with each write acquisition when `enabled` (on
    /// ZooKeeper every acquisition has one: its node's creation zxid).
    #[must_use]
    pub fn with_fencing(&self, enabled: bool) -> Self {
        match &self.0 {
            RwInner::Redis(redis) => RwLock(RwInner::Redis(redis.with_fencing(enabled))),
            RwInner::ZooKeeper(_) => self.clone(),
        }
    }

    /// The same lock, with `timeout` for how long a waiting writer's intent holds new readers
    /// back without being refreshed (Redis; on ZooKeeper a writer's node does that as long as
    /// its session lasts).
    #[must_use]
    pub fn with_writer_intent_timeout(&self, timeout: Duration) -> Self {
        match &self.0 {
            RwInner::Redis(redis) => {
                RwLock(RwInner::Redis(redis.with_writer_intent_timeout(timeout)))
            }
            RwInner::ZooKeeper(_) => self.clone(),
        }
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        match &self.0 {
            RwInner::Redis(redis) => redis.name(),
            RwInner::ZooKeeper(zk) => zk.name(),
        }
    }

    /// The pub/sub channel (Redis); on ZooKeeper, empty.
    pub fn channel(&self) -> &str {
        match &self.0 {
            RwInner::Redis(redis) => redis.channel(),
            RwInner::ZooKeeper(_) => "",
        }
    }

    /// The writers' intent key (Redis); on ZooKeeper, empty.
    pub fn writer_intent_key(&self) -> &str {
        match &self.0 {
            RwInner::Redis(redis) => redis.writer_intent_key(),
            RwInner::ZooKeeper(_) => "",
        }
    }

    /// The read side, as a lock handle.
    pub fn read_lock(&self) -> ReadLock {
        ReadLock(match &self.0 {
            RwInner::Redis(redis) => RwInner::Redis(redis.read_lock()),
            RwInner::ZooKeeper(zk) => RwInner::ZooKeeper(zk.side(false)),
        })
    }

    /// The write side, as a lock handle.
    pub fn write_lock(&self) -> WriteLock {
        WriteLock(match &self.0 {
            RwInner::Redis(redis) => RwInner::Redis(redis.write_lock()),
            RwInner::ZooKeeper(zk) => RwInner::ZooKeeper(zk.side(true)),
        })
    }

    /// Takes a read hold, waiting as long as it takes (watchdog mode on Redis).
    ///
    /// # Errors
    /// As [`ReadLock::acquire`].
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind.
    pub async fn read(&self) -> Result<LockGuard> {
        self.read_lock().lock().await
    }

    /// Takes the write hold, waiting as long as it takes.
    ///
    /// # Errors
    /// As [`WriteLock::acquire`], including
    /// [`Error::UpgradeRefused`](crate::Error::UpgradeRefused) for a reader.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind.
    pub async fn write(&self) -> Result<LockGuard> {
        self.write_lock().lock().await
    }

    /// Tries once to take a read hold.
    ///
    /// # Errors
    /// As [`read`](RwLock::read).
    ///
    /// # Cancel safety
    /// As [`read`](RwLock::read).
    pub async fn try_read(&self) -> Result<Option<LockGuard>> {
        self.read_lock().try_lock().await
    }

    /// Tries once to take the write hold.
    ///
    /// # Errors
    /// As [`write`](RwLock::write).
    ///
    /// # Cancel safety
    /// As [`write`](RwLock::write).
    pub async fn try_write(&self) -> Result<Option<LockGuard>> {
        self.write_lock().try_lock().await
    }

    /// Whether anyone holds the lock, for reading or writing.
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName), store errors.
    pub async fn is_locked(&self) -> Result<bool> {
        match &self.0 {
            RwInner::Redis(redis) => boxed(redis.is_locked()).await,
            RwInner::ZooKeeper(zk) => zk.is_locked().await,
        }
    }

    /// Releases every hold, read or write, whoever holds them. Returns whether anything was
    /// held.
    ///
    /// # Errors
    /// As [`is_locked`](RwLock::is_locked).
    pub async fn force_unlock(&self) -> Result<bool> {
        match &self.0 {
            RwInner::Redis(redis) => boxed(redis.force_unlock()).await,
            RwInner::ZooKeeper(zk) => {
                let read = zk.side(false).force_unlock().await?;
                let write = zk.side(true).force_unlock().await?;
                Ok(read || write)
            }
        }
    }
}

macro_rules! side {
    ($ty:ident, $redis:ty) => {
        store_handle!($ty, $redis,
            is_locked: "Whether the lock is in this side's mode: held for reading (the read side) or for writing (the write side; a writer that also holds read holds keeps the lock in write mode), on either store.",
            force_unlock: "Releases every hold of this side, whoever holds it.");

        impl $ty {
            /// The pub/sub channel (Redis); on ZooKeeper, empty.
            pub fn channel(&self) -> &str {
                match &self.0 {
                    RwInner::Redis(redis) => redis.channel(),
                    RwInner::ZooKeeper(_) => "",
                }
            }

            redis_only_async! { RwInner, "read-write lock";
                /// Whether the handle's owner holds this side.
                fn is_held_by_current_owner(&self) -> bool;
                /// How many times the handle's owner holds this side.
                fn hold_count(&self) -> u64;
                /// What is left of the lock's lease on the server.
                fn remaining_ttl(&self) -> Option<Duration>;
            }
        }
    };
}

side!(ReadLock, keylatch_rwlock::ReadLock);
side!(WriteLock, keylatch_rwlock::WriteLock);

impl WriteLock {
    /// The same side, issuing a fencing token with each acquisition when `enabled`.
    #[must_use]
    pub fn with_fencing(&self, enabled: bool) -> Self {
        match &self.0 {
            RwInner::Redis(redis) => WriteLock(RwInner::Redis(redis.with_fencing(enabled))),
            RwInner::ZooKeeper(_) => self.clone(),
        }
    }

    /// The same side, with `timeout` for a waiting writer's intent (Redis only; no effect on
    /// ZooKeeper).
    #[must_use]
    pub fn with_writer_intent_timeout(&self, timeout: Duration) -> Self {
        match &self.0 {
            RwInner::Redis(redis) => {
                WriteLock(RwInner::Redis(redis.with_writer_intent_timeout(timeout)))
            }
            RwInner::ZooKeeper(_) => self.clone(),
        }
    }
}
