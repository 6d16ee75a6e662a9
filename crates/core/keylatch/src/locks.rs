//! The facade's reentrant and fair locks: one handle type each for both stores. On ZooKeeper
//! both are Curator's `InterProcessMutex` (its queue is FIFO by construction).
//!
//! May import: `future.rs`, `store.rs`, `zk.rs`, the Redis primitive crates.

use std::time::Duration;

use keylatch_core::{LockGuard, OwnerId};

use crate::store::{Inner, Store, redis_only_async, store_handle};
use crate::zk::ZkLock;

/// Whether a lock is reentrant (the factories' choice).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Reentrant,
    NonReentrant,
}

/// Redisson's `RLock` (`client.lock(name)`): a reentrant distributed lock with a lease
/// watchdog. On Redis it is [`keylatch_reentrant::ReentrantLock`] (Redisson's layout: read its
/// docs for the details); on ZooKeeper, Curator's `InterProcessMutex` (fixed leases, the
/// maximum hold time and the Redis-layout reads answer
/// [`Error::Unsupported`](crate::Error::Unsupported) there; the fencing token is the node's
/// creation zxid, always issued).
///
/// ```no_run
/// # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
/// let lock = client.lock("nightly-report");
/// let guard = lock.lock().await?;
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ReentrantLock(LockInner<keylatch_reentrant::ReentrantLock>);

/// Redisson's `RFairLock` (`client.fair_lock(name)`): waiters get the lock in arrival order.
/// On Redis it is [`keylatch_fair::FairLock`]; on ZooKeeper, Curator's `InterProcessMutex`,
/// whose queue of sequential nodes is FIFO by construction (the waiter timeout and direct
/// grant are Redis settings, without effect there).
#[derive(Clone, Debug)]
pub struct FairLock(LockInner<keylatch_fair::FairLock>);

type LockInner<R> = Inner<R, ZkLock>;

/// The ZooKeeper side of a new handle: a non-reentrant lock is the mutex's non-reentrant mode
/// (the holder asking again is [`Error::AlreadyHeld`](crate::Error::AlreadyHeld)).
fn zk_lock(zk: &crate::zk::ZkClient, name: &str, kind: Kind) -> ZkLock {
    ZkLock::new(zk, name, kind == Kind::Reentrant)
}

macro_rules! common {
    ($ty:ident, $redis:ty) => {
        store_handle!($ty, $redis,
            is_locked: "Whether anyone holds the lock.",
            force_unlock: "Releases whoever holds the lock (an administrative action).");

        impl $ty {
            /// The same lock, issuing a fencing token with each acquisition when `enabled`
            /// (on ZooKeeper every acquisition has one: its node's creation zxid).
            #[must_use]
            pub fn with_fencing(&self, enabled: bool) -> Self {
                match &self.0 {
                    LockInner::Redis(redis) => $ty(LockInner::Redis(redis.with_fencing(enabled))),
                    LockInner::ZooKeeper(_) => self.clone(),
                }
            }

            /// Whether a second acquisition by the holder re-enters (else it is
            /// [`Error::AlreadyHeld`](crate::Error::AlreadyHeld)).
            pub fn is_reentrant(&self) -> bool {
                match &self.0 {
                    LockInner::Redis(redis) => redis.is_reentrant(),
                    LockInner::ZooKeeper(zk) => zk.is_reentrant(),
                }
            }

            redis_only_async! { LockInner, "lock";
                /// Whether the handle's owner (see `with_owner`) holds the lock.
                fn is_held_by_current_owner(&self) -> bool;
                /// How many times the handle's owner holds the lock (0 without an owner).
                fn hold_count(&self) -> u64;
                /// What is left of the lock's lease on the server.
                fn remaining_ttl(&self) -> Option<Duration>;
                /// Whether `owner` (any client's owner id) holds the lock.
                fn is_held_by(&self, owner: OwnerId) -> bool;
                /// The last fencing token issued for the name, without acquiring.
                fn token(&self) -> Option<u64>;
            }
        }
    };
}

common!(ReentrantLock, keylatch_reentrant::ReentrantLock);
common!(FairLock, keylatch_fair::FairLock);

impl ReentrantLock {
    pub(crate) fn on(store: &Store, name: &str, kind: Kind) -> ReentrantLock {
        ReentrantLock(match store {
            Store::Redis(redis) => LockInner::Redis(match kind {
                Kind::Reentrant => keylatch_reentrant::ReentrantLock::new(redis, name),
                Kind::NonReentrant => keylatch_reentrant::ReentrantLock::non_reentrant(redis, name),
            }),
            Store::ZooKeeper(zk) => LockInner::ZooKeeper(zk_lock(zk, name, kind)),
        })
    }

    /// The same lock, whose watchdog stops renewing a hold after `max` in all (pottery's
    /// `num_extensions`); on ZooKeeper, acquisitions answer
    /// [`Error::Unsupported`](crate::Error::Unsupported).
    #[must_use]
    pub fn with_max_hold(&self, max: Duration) -> Self {
        ReentrantLock(match &self.0 {
            LockInner::Redis(redis) => LockInner::Redis(redis.with_max_hold(max)),
            LockInner::ZooKeeper(zk) => LockInner::ZooKeeper(zk.refusing("with_max_hold")),
        })
    }

    /// The pub/sub channel its releases publish on (Redis); on ZooKeeper, empty.
    pub fn channel(&self) -> &str {
        match &self.0 {
            LockInner::Redis(redis) => redis.channel(),
            LockInner::ZooKeeper(_) => "",
        }
    }

    redis_only_async! { LockInner, "lock";
        /// Takes over the hold of `owner` (hand-over by owner id; see
        /// [`keylatch_reentrant::ReentrantLock::adopt`]).
        fn adopt(&self, owner: OwnerId) -> Option<LockGuard>;
        /// Releases one hold of `owner` without its guard.
        fn unlock_as(&self, owner: OwnerId) -> ();
    }
}

impl FairLock {
    pub(crate) fn on(store: &Store, name: &str, kind: Kind) -> FairLock {
        FairLock(match store {
            Store::Redis(redis) => LockInner::Redis(match kind {
                Kind::Reentrant => keylatch_fair::FairLock::new(redis, name),
                Kind::NonReentrant => keylatch_fair::FairLock::non_reentrant(redis, name),
            }),
            Store::ZooKeeper(zk) => LockInner::ZooKeeper(zk_lock(zk, name, kind)),
        })
    }

    /// The same lock, with `timeout` for how long a waiter's queue entry lasts without being
    /// refreshed (Redis; on ZooKeeper a waiter's node lasts as long as its session).
    #[must_use]
    pub fn with_waiter_timeout(&self, timeout: Duration) -> Self {
        match &self.0 {
            LockInner::Redis(redis) => {
                FairLock(LockInner::Redis(redis.with_waiter_timeout(timeout)))
            }
            LockInner::ZooKeeper(_) => self.clone(),
        }
    }

    /// The same lock, handing the lock to the next waiter in the release (Redis; on ZooKeeper
    /// the next waiter's watch fires on the release, which is a direct hand-over already).
    #[must_use]
    pub fn with_direct_grant(&self, enabled: bool) -> Self {
        match &self.0 {
            LockInner::Redis(redis) => FairLock(LockInner::Redis(redis.with_direct_grant(enabled))),
            LockInner::ZooKeeper(_) => self.clone(),
        }
    }

    /// The waiter timeout (Redis; on ZooKeeper, the default, unused).
    pub fn waiter_timeout(&self) -> Duration {
        match &self.0 {
            LockInner::Redis(redis) => redis.waiter_timeout(),
            LockInner::ZooKeeper(_) => keylatch_fair::DEFAULT_WAITER_TIMEOUT,
        }
    }

    /// The key of the waiters' queue (Redis); on ZooKeeper, empty.
    pub fn queue_key(&self) -> &str {
        match &self.0 {
            LockInner::Redis(redis) => redis.queue_key(),
            LockInner::ZooKeeper(_) => "",
        }
    }

    /// The key of the waiters' timeouts (Redis); on ZooKeeper, empty.
    pub fn timeout_key(&self) -> &str {
        match &self.0 {
            LockInner::Redis(redis) => redis.timeout_key(),
            LockInner::ZooKeeper(_) => "",
        }
    }

    redis_only_async! { LockInner, "fair lock";
        /// The waiters in the queue, first first.
        fn queue(&self) -> Vec<keylatch_fair::QueuedWaiter>;
        /// Takes over the hold of `owner` (hand-over by owner id; see
        /// [`keylatch_fair::FairLock::adopt`]).
        fn adopt(&self, owner: OwnerId) -> Option<LockGuard>;
        /// Releases one hold of `owner` without its guard; the queue's next waiter gets it.
        fn unlock_as(&self, owner: OwnerId) -> ();
    }
}
