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

/// Whether `url` names a ZooKeeper ensemble (`zk://`).
pub(crate) fn is_zookeeper_url(url: &str) -> bool {
    url.get(..5)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("zk://"))
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
