//! The facade's permits, on either store: [`SemaphorePermit`] (the plain semaphore's) and
//! [`Permit`] (the permit-expirable semaphore's), each the Redis layer's permit or a
//! ZooKeeper lease node, with what both have.
//!
//! May import: keylatch-core, keylatch-semaphore, `zk_semaphore.rs`.

use std::time::Duration;

use keylatch_core::{Error, LockGuard, LossReason, Result};
use tokio::time::Instant;

use crate::zk_semaphore::{ZkSemPermit, reason};

#[derive(Debug)]
enum Held<R> {
    Redis(R),
    ZooKeeper(ZkSemPermit),
}

/// The parts both permit types have, forwarded to either store's permit.
macro_rules! common {
    ($redis:ty) => {
        /// The semaphore's name.
        pub fn semaphore_name(&self) -> &str {
            match &self.0 {
                Held::Redis(redis) => redis.semaphore_name(),
                Held::ZooKeeper(zk) => zk.semaphore_name(),
            }
        }

        /// The local instant until which the permit is known held, or `None` once it is lost
        /// (on ZooKeeper: as long as its session is known alive).
        pub fn valid_until(&self) -> Option<Instant> {
            match &self.0 {
                Held::Redis(redis) => redis.valid_until(),
                Held::ZooKeeper(zk) => zk.valid_until(),
            }
        }

        /// Whether the permit is lost (see [`lost`](Self::lost)).
        pub fn is_lost(&self) -> bool {
            match &self.0 {
                Held::Redis(redis) => redis.is_lost(),
                Held::ZooKeeper(zk) => zk.is_lost(),
            }
        }

        /// Why the permit is lost, or `None` while it is held.
        pub fn loss_reason(&self) -> Option<LossReason> {
            match &self.0 {
                Held::Redis(redis) => redis.loss_reason(),
                Held::ZooKeeper(zk) => zk.loss_reason(),
            }
        }

        /// Completes when the permit is no longer held: on Redis as the Redis permit says; on
        /// ZooKeeper when its session ends. The future owns what it needs.
        ///
        /// # Cancel safety
        /// Cancel safe.
        pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
            let lost: std::pin::Pin<Box<dyn Future<Output = ()> + Send>> = match &self.0 {
                Held::Redis(redis) => Box::pin(redis.lost()),
                Held::ZooKeeper(zk) => Box::pin(zk.lost()),
            };
            lost
        }

        /// Gives the permit back.
        ///
        /// # Errors
        /// On Redis, as the Redis permit's `release`; on ZooKeeper,
        /// [`Error::UnknownPermit`] when its lease node was already gone (the session ended),
        /// store errors.
        ///
        /// # Cancel safety
        /// A dropped release finishes in the background.
        pub async fn release(self) -> Result<()> {
            match self.0 {
                Held::Redis(redis) => crate::future::boxed(redis.release()).await,
                Held::ZooKeeper(zk) => crate::future::boxed(zk.release()).await,
            }
        }

        /// The permit as a plain [`LockGuard`] (for the shared lock trait).
        pub fn into_guard(self) -> LockGuard {
            match self.0 {
                Held::Redis(redis) => redis.into_guard(),
                Held::ZooKeeper(zk) => zk.into_guard(),
            }
        }

        /// The Redis layer's permit, when the store is Redis.
        pub fn as_redis(&self) -> Option<&$redis> {
            match &self.0 {
                Held::Redis(redis) => Some(redis),
                Held::ZooKeeper(_) => None,
            }
        }

        /// The Redis layer's permit, when the store is Redis; else the permit back.
        ///
        /// # Errors
        /// The permit itself, on ZooKeeper.
        // The permit comes back as it was (no box): the caller keeps holding it.
        #[allow(clippy::result_large_err)]
        pub fn into_redis(self) -> std::result::Result<$redis, Self> {
            match self.0 {
                Held::Redis(redis) => Ok(redis),
                zk @ Held::ZooKeeper(_) => Err(Self(zk)),
            }
        }

        /// keylatch-zookeeper's permit, when the store is ZooKeeper.
        #[cfg(feature = "zookeeper")]
        pub fn as_zookeeper(&self) -> Option<&keylatch_zookeeper::ZkPermit> {
            match &self.0 {
                Held::Redis(_) => None,
                Held::ZooKeeper(zk) => Some(zk),
            }
        }
    };
}

/// Permits taken from a [`Semaphore`](crate::Semaphore), given back when released or dropped.
///
/// On Redis, a [`keylatch_semaphore::SemaphorePermit`] (see it for the release, lease and
/// shutdown rules); on ZooKeeper, one lease node of Curator's `InterProcessSemaphoreV2`
/// (keylatch-zookeeper's `ZkPermit`), held until released, dropped, or until the client's
/// session ends.
#[must_use = "dropping a SemaphorePermit gives its permits back (in the background)"]
#[derive(Debug)]
pub struct SemaphorePermit(Held<keylatch_semaphore::SemaphorePermit>);

impl SemaphorePermit {
    pub(crate) fn redis(permit: keylatch_semaphore::SemaphorePermit) -> SemaphorePermit {
        SemaphorePermit(Held::Redis(permit))
    }

    pub(crate) fn zookeeper(permit: ZkSemPermit) -> SemaphorePermit {
        SemaphorePermit(Held::ZooKeeper(permit))
    }

    /// How many permits this holds (on ZooKeeper: one).
    pub fn permits(&self) -> u32 {
        match &self.0 {
            Held::Redis(redis) => redis.permits(),
            Held::ZooKeeper(_) => 1,
        }
    }

    /// The lease node's name on ZooKeeper; `None` on Redis (a plain semaphore's permits are a
    /// count, with no id).
    pub fn id(&self) -> Option<&str> {
        match &self.0 {
            Held::Redis(_) => None,
            Held::ZooKeeper(zk) => Some(zk.id()),
        }
    }

    /// Keeps the permits taken and returns how many: no release on drop. On Redis, give them
    /// back with [`Semaphore::release`](crate::Semaphore::release), from any process; on
    /// ZooKeeper the lease node stays until the client's session ends.
    pub fn forget(self) -> u32 {
        match self.0 {
            Held::Redis(redis) => redis.forget(),
            Held::ZooKeeper(zk) => {
                zk.forget();
                1
            }
        }
    }

    common!(keylatch_semaphore::SemaphorePermit);
}

/// One permit of a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore), held by
/// this process.
///
/// On Redis, a [`keylatch_semaphore::Permit`] (an id and a lease, renewed in watchdog mode);
/// on ZooKeeper, one lease node of Curator's `InterProcessSemaphoreV2`, held by the client's
/// session: a crashed holder's permit comes back when its session ends, with no lease to
/// change ([`extend`](Permit::extend), [`set_lease`](Permit::set_lease) and
/// [`watchdog`](Permit::watchdog) answer [`Error::Unsupported`] there).
#[must_use = "dropping a Permit gives it back (in the background)"]
#[derive(Debug)]
pub struct Permit(Held<keylatch_semaphore::Permit>);

/// What the lease methods of a ZooKeeper permit answer.
fn no_lease(operation: &'static str) -> Error {
    Error::Unsupported {
        primitive: "zookeeper semaphore",
        operation,
        reason: reason::LEASE,
    }
}

impl Permit {
    pub(crate) fn redis(permit: keylatch_semaphore::Permit) -> Permit {
        Permit(Held::Redis(permit))
    }

    pub(crate) fn zookeeper(permit: ZkSemPermit) -> Permit {
        Permit(Held::ZooKeeper(permit))
    }

    /// The permit id: 32 hex digits on Redis (as Redisson's), the lease node's name on
    /// ZooKeeper.
    pub fn id(&self) -> &str {
        match &self.0 {
            Held::Redis(redis) => redis.id(),
            Held::ZooKeeper(zk) => zk.id(),
        }
    }

    /// Adds `by` to the permit's lease (see [`keylatch_semaphore::Permit::extend`]).
    ///
    /// # Errors
    /// As the Redis permit's; on ZooKeeper, [`Error::Unsupported`] (no lease).
    ///
    /// # Cancel safety
    /// As the Redis permit's.
    pub async fn extend(&self, by: Duration) -> Result<()> {
        match &self.0 {
            Held::Redis(redis) => crate::future::boxed(redis.extend(by)).await,
            Held::ZooKeeper(_) => Err(no_lease("extend")),
        }
    }

    /// Sets what is left of the permit's lease (see [`keylatch_semaphore::Permit::set_lease`]).
    ///
    /// # Errors
    /// As [`extend`](Permit::extend).
    ///
    /// # Cancel safety
    /// As the Redis permit's.
    pub async fn set_lease(&mut self, lease: Duration) -> Result<()> {
        match &mut self.0 {
            Held::Redis(redis) => crate::future::boxed(redis.set_lease(lease)).await,
            Held::ZooKeeper(_) => Err(no_lease("set_lease")),
        }
    }

    /// Switches a fixed lease to watchdog mode (see [`keylatch_semaphore::Permit::watchdog`]).
    ///
    /// # Errors
    /// As [`extend`](Permit::extend).
    ///
    /// # Cancel safety
    /// As the Redis permit's.
    pub async fn watchdog(&mut self) -> Result<()> {
        match &mut self.0 {
            Held::Redis(redis) => crate::future::boxed(redis.watchdog()).await,
            Held::ZooKeeper(_) => Err(no_lease("watchdog")),
        }
    }

    /// Stops tracking the permit and returns its id: on Redis it stays taken until its lease
    /// ends or someone releases the id; on ZooKeeper its lease node stays until the client's
    /// session ends.
    pub fn forget(self) -> String {
        match self.0 {
            Held::Redis(redis) => redis.forget(),
            Held::ZooKeeper(zk) => zk.forget(),
        }
    }

    common!(keylatch_semaphore::Permit);
}
