//! The core of [keylatch](https://docs.rs/keylatch): Redis-backed distributed locks for async
//! Rust in the Redisson family.
//!
//! **Who this crate is for.** Applications depend on the `keylatch` facade, which re-exports
//! what they need from here. This crate is for the primitive crates (`keylatch-reentrant`,
//! and the fair lock, read-write lock and semaphores built the same way) and for anyone
//! writing another primitive on the same machinery:
//!
//! - [`Client`] and [`Config`]: connections, the client UUID, cheap clones.
//! - [`Owner`] and [`OwnerId`]: who holds a reentrant hold (`<client-uuid>:<owner-number>`).
//! - [`LuaScript`] and [`ScriptCall`]: static scripts run by EVALSHA, preloaded, reloaded
//!   transparently after `NOSCRIPT`.
//! - [`PubSubHub`]: one pub/sub connection per client, reference-counted subscriptions.
//! - [`WatchdogRegistry`]: every live hold, renewed in batches by one task per client.
//! - [`DistributedLock`], [`LockGuard`] and [`HoldRelease`]: the shared, object-safe lock
//!   trait and the guard every lock returns.
//! - [`Error`]: one error type for every crate.
//!
//! The core knows nothing of any primitive: key layouts and scripts live in the primitive
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

mod backoff;
mod client;
mod cluster;
mod commands;
mod config;
mod connection;
mod error;
mod guard;
mod hub;
mod keys;
mod lock;
mod owner;
mod redact;
mod release;
mod script;
mod telemetry;
mod topology;
mod transport;
mod watchdog;

pub use backoff::Backoff;
pub use client::{Acquisition, Client, ClientStats};
pub use commands::COALESCE_AFTER;
pub use config::{Config, ConfigBuilder, DEFAULT_URL, parse_duration, url_from_env};
pub use connection::Connection;
pub use error::{Error, Result};
pub use guard::{LockGuard, UndoGuard};
pub use hub::{LETTER_MARK, PubSubHub, Subscription, WakeMode};
pub use keys::{
    MAX_LEASE, MAX_NAME_LEN, lease_millis, prefixed, suffixed, validate_lease, validate_name,
    validate_name_with,
};
pub use lock::{
    AcquireOptions, Attempt, DistributedLock, TRANSIENT_RETRIES, deadline_after, jitter, open,
    retrying, unbounded, wait_for,
};
pub use owner::{Owner, OwnerId};
pub use redact::{SecretUrl, redact_url};
pub use release::{HoldRelease, ReleaseTicket, UnfinishedRelease};
pub use script::{LuaScript, NEXT_TOKEN, ScriptCall};
pub use transport::TlsConfig;
pub use watchdog::{
    HoldHandle, HoldKey, HoldState, HoldWatch, PendingWork, RENEW_HASH_HOLDS, RENEWAL_BATCH,
    Renewal, WatchdogRegistry, WatchdogStats,
};

/// The `deadpool-redis` crate keylatch is built on.
pub use deadpool_redis;
/// The `redis` crate keylatch is built on, so users get the matching version.
pub use deadpool_redis::redis;
/// The `secrecy` crate, whose [`SecretString`](secrecy::SecretString) holds the passwords of a
/// [`Config`].
pub use secrecy;
