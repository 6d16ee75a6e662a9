//! The facade's counting semaphore, on either store: Redisson's `RSemaphore` on Redis,
//! Curator's `InterProcessSemaphoreV2` on ZooKeeper (the maximum from
//! [`with_permits`](Semaphore::with_permits), as Curator's `maxLeases`); and the lock over
//! either semaphore that both semaphore handles share.
//!
//! May import: `store.rs`, `permit.rs`, `zk_semaphore.rs`, `future.rs`, keylatch-semaphore.

use std::time::Duration;

use keylatch_core::{AcquireOptions, Error, Result};

use crate::permit::SemaphorePermit;
use crate::store::{Inner, Store, refused_on_zookeeper};
use crate::zk_semaphore::{ZkSem, reason};

/// `DistributedLock` for a facade semaphore's lock (a tuple struct over [`Inner`] of the
/// Redis lock and [`ZkSemLock`]).
macro_rules! semaphore_lock {
    ($ty:ident, $redis:ty, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Debug)]
        pub struct $ty(pub(crate) $crate::store::Inner<$redis, $crate::zk_semaphore::ZkSemLock>);

        impl $ty {
            /// The Redis layer's lock, when the store is Redis.
            pub fn as_redis(&self) -> Option<&$redis> {
                match &self.0 {
                    $crate::store::Inner::Redis(redis) => Some(redis),
                    $crate::store::Inner::ZooKeeper(_) => None,
                }
            }
        }

        #[async_trait::async_trait]
        impl $crate::DistributedLock for $ty {
            fn name(&self) -> &str {
                match &self.0 {
                    $crate::store::Inner::Redis(redis) => $crate::DistributedLock::name(redis),
                    $crate::store::Inner::ZooKeeper(zk) => zk.name(),
                }
            }

            fn release_channel(&self) -> Option<(&(dyn std::any::Any + Send + Sync), &str)> {
                match &self.0 {
                    $crate::store::Inner::Redis(redis) => {
                        $crate::DistributedLock::release_channel(redis)
                    }
                    $crate::store::Inner::ZooKeeper(_) => None,
                }
            }

            async fn acquire(
                &self,
                options: $crate::AcquireOptions,
            ) -> $crate::Result<Option<$crate::LockGuard>> {
                match &self.0 {
                    $crate::store::Inner::Redis(redis) => {
                        $crate::DistributedLock::acquire(redis, options).await
                    }
                    $crate::store::Inner::ZooKeeper(zk) => zk.acquire(options).await,
                }
            }

            async fn is_locked(&self) -> $crate::Result<bool> {
                match &self.0 {
                    $crate::store::Inner::Redis(redis) => {
                        $crate::DistributedLock::is_locked(redis).await
                    }
                    $crate::store::Inner::ZooKeeper(zk) => zk.is_locked().await,
                }
            }

            async fn force_unlock(&self) -> $crate::Result<bool> {
                match &self.0 {
                    $crate::store::Inner::Redis(redis) => {
                        $crate::DistributedLock::force_unlock(redis).await
                    }
                    $crate::store::Inner::ZooKeeper(zk) => zk.force_unlock().await,
                }
            }
        }
    };
}

pub(crate) use semaphore_lock;

/// Redisson's `RSemaphore` (`client.semaphore(name)`): a counting semaphore.
///
/// - On Redis, [`keylatch_semaphore::Semaphore`]: the count lives in Redis; see it for the
///   rules.
/// - On ZooKeeper, Curator's `InterProcessSemaphoreV2` (keylatch-zookeeper's `ZkSemaphore`):
///   each permit is an ephemeral lease node, held until released or until its session ends;
///   the maximum is not stored but given by each client, as Curator's `maxLeases`, with
///   [`with_permits`](Semaphore::with_permits) (without it an acquisition is
///   [`Error::InvalidPermits`]). Acquisitions (one permit each), releasing a permit,
///   [`available_permits`](Semaphore::available_permits), [`exists`](Semaphore::exists) and
///   [`as_lock`](Semaphore::as_lock) work; what has no form there (setting or draining the
///   count, releasing by count, leases, time to live, deleting) answers
///   [`Error::Unsupported`] and writes nothing.
#[derive(Clone, Debug)]
pub struct Semaphore(Inner<keylatch_semaphore::Semaphore, ZkSem>);

/// What a wrapped acquisition answers, on either store.
type Acquired = Result<Option<SemaphorePermit>>;

fn refused(operation: &'static str, reason: &'static str) -> Error {
    Error::Unsupported {
        primitive: "zookeeper semaphore",
        operation,
        reason,
    }
}

impl Semaphore {
    pub(crate) fn on(store: &Store, name: &str) -> Semaphore {
        Semaphore(match store {
            Store::Redis(client) => Inner::Redis(keylatch_semaphore::Semaphore::new(client, name)),
            Store::ZooKeeper(zk) => Inner::ZooKeeper(ZkSem::new(zk, name)),
        })
    }

    /// The Redis layer's handle, when the store is Redis.
    pub fn as_redis(&self) -> Option<&keylatch_semaphore::Semaphore> {
        match &self.0 {
            Inner::Redis(redis) => Some(redis),
            Inner::ZooKeeper(_) => None,
        }
    }

    /// The same semaphore with `permits` permits: on Redis, set up again with them when found
    /// missing (see [`keylatch_semaphore::Semaphore::with_permits`]); on ZooKeeper, the
    /// maximum held at once (Curator's `maxLeases`; every client of the name should give the
    /// same).
    #[must_use]
    pub fn with_permits(&self, permits: u32) -> Self {
        Semaphore(match &self.0 {
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
        match &self.0 {
            Inner::Redis(redis) => redis.channel(),
            Inner::ZooKeeper(_) => "",
        }
    }

    /// The semaphore as a lock: one permit per guard.
    pub fn as_lock(&self) -> SemaphoreLock {
        SemaphoreLock(match &self.0 {
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
        /// Takes every free permit; returns how many.
        fn drain_permits(&self) -> u64, reason::COUNT;
        /// Gives `permits` back, by count.
        fn release(&self, permits: u32) -> (), reason::BY_ID;
        /// Gives `permits` back only if the semaphore still exists.
        fn release_if_exists(&self, permits: u32) -> bool, reason::BY_ID;
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
    /// [`Error::InvalidPermits`] on ZooKeeper without [`with_permits`](Semaphore::with_permits);
    /// store errors.
    pub async fn available_permits(&self) -> Result<u64> {
        match &self.0 {
            Inner::Redis(redis) => crate::future::boxed(redis.available_permits()).await,
            Inner::ZooKeeper(zk) => zk.available().await,
        }
    }

    /// Whether the semaphore exists: on ZooKeeper, whether any permit is held (it keeps nothing
    /// else in the store).
    ///
    /// # Errors
    /// Store errors.
    pub async fn exists(&self) -> Result<bool> {
        match &self.0 {
            Inner::Redis(redis) => crate::future::boxed(redis.exists()).await,
            Inner::ZooKeeper(zk) => Ok(zk.held().await? > 0),
        }
    }

    /// Waits for a permit as long as it takes.
    ///
    /// # Errors
    /// As [`acquire_with`](Semaphore::acquire_with).
    ///
    /// # Cancel safety
    /// As [`acquire_with`](Semaphore::acquire_with).
    pub async fn acquire(&self) -> Result<SemaphorePermit> {
        match &self.0 {
            Inner::Redis(redis) => crate::future::boxed(redis.acquire())
                .await
                .map(SemaphorePermit::redis),
            Inner::ZooKeeper(zk) => {
                keylatch_core::unbounded(zk_acquire(zk, AcquireOptions::new()).await)
            }
        }
    }

    /// Waits for a permit; this process gives it back after `lease`.
    ///
    /// # Errors
    /// On ZooKeeper, [`Error::Unsupported`] (writing nothing); as
    /// [`acquire_with`](Semaphore::acquire_with).
    ///
    /// # Cancel safety
    /// As [`acquire_with`](Semaphore::acquire_with).
    pub async fn acquire_with_lease(&self, lease: Duration) -> Result<SemaphorePermit> {
        match &self.0 {
            Inner::Redis(redis) => crate::future::boxed(redis.acquire_with_lease(lease))
                .await
                .map(SemaphorePermit::redis),
            Inner::ZooKeeper(_) => Err(refused("acquire_with_lease", reason::LEASE)),
        }
    }

    /// Takes a permit if one is free now.
    ///
    /// # Errors
    /// As [`acquire_with`](Semaphore::acquire_with).
    ///
    /// # Cancel safety
    /// As [`acquire_with`](Semaphore::acquire_with).
    pub async fn try_acquire(&self) -> Acquired {
        match &self.0 {
            Inner::Redis(redis) => Ok(crate::future::boxed(redis.try_acquire())
                .await?
                .map(SemaphorePermit::redis)),
            Inner::ZooKeeper(zk) => {
                zk_acquire(zk, AcquireOptions::new().with_wait(Duration::ZERO)).await
            }
        }
    }

    /// Waits up to `wait` for a permit; with `lease`, this process gives it back then (Redis
    /// only).
    ///
    /// # Errors
    /// On ZooKeeper, [`Error::Unsupported`] with a `lease` (writing nothing); as
    /// [`acquire_with`](Semaphore::acquire_with).
    ///
    /// # Cancel safety
    /// As [`acquire_with`](Semaphore::acquire_with).
    pub async fn try_acquire_for(&self, wait: Duration, lease: Option<Duration>) -> Acquired {
        match &self.0 {
            Inner::Redis(redis) => Ok(crate::future::boxed(redis.try_acquire_for(wait, lease))
                .await?
                .map(SemaphorePermit::redis)),
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
    /// [`Error::InvalidPermits`] without [`with_permits`](Semaphore::with_permits) and
    /// [`Error::Unsupported`] for a lease (both before anything is written);
    /// [`Error::Closed`]; store errors.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped acquisition leaves no permit taken and (on ZooKeeper) no lease
    /// node behind.
    pub async fn acquire_with(&self, options: AcquireOptions) -> Acquired {
        match &self.0 {
            Inner::Redis(redis) => Ok(crate::future::boxed(redis.acquire_with(options))
                .await?
                .map(SemaphorePermit::redis)),
            Inner::ZooKeeper(zk) => zk_acquire(zk, options).await,
        }
    }

    /// Waits for `permits` permits at once, as `options` say (on ZooKeeper, one only).
    ///
    /// # Errors
    /// On ZooKeeper, [`Error::Unsupported`] for more than one permit (writing nothing); as
    /// [`acquire_with`](Semaphore::acquire_with).
    ///
    /// # Cancel safety
    /// As [`acquire_with`](Semaphore::acquire_with).
    pub async fn acquire_many(&self, permits: u32, options: AcquireOptions) -> Acquired {
        match &self.0 {
            Inner::Redis(redis) => Ok(crate::future::boxed(redis.acquire_many(permits, options))
                .await?
                .map(SemaphorePermit::redis)),
            Inner::ZooKeeper(_) if permits != 1 => Err(refused("acquire_many", reason::MANY)),
            Inner::ZooKeeper(zk) => zk_acquire(zk, options).await,
        }
    }
}

/// One permit of `zk`'s semaphore, as the facade's permit.
async fn zk_acquire(zk: &ZkSem, options: AcquireOptions) -> Acquired {
    Ok(zk.acquire(options).await?.map(SemaphorePermit::zookeeper))
}

semaphore_lock!(
    SemaphoreLock,
    keylatch_semaphore::SemaphoreLock,
    "A [`Semaphore`] behind the shared [`DistributedLock`](crate::DistributedLock) trait: each guard is one permit (on ZooKeeper, one lease node; `is_locked` is whether every permit is taken, `force_unlock` is unsupported)."
);
