//! The facade's handles for what exists on Redis only (the latch, the spin and multi-value
//! locks): on a ZooKeeper client each method answers
//! [`Error::Unsupported`](crate::Error::Unsupported), so that code choosing its store by URL
//! still compiles, and fails with a typed error where the store has no such object.
//!
//! May import: `store.rs`, the Redis primitive crates.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::{AcquireOptions, DistributedLock, LockGuard, Owner, OwnerId, Result};
use keylatch_redis::Client as RedisClient;

use crate::store::{Store, redis_only, redis_only_async};

#[derive(Clone, Debug)]
enum Only<R> {
    Redis(R),
    /// On ZooKeeper: the name, for `name()`.
    ZooKeeper(Arc<str>),
}

impl<R> Only<R> {
    fn on(store: &Store, name: &str, redis: impl FnOnce(&RedisClient) -> R) -> Only<R> {
        match store {
            Store::Redis(client) => Only::Redis(redis(client)),
            Store::ZooKeeper(_) => Only::ZooKeeper(Arc::from(name)),
        }
    }
}

/// The parts every Redis-only handle has: its constructor, `as_redis`, and `name`-like
/// accessors that answer the name (or `""`) on ZooKeeper.
macro_rules! handle {
    ($ty:ident, $redis:ty, $doc:literal) => {
        #[doc = $doc]
        ///
        /// Redis only: on a ZooKeeper client every method answers
        /// [`Error::Unsupported`](crate::Error::Unsupported).
        #[derive(Clone, Debug)]
        pub struct $ty(Only<$redis>);

        impl $ty {
            #[allow(dead_code)]
            pub(crate) fn on(
                store: &Store,
                name: &str,
                redis: impl FnOnce(&RedisClient) -> $redis,
            ) -> $ty {
                $ty(Only::on(store, name, redis))
            }

            /// The Redis layer's handle, when the store is Redis.
            pub fn as_redis(&self) -> Option<&$redis> {
                match &self.0 {
                    Only::Redis(redis) => Some(redis),
                    Only::ZooKeeper(_) => None,
                }
            }
        }
    };
}

/// A sync accessor: the Redis handle's, or `$zk` on ZooKeeper.
macro_rules! accessor {
    ($(#[$doc:meta])* fn $method:ident(&self) -> $ret:ty, zk: |$name:ident| $zk:expr) => {
        $(#[$doc])*
        pub fn $method(&self) -> $ret {
            match &self.0 {
                Only::Redis(redis) => redis.$method(),
                Only::ZooKeeper($name) => $zk,
            }
        }
    };
}

/// A builder method: the Redis handle's, or the same handle on ZooKeeper.
macro_rules! builder {
    ($ty:ident; $(#[$doc:meta])* fn $method:ident(&self, $arg:ident: $argty:ty)) => {
        $(#[$doc])*
        #[must_use]
        pub fn $method(&self, $arg: $argty) -> Self {
            match &self.0 {
                Only::Redis(redis) => $ty(Only::Redis(redis.$method($arg))),
                Only::ZooKeeper(_) => self.clone(),
            }
        }
    };
}

/// `DistributedLock` for a Redis-only lock handle.
macro_rules! lock_trait {
    ($ty:ident, $primitive:literal) => {
        #[async_trait]
        impl DistributedLock for $ty {
            fn name(&self) -> &str {
                match &self.0 {
                    Only::Redis(redis) => DistributedLock::name(redis),
                    Only::ZooKeeper(name) => name,
                }
            }

            fn release_channel(&self) -> Option<(&(dyn std::any::Any + Send + Sync), &str)> {
                match &self.0 {
                    Only::Redis(redis) => DistributedLock::release_channel(redis),
                    Only::ZooKeeper(_) => None,
                }
            }

            async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
                match &self.0 {
                    Only::Redis(redis) => DistributedLock::acquire(redis, options).await,
                    Only::ZooKeeper(_) => Err(redis_only($primitive, "acquire")),
                }
            }

            async fn is_locked(&self) -> Result<bool> {
                match &self.0 {
                    Only::Redis(redis) => DistributedLock::is_locked(redis).await,
                    Only::ZooKeeper(_) => Err(redis_only($primitive, "is_locked")),
                }
            }

            async fn force_unlock(&self) -> Result<bool> {
                match &self.0 {
                    Only::Redis(redis) => DistributedLock::force_unlock(redis).await,
                    Only::ZooKeeper(_) => Err(redis_only($primitive, "force_unlock")),
                }
            }
        }
    };
}

handle!(
    CountDownLatch,
    keylatch_latch::CountDownLatch,
    "Redisson's `RCountDownLatch` (`client.latch(name)`); see [`keylatch_latch::CountDownLatch`]."
);

impl CountDownLatch {
    accessor!(
        /// The latch's name.
        fn name(&self) -> &str, zk: |name| name);
    accessor!(
        /// The pub/sub channel; on ZooKeeper, empty.
        fn channel(&self) -> &str, zk: |_name| "");

    redis_only_async! { Only, "count-down latch";
        /// Sets the count if the latch does not exist yet.
        fn try_set_count(&self, count: u64) -> bool;
        /// Counts down by one; the count left.
        fn count_down(&self) -> u64;
        /// The count now.
        fn count(&self) -> u64;
        /// Waits until the count is zero.
        fn wait(&self) -> ();
        /// Waits up to `timeout` for the count to be zero; whether it was.
        fn wait_for(&self, timeout: Duration) -> bool;
        /// Deletes the latch.
        fn delete(&self) -> bool;
        /// Whether the latch exists.
        fn exists(&self) -> bool;
        /// Sets the latch's time to live.
        fn expire(&self, time_to_live: Duration) -> bool;
        /// Removes the latch's time to live.
        fn clear_expire(&self) -> bool;
    }
}

handle!(
    SpinLock,
    keylatch_reentrant::SpinLock,
    "Redisson's spin lock (`client.spin_lock(name)`): the reentrant lock without pub/sub; see [`keylatch_reentrant::SpinLock`]."
);

impl SpinLock {
    builder!(SpinLock;
        /// The same lock, acquiring for `owner`.
        fn with_owner(&self, owner: Owner));
    builder!(SpinLock;
        /// The same lock, issuing fencing tokens when `enabled`.
        fn with_fencing(&self, enabled: bool));
    builder!(SpinLock;
        /// The same lock, with `backoff` between attempts.
        fn with_backoff(&self, backoff: keylatch_reentrant::SpinBackoff));
    accessor!(
        /// The back-off between attempts.
        fn backoff(&self) -> keylatch_reentrant::SpinBackoff, zk: |_name| keylatch_reentrant::SpinBackoff::default());
    accessor!(
        /// The lock name.
        fn name(&self) -> &str, zk: |name| name);

    redis_only_async! { Only, "spin lock";
        /// Acquires as `options` say.
        fn acquire(&self, options: AcquireOptions) -> Option<LockGuard>;
        /// Releases whoever holds the lock.
        fn force_unlock(&self) -> bool;
        /// Whether anyone holds the lock.
        fn is_locked(&self) -> bool;
        /// Whether `owner` holds the lock.
        fn is_held_by(&self, owner: OwnerId) -> bool;
        /// How many times the handle's owner holds the lock.
        fn hold_count(&self) -> u64;
        /// The last fencing token issued for the name.
        fn token(&self) -> Option<u64>;
        /// What is left of the lock's lease.
        fn remaining_ttl(&self) -> Option<Duration>;
    }

    keylatch_core::acquire_shorthands! {
        lock: "Waits for the lock as long as it takes; held in watchdog mode.",
        lock_with_lease: "Waits for the lock; held for `lease` (no watchdog).",
        try_lock: "Takes the lock if it is free now.",
        try_lock_for: "Waits up to `wait` for the lock; `lease` as in `acquire`.",
    }
}
lock_trait!(SpinLock, "spin lock");

handle!(
    MultiValueLock,
    keylatch_reentrant::MultiValueLock,
    "Redisson's `getMultiLock(group, values)` (`client.multi_value_lock(group, values)`): values of one group locked all-or-nothing in one call; see [`keylatch_reentrant::MultiValueLock`]."
);

impl MultiValueLock {
    builder!(MultiValueLock;
        /// The same lock, acquiring for `owner`.
        fn with_owner(&self, owner: Owner));
    accessor!(
        /// The group's name.
        fn group(&self) -> &str, zk: |name| name);
    accessor!(
        /// The values locked.
        fn values(&self) -> &[String], zk: |_name| &[]);
    accessor!(
        /// The hash fields of the values.
        fn fields(&self) -> &[String], zk: |_name| &[]);
    accessor!(
        /// The pub/sub channel; on ZooKeeper, empty.
        fn channel(&self) -> &str, zk: |_name| "");

    redis_only_async! { Only, "multi-value lock";
        /// Acquires every value as `options` say.
        fn acquire(&self, options: AcquireOptions) -> Option<LockGuard>;
        /// Releases whoever holds the values.
        fn force_unlock(&self) -> bool;
        /// Whether any value is held.
        fn is_locked(&self) -> bool;
    }

    keylatch_core::acquire_shorthands! {
        lock: "Waits for every value as long as it takes; held in watchdog mode.",
        lock_with_lease: "Waits for every value; held for `lease` (no watchdog).",
        try_lock: "Takes every value if all are free now.",
        try_lock_for: "Waits up to `wait` for every value; `lease` as in `acquire`.",
    }
}
lock_trait!(MultiValueLock, "multi-value lock");
