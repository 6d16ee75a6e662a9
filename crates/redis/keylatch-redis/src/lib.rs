//! The Redis layer of [keylatch](https://docs.rs/keylatch): distributed locks for async Rust
//! in the Redisson family, on Redis.
//!
//! **Who this crate is for.** Applications depend on the `keylatch` facade, which re-exports
//! what they need from here. This crate is for the primitive crates (`keylatch-reentrant`,
//! and the fair lock, read-write lock and semaphores built the same way), which build on it
//! and on the store-independent `keylatch-core`:
//!
//! - [`Client`] and [`Config`]: connections (single server, Sentinel, Cluster, an
//!   application's pool), TLS and credentials, the client UUID, cheap clones. A client hands
//!   its guards a [`Background`](keylatch_core::Background) handle, not itself.
//! - [`LuaScript`] and [`ScriptCall`]: static scripts run by EVALSHA, preloaded, reloaded
//!   transparently after `NOSCRIPT`; calls coalesced on a busy connection.
//! - [`PubSubHub`]: one pub/sub connection per client (per node on a cluster),
//!   reference-counted subscriptions; [`wait_for`], the wait loop woken through it.
//! - The watchdog's renewal task, which renews the registry's watchdog-mode holds in batches
//!   ([`RENEW_HASH_HOLDS`], [`LuaScript::renewal`]).
//! - An object's lifecycle ([`object`]: exists, delete, expire, clear the expiry) over the
//!   keys it is made of.
//! - Redis key naming ([`prefixed`], [`suffixed`]) and the conversion of redis-rs errors into
//!   keylatch's ([`from_redis`]).
//!
//! The layer knows nothing of any primitive: key layouts and scripts live in the primitive
//! crates.
//!
//! ```no_run
//! # async fn demo() -> keylatch::Result<()> {
//! use keylatch::{Client, Config};
//!
//! let client = Client::connect_with(Config::from_env()).await?;
//! println!("client {} connected", client.id());
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod client;
mod connection;
mod error;
mod hash_hold;
mod holder;
mod keys;
pub mod object;
mod pubsub;
mod renewal;
mod wait;

pub use client::{Client, ClientStats};
pub use connection::app::Connection;
pub use connection::commands::COALESCE_AFTER;
pub use connection::config::{
    Config, ConfigBuilder, DEFAULT_URL, ReplicaMode, parse_duration, url_from_env,
};
pub use connection::script::{LuaScript, NEXT_TOKEN, ScriptCall};
pub use connection::tls::TlsConfig;
pub use error::{RedisResultExt, from_pool, from_redis, from_redis_key};
pub use hash_hold::{EXTEND_HASH_HOLD, extend_hash_hold};
pub use holder::{HOLDER_META_PREFIX, HolderMeta, holder_meta_key};
pub use keys::{prefixed, suffixed, validate_name, validate_name_with};
pub use pubsub::{LETTER_MARK, PubSubHub, Subscription, WakeMode};
pub use renewal::{RENEW_HASH_HOLDS, RENEW_HASH_HOLDS_META, RENEWAL_BATCH, hash_hold_renewal};
pub use wait::{bounded_attempt, open, wait_for};

/// The `deadpool-redis` crate keylatch is built on.
pub use deadpool_redis;
/// The `redis` crate keylatch is built on, so users get the matching version.
pub use deadpool_redis::redis;
