//! Which store a facade client runs on (the URL's scheme picks it), and the forwarding the
//! facade's handles share: a method a store has no form of answers [`Error::Unsupported`].
//!
//! May import: the store crates, `zk.rs`, `future.rs`.

use keylatch_core::Error;

/// The store behind a [`Client`](crate::Client).
#[derive(Clone, Debug)]
pub(crate) enum Store {
    /// Redis (single, TLS, Sentinel, Cluster).
    Redis(keylatch_redis::Client),
    /// ZooKeeper (`zk://`), with the `zookeeper` feature.
    ZooKeeper(crate::zk::ZkClient),
}

/// A facade handle's store side: the Redis layer's handle, or the ZooKeeper one.
#[derive(Clone, Debug)]
pub(crate) enum Inner<R, Z> {
    Redis(R),
    ZooKeeper(Z),
}

/// Whether `url` names a ZooKeeper ensemble (`zk://`, or `zk+tls://` for its TLS port).
pub(crate) fn is_zookeeper_url(url: &str) -> bool {
    ["zk://", "zk+tls://"].iter().any(|scheme| {
        url.get(..scheme.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(scheme))
    })
}

/// Whether `url` names a PostgreSQL server (`postgres://` or `postgresql://`).
pub(crate) fn is_postgres_url(url: &str) -> bool {
    ["postgres://", "postgresql://"].iter().any(|scheme| {
        url.get(..scheme.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(scheme))
    })
}

/// What [`Client::connect`](crate::Client::connect) answers for a PostgreSQL URL: the facade's
/// handles do not run there yet, and nothing was sent.
pub(crate) fn postgres_not_in_facade() -> Error {
    Error::Unsupported {
        primitive: "client",
        operation: "a postgres:// URL",
        reason: "the facade's Client runs on Redis and ZooKeeper; use keylatch::postgres::PgClient \
                 (the `postgres` feature) for PostgreSQL's advisory locks",
    }
}

/// What a method with no ZooKeeper form answers on a ZooKeeper client.
pub(crate) fn redis_only(primitive: &'static str, operation: &'static str) -> Error {
    Error::Unsupported {
        primitive,
        operation,
        reason: "it exists on Redis only; this client is connected to ZooKeeper",
    }
}

/// Forwards async methods of a facade handle (a tuple struct over an enum with `Redis` and
/// `ZooKeeper` variants) to its Redis primitive; on ZooKeeper they answer
/// [`Error::Unsupported`]. Each method is written with its doc comment and signature.
macro_rules! redis_only_async {
    ($inner:ident, $primitive:literal; $(
        $(#[$doc:meta])*
        fn $method:ident(&self $(, $arg:ident : $ty:ty)* $(,)?) -> $ret:ty;
    )*) => {
        $(
            $(#[$doc])*
            ///
            /// On ZooKeeper: [`Error::Unsupported`](crate::Error::Unsupported).
            pub async fn $method(&self $(, $arg: $ty)*) -> $crate::Result<$ret> {
                match &self.0 {
                    $inner::Redis(redis) => $crate::future::boxed(redis.$method($($arg),*)).await,
                    $inner::ZooKeeper(_) => {
                        Err($crate::store::redis_only($primitive, stringify!($method)))
                    }
                }
            }
        )*
    };
}

pub(crate) use redis_only_async;

/// Forwards async methods of a facade handle over [`Inner`] to its Redis primitive; on
/// ZooKeeper they answer [`Error::Unsupported`] with `$reason`, before anything is written.
/// Each method is written with its doc comment and signature.
macro_rules! refused_on_zookeeper {
    ($primitive:literal; $(
        $(#[$doc:meta])*
        fn $method:ident(&self $(, $arg:ident : $ty:ty)* $(,)?) -> $ret:ty, $reason:expr;
    )*) => {
        $(
            $(#[$doc])*
            ///
            /// On ZooKeeper: [`Error::Unsupported`](crate::Error::Unsupported), writing nothing.
            pub async fn $method(&self $(, $arg: $ty)*) -> $crate::Result<$ret> {
                match &self.0 {
                    $crate::store::Inner::Redis(redis) => {
                        $crate::future::boxed(redis.$method($($arg),*)).await
                    }
                    $crate::store::Inner::ZooKeeper(_) => Err($crate::Error::Unsupported {
                        primitive: $primitive,
                        operation: stringify!($method),
                        reason: $reason,
                    }),
                }
            }
        )*
    };
}

pub(crate) use refused_on_zookeeper;

/// What every facade lock handle (a tuple struct over [`Inner`]) has on either store:
/// `as_redis`, `with_owner`, `name`, `acquire` and its shorthands, `force_unlock`,
/// `is_locked` (documented by the caller), and `DistributedLock`.
macro_rules! store_handle {
    ($ty:ident, $redis:ty, is_locked: $is_locked:literal, force_unlock: $force_unlock:literal) => {
        impl $ty {
            /// The Redis layer's handle, when the store is Redis.
            pub fn as_redis(&self) -> Option<&$redis> {
                match &self.0 {
                    $crate::store::Inner::Redis(redis) => Some(redis),
                    $crate::store::Inner::ZooKeeper(_) => None,
                }
            }

            /// The same handle, acquiring for `owner`: an owner that holds it re-enters.
            #[must_use]
            pub fn with_owner(&self, owner: $crate::Owner) -> Self {
                $ty(match &self.0 {
                    $crate::store::Inner::Redis(redis) => {
                        $crate::store::Inner::Redis(redis.with_owner(owner))
                    }
                    $crate::store::Inner::ZooKeeper(zk) => {
                        $crate::store::Inner::ZooKeeper(zk.with_owner(owner))
                    }
                })
            }

            /// The lock name.
            pub fn name(&self) -> &str {
                match &self.0 {
                    $crate::store::Inner::Redis(redis) => redis.name(),
                    $crate::store::Inner::ZooKeeper(zk) => zk.name(),
                }
            }

            /// Acquires as `options` say (see the store's primitive for the details).
            ///
            /// # Errors
            /// [`Error::InvalidName`](crate::Error::InvalidName),
            /// [`Error::InvalidLease`](crate::Error::InvalidLease),
            /// [`Error::UpgradeRefused`](crate::Error::UpgradeRefused) (a write side, for a
            /// reader), [`Error::Unsupported`](crate::Error::Unsupported) for what the store
            /// has no form of, [`Error::Closed`](crate::Error::Closed), store errors.
            ///
            /// # Cancel safety
            /// Cancel safe: a dropped acquisition leaves no hold and no queue entry behind.
            pub async fn acquire(
                &self,
                options: $crate::AcquireOptions,
            ) -> $crate::Result<Option<$crate::LockGuard>> {
                match &self.0 {
                    $crate::store::Inner::Redis(redis) => {
                        $crate::future::boxed(redis.acquire(options)).await
                    }
                    $crate::store::Inner::ZooKeeper(zk) => zk.acquire(options).await,
                }
            }

            keylatch_core::acquire_shorthands! {
                lock: "Waits as long as it takes; held in watchdog mode.",
                lock_with_lease: "Waits; held for `lease` (no watchdog).",
                try_lock: "Takes it if it can now.",
                try_lock_for: "Waits up to `wait`; `lease` as in `acquire`.",
            }

            #[doc = $force_unlock]
            ///
            /// # Errors
            /// As [`acquire`](Self::acquire).
            pub async fn force_unlock(&self) -> $crate::Result<bool> {
                match &self.0 {
                    $crate::store::Inner::Redis(redis) => {
                        $crate::future::boxed(redis.force_unlock()).await
                    }
                    $crate::store::Inner::ZooKeeper(zk) => zk.force_unlock().await,
                }
            }

            #[doc = $is_locked]
            ///
            /// # Errors
            /// As [`acquire`](Self::acquire).
            pub async fn is_locked(&self) -> $crate::Result<bool> {
                match &self.0 {
                    $crate::store::Inner::Redis(redis) => {
                        $crate::future::boxed(redis.is_locked()).await
                    }
                    $crate::store::Inner::ZooKeeper(zk) => zk.is_locked().await,
                }
            }
        }

        #[async_trait::async_trait]
        impl $crate::DistributedLock for $ty {
            fn name(&self) -> &str {
                $ty::name(self)
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
                $ty::acquire(self, options).await
            }

            async fn is_locked(&self) -> $crate::Result<bool> {
                $ty::is_locked(self).await
            }

            async fn force_unlock(&self) -> $crate::Result<bool> {
                $ty::force_unlock(self).await
            }
        }
    };
}

pub(crate) use store_handle;
