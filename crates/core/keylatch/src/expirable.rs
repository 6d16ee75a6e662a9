//! The facade's permit-expirable semaphore, on either store: Redisson's
//! `RPermitExpirableSemaphore` on Redis; on ZooKeeper Curator's `InterProcessSemaphoreV2`,
//! whose permits come back when their holder's session ends (the maximum from
//! [`with_permits`](PermitExpirableSemaphore::with_permits)).
//!
//! May import: `store.rs`, `permit.rs`, `semaphore.rs` (its lock macro), `zk_semaphore.rs`,
//! `future.rs`, keylatch-semaphore.

use std::time::Duration;

use keylatch_core::{AcquireOptions, Error, Result};

use crate::permit::Permit;
use crate::semaphore::semaphore_lock;
use crate::store::{Inner, Store, refused_on_zookeeper};
use crate::zk_semaphore::{ZkSem, reason};

/// Redisson's `RPermitExpirableSemaphore` (`client.permit_expirable_semaphore(name)`): permits
/// with ids, which come back when their holder is gone.
///
/// - On Redis, [`keylatch_semaphore::PermitExpirableSemaphore`]: each permit has a lease,
///   renewed by the watchdog or fixed; see it for the rules.
/// - On ZooKeeper, Curator's `InterProcessSemaphoreV2` (as the facade's
///   [`Semaphore`](crate::Semaphore) there): each permit is an ephemeral lease node, held
///   until released or until its session ends, which is how a crashed holder's permit comes
///   back. The maximum is given by each client with
///   [`with_permits`](PermitExpirableSemaphore::with_permits) (without it an acquisition is
///   [`Error::InvalidPermits`]). Acquisitions without a lease (one permit each), releasing a
///   permit through its [`Permit`], the counts, [`exists`](PermitExpirableSemaphore::exists)
///   and [`as_lock`](PermitExpirableSemaphore::as_lock) work; setting the count, fixed leases,
///   releases and leases by id, adoption, time to live and deleting answer
///   [`Error::Unsupported`] and write nothing.
#[derive(Clone, Debug)]
pub struct PermitExpirableSemaphore(Inner<keylatch_semaphore::PermitExpirableSemaphore, ZkSem>);

/// What a wrapped acquisition answers, on either store.
type Acquired = Result<Option<Permit>>;

fn refused(operation: &'static str, reason: &'static str) -> Error {
    Error::Unsupported {
        primitive: "zookeeper semaphore",
        operation,
        reason,
    }
}

impl PermitExpirableSemaphore {
    pub(crate) fn on(store: &Store, name: &str) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore(match store {
            Store::Redis(client) => Inner::Redis(
                keylatch_semaphore::PermitExpirableSemaphore::new(client, name),
            ),
            Store::ZooKeeper(zk) => Inner::ZooKeeper(ZkSem::new(zk, name)),
        })
    }

    /// The Redis layer's handle, when the store is Redis.
    pub fn as_redis(&self) -> Option<&keylatch_semaphore::PermitExpirableSemaphore> {
        match &self.0 {
            Inner::Redis(redis) => Some(redis),
            Inner::ZooKeeper(_) => None,
        }
    }

    /// The same semaphore with `permits` permits: on Redis, set up again with them when found
    /// missing; on ZooKeeper, the maximum held at once (Curator's `maxLeases`).
    #[must_use]
    pub fn with_permits(&self, permits: u32) -> Self {
        PermitExpirableSemaphore(match &self.0 {
            Inner::Redis(redis) => Inner::Redis(redis.with_permits(permits)),
            Inner::ZooKeeper(zk) => Inner::ZooKeeper(zk.with_permits(permits)),
        })
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        match &self.0 {
            Inner::Redis(redis) => redis.name(),
            Inner::ZooKeeper(zk) => zk.name(),
        }
    }

    /// The pub/sub channel; on ZooKeeper, empty.
    pub fn channel(&self) -> &str {
        self.as_redis().map_or("", |redis| redis.channel())
    }

    /// The key of the permits' leases; on ZooKeeper, empty.
    pub fn timeout_key(&self) -> &str {
        self.as_redis().map_or("", |redis| redis.timeout_key())
    }

    /// The key of the total; on ZooKeeper, empty.
    pub fn total_key(&self) -> &str {
        self.as_redis().map_or("", |redis| redis.total_key())
    }

    /// The semaphore as a lock: one permit per guard.
    pub fn as_lock(&self) -> ExpirableSemaphoreLock {
        ExpirableSemaphoreLock(match &self.0 {
            Inner::Redis(redis) => Inner::Redis(redis.as_lock()),
            Inner::ZooKeeper(zk) => Inner::ZooKeeper(zk.as_lock()),
        })
    }

    refused_on_zookeeper! { "zookeeper semaphore";
        /// Sets the number of permits if the semaphore does not exist yet.
        fn try_set_permits(&self, permits: u32) -> bool, reason::COUNT;
        /// As `try_set_permits`, with a time to live for the semaphore.
        fn try_set_permits_with_ttl(&self, permits: u32, time_to_live: Duration) -> bool, reason::COUNT;
        /// Sets the number of permits, whatever it was.
        fn set_permits(&self, permits: u32) -> (), reason::COUNT;
        /// Adds `delta` permits (negative: removes).
        fn add_permits(&self, delta: i64) -> (), reason::COUNT;
        /// Releases the permit `id`.
        fn release(&self, id: &str) -> (), reason::BY_ID;
        /// Releases the permit `id`; whether it was held.
        fn try_release(&self, id: &str) -> bool, reason::BY_ID;
        /// Releases every id or none, naming the unknown ones.
        fn release_many(&self, ids: &[&str]) -> (), reason::BY_ID;
        /// Releases the ids it knows; how many.
        fn try_release_many(&self, ids: &[&str]) -> u64, reason::BY_ID;
        /// What is left of the lease of permit `id`.
        fn remaining_lease(&self, id: &str) -> Option<Duration>, reason::LEASE;
        /// Sets the lease of permit `id` anew.
        fn update_lease(&self, id: &str, lease: Duration) -> (), reason::LEASE;
        /// Deletes the semaphore.
        fn delete(&self) -> bool, reason::DELETE;
        /// Sets the semaphore's time to live.
        fn expire(&self, time_to_live: Duration) -> bool, reason::LEASE;
        /// Removes the semaphore's time to live.
        fn clear_expire(&self) -> bool, reason::LEASE;
    }

    /// The permits free now: on ZooKeeper, the maximum less the lease nodes there.
    ///
    /// # Errors
    /// [`Error::InvalidPermits`] on ZooKeeper without
    /// [`with_permits`](PermitExpirableSemaphore::with_permits); store errors.
    pub async fn available_permits(&self) -> Result<u64> {
        match &self.0 {
            Inner::Redis(redis) => crate::future::boxed(redis.available_permits()).await,
            Inner::ZooKeeper(zk) => zk.available().await,
        }
    }

    /// The permits taken now: on ZooKeeper, the lease nodes there.
    ///
    /// # Errors
    /// Store errors.
    pub async fn acquired_permits(&self) -> Result<u64> {
        match &self.0 {
            Inner::Redis(redis) => crate::future::boxed(redis.acquired_permits()).await,
            Inner::ZooKeeper(zk) => zk.held().await,
        }
    }

    /// The number of permits set, if the semaphore exists: on ZooKeeper, the maximum this
    /// handle was given.
    ///
    /// # Errors
    /// [`Error::InvalidPermits`] on ZooKeeper without
    /// [`with_permits`](PermitExpirableSemaphore::with_permits); store errors.
    pub async fn permits(&self) -> Result<Option<u64>> {
        match &self.0 {
            Inner::Redis(redis) => crate::future::boxed(redis.permits()).await,
            Inner::ZooKeeper(zk) => Ok(Some(u64::from(zk.max()?))),
        }
    }

    /// Whether the semaphore exists: on ZooKeeper, whether any permit is held.
    ///
    /// # Errors
    /// Store errors.
    pub async fn exists(&self) -> Result<bool> {
        match &self.0 {
            Inner::Redis(redis) => crate::future::boxed(redis.exists()).await,
            Inner::ZooKeeper(zk) => Ok(zk.held().await? > 0),
        }
    }

    /// Waits for a permit as long as it takes (on Redis, in watchdog mode; on ZooKeeper, held
    /// by the session).
    ///
    /// # Errors
    /// As [`acquire_with`](PermitExpirableSemaphore::acquire_with).
    ///
    /// # Cancel safety
    /// As [`acquire_with`](PermitExpirableSemaphore::acquire_with).
    pub async fn acquire(&self) -> Result<Permit> {
        match &self.0 {
            Inner::Redis(redis) => crate::future::boxed(redis.acquire())
                .await
                .map(Permit::redis),
            Inner::ZooKeeper(zk) => {
                keylatch_core::unbounded(zk_acquire(zk, AcquireOptions::new()).await)
            }
        }
    }

    /// Waits for a permit, held for `lease`.
    ///
    /// # Errors
    /// On ZooKeeper, [`Error::Unsupported`] (writing nothing); as
    /// [`acquire_with`](PermitExpirableSemaphore::acquire_with).
    ///
    /// # Cancel safety
    /// As [`acquire_with`](PermitExpirableSemaphore::acquire_with).
    pub async fn acquire_with_lease(&self, lease: Duration) -> Result<Permit> {
        match &self.0 {
            Inner::Redis(redis) => crate::future::boxed(redis.acquire_with_lease(lease))
                .await
                .map(Permit::redis),
            Inner::ZooKeeper(_) => Err(refused("acquire_with_lease", reason::LEASE)),
        }
    }

    /// Takes a permit if one is free now.
    ///
    /// # Errors
    /// As [`acquire_with`](PermitExpirableSemaphore::acquire_with).
    ///
    /// # Cancel safety
    /// As [`acquire_with`](PermitExpirableSemaphore::acquire_with).
    pub async fn try_acquire(&self) -> Acquired {
        match &self.0 {
            Inner::Redis(redis) => Ok(crate::future::boxed(redis.try_acquire())
                .await?
                .map(Permit::redis)),
            Inner::ZooKeeper(zk) => {
                zk_acquire(zk, AcquireOptions::new().with_wait(Duration::ZERO)).await
            }
        }
    }

    /// Waits up to `wait` for a permit, held for `lease` (or in watchdog mode).
    ///
    /// # Errors
    /// On ZooKeeper, [`Error::Unsupported`] with a `lease` (writing nothing); as
    /// [`acquire_with`](PermitExpirableSemaphore::acquire_with).
    ///
    /// # Cancel safety
    /// As [`acquire_with`](PermitExpirableSemaphore::acquire_with).
    pub async fn try_acquire_for(&self, wait: Duration, lease: Option<Duration>) -> Acquired {
        match &self.0 {
            Inner::Redis(redis) => Ok(crate::future::boxed(redis.try_acquire_for(wait, lease))
                .await?
                .map(Permit::redis)),
            Inner::ZooKeeper(_) if lease.is_some() => {
                Err(refused("try_acquire_for", reason::LEASE))
            }
            Inner::ZooKeeper(zk) => zk_acquire(zk, AcquireOptions::new().with_wait(wait)).await,
        }
    }

    /// Waits for a permit as `options` say; `None` when the wait bound passed first.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::InvalidLease`]; on ZooKeeper,
    /// [`Error::InvalidPermits`] without
    /// [`with_permits`](PermitExpirableSemaphore::with_permits) and [`Error::Unsupported`] for
    /// a lease (both before anything is written); [`Error::Closed`]; store errors.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped acquisition leaves no permit and (on ZooKeeper) no lease node
    /// behind.
    pub async fn acquire_with(&self, options: AcquireOptions) -> Acquired {
        match &self.0 {
            Inner::Redis(redis) => Ok(crate::future::boxed(redis.acquire_with(options))
                .await?
                .map(Permit::redis)),
            Inner::ZooKeeper(zk) => zk_acquire(zk, options).await,
        }
    }

    /// Waits for `permits` permits at once, as `options` say (on ZooKeeper, one only).
    ///
    /// # Errors
    /// On ZooKeeper, [`Error::Unsupported`] for more than one permit (writing nothing); as
    /// [`acquire_with`](PermitExpirableSemaphore::acquire_with).
    ///
    /// # Cancel safety
    /// As [`acquire_with`](PermitExpirableSemaphore::acquire_with).
    pub async fn acquire_many(
        &self,
        permits: u32,
        options: AcquireOptions,
    ) -> Result<Option<Vec<Permit>>> {
        match &self.0 {
            Inner::Redis(redis) => Ok(crate::future::boxed(redis.acquire_many(permits, options))
                .await?
                .map(|taken| taken.into_iter().map(Permit::redis).collect())),
            Inner::ZooKeeper(_) if permits != 1 => Err(refused("acquire_many", reason::MANY)),
            Inner::ZooKeeper(zk) => Ok(zk_acquire(zk, options).await?.map(|permit| vec![permit])),
        }
    }

    /// Takes over the permit `id` (hand-over by permit id).
    ///
    /// # Errors
    /// As the Redis layer's `adopt`; on ZooKeeper, [`Error::Unsupported`] (writing nothing).
    ///
    /// # Cancel safety
    /// As the Redis layer's `adopt`.
    pub async fn adopt(&self, id: &str) -> Acquired {
        match &self.0 {
            Inner::Redis(redis) => Ok(crate::future::boxed(redis.adopt(id))
                .await?
                .map(Permit::redis)),
            Inner::ZooKeeper(_) => Err(refused("adopt", reason::BY_ID)),
        }
    }
}

/// One permit of `zk`'s semaphore, as the facade's permit.
async fn zk_acquire(zk: &ZkSem, options: AcquireOptions) -> Acquired {
    Ok(zk.acquire(options).await?.map(Permit::zookeeper))
}

semaphore_lock!(
    ExpirableSemaphoreLock,
    keylatch_semaphore::ExpirableSemaphoreLock,
    "A [`PermitExpirableSemaphore`] behind the shared [`DistributedLock`](crate::DistributedLock) trait: each guard is one permit."
);
