//! # keylatch
//!
//! Redis-backed distributed lock primitives for async Rust, in the Redisson family: a
//! reentrant lock with a lease watchdog, a fair FIFO lock, a read-write lock and counting
//! semaphores, all behind one shared trait, [`DistributedLock`], on tokio and deadpool-redis. Keys, fields and messages follow Redisson's layout, so a Java service on
//! Redisson and a Rust service on keylatch can contend for the same lock.
//!
//! ```no_run
//! # async fn demo() -> keylatch::Result<()> {
//! use std::time::Duration;
//!
//! let client = keylatch::Client::connect("redis://127.0.0.1:6379").await?;
//! let lock = client.lock("nightly-report");
//!
//! // Watchdog mode: held until unlocked, renewed in the background.
//! let guard = lock.lock().await?;
//! tokio::select! {
//!     _ = guard.lost() => eprintln!("lock lost: stop writing"),
//!     _ = tokio::time::sleep(Duration::from_millis(10)) => { /* the work */ }
//! }
//! guard.unlock().await?;
//!
//! // A bounded wait and a fixed lease.
//! if let Some(guard) = lock
//!     .try_lock_for(Duration::from_secs(1), Some(Duration::from_secs(30)))
//!     .await?
//! {
//!     guard.unlock().await?;
//! }
//! # Ok(()) }
//! ```
//!
//! ## Which primitive should you use?
//!
//! | use case | primitive |
//! |---|---|
//! | only one node runs a job | [`ReentrantLock`] (`client.lock(name)`) |
//! | only one node runs a job, and a re-entry would be a bug | `client.non_reentrant_lock(name)` ([`keylatch_reentrant::ReentrantLock::non_reentrant`]) |
//! | only one node runs a job, without pub/sub (large clusters) | [`SpinLock`] (`client.spin_lock(name)`) |
//! | jobs run in arrival order | [`FairLock`] (`client.fair_lock(name)`) |
//! | many readers, an occasional writer (cache refresh) | [`RwLock`] (`client.rw_lock(name)`) |
//! | at most N at once across machines | [`Semaphore`] (`client.semaphore(name)`), or [`PermitExpirableSemaphore`] when a crashed holder's permits must come back |
//! | wait until N processes have finished something | [`CountDownLatch`] (`client.latch(name)`) |
//! | several locks all-or-nothing (a transfer between two accounts) | [`MultiLock`] (`MultiLock::new([...])`) |
//! | one lock that survives the loss of a minority of independent servers | [`RedLock`] (`RedLock::new([...])`) |
//!
//! Do not lock at all when the work is idempotent and a duplicate run is harmless, or when one
//! atomic Redis command (`SET NX`, `INCR`) already does the job. A lock built on leases cannot
//! stop a paused holder from writing after its lease ended: pass the fencing token
//! ([`ReentrantLock::with_fencing`]) to the resource when that matters, and watch
//! [`LockGuard::lost`].
//!
//! ## Choosing the primitive at run time
//!
//! ```no_run
//! # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
//! use std::sync::Arc;
//! use keylatch::DistributedLock;
//!
//! let lock: Arc<dyn DistributedLock> = Arc::new(client.lock("job"));
//! let guard = lock.lock().await?;
//! guard.unlock().await?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
// Without the `zookeeper` feature the ZooKeeper arms hold values of empty types.
#![cfg_attr(not(feature = "zookeeper"), allow(unreachable_code, unused_variables))]
#![warn(missing_docs, missing_debug_implementations)]

mod client;
mod expirable;
mod future;
mod locks;
mod permit;
mod redis_only;
mod rwlock;
mod semaphore;
mod store;
mod zk;
mod zk_semaphore;

pub use client::{Client, StoreKind};
pub use expirable::{ExpirableSemaphoreLock, PermitExpirableSemaphore};
pub use keylatch_core::{
    AcquireOptions, DistributedLock, Error, HoldSettings, LockGuard, LossReason, MAX_LEASE,
    MAX_NAME_LEN, Owner, OwnerId, ParseOwnerIdError, Result, SecretUrl, StoreError,
    UnfinishedRelease, WatchdogStats, redact_url, secrecy,
};
pub use keylatch_fair::{DEFAULT_WAITER_TIMEOUT, MIN_WAITER_TIMEOUT, QueuedWaiter};
pub use keylatch_latch::MAX_COUNT;
pub use keylatch_redis::{
    COALESCE_AFTER, ClientStats, Config, ConfigBuilder, Connection, DEFAULT_URL, ReplicaMode,
    TlsConfig, deadpool_redis, from_redis, redis,
};
pub use keylatch_redlock::{MultiGuard, MultiLock, RedLock, RedLockGuard};
pub use keylatch_reentrant::{MAX_VALUES as MAX_MULTI_VALUES, SpinBackoff};
pub use keylatch_semaphore::{MAX_PERMITS, MAX_PERMITS_PER_CALL};
pub use locks::{FairLock, ReentrantLock};
pub use permit::{Permit, SemaphorePermit};
pub use redis_only::{CountDownLatch, MultiValueLock, SpinLock};
pub use rwlock::{ReadLock, RwLock, WriteLock};
pub use semaphore::{Semaphore, SemaphoreLock};

/// The delayed queue (Redis only): Redisson's `RDelayedQueue` layout, delivered without a
/// transfer task; its codecs. See [`Client::delayed_queue`].
pub mod queue {
    pub use keylatch_queue::*;
}

/// The ZooKeeper store (`zk://` URLs), with the `zookeeper` feature: its client and settings,
/// for what the facade's [`Client`] does not cover (the session, the recipes' own types).
#[cfg(feature = "zookeeper")]
pub mod zookeeper {
    pub use keylatch_zookeeper::*;
}

/// The PostgreSQL store (`postgres://` and `postgresql://` URLs), with the `postgres` feature:
/// [`PgClient`](keylatch_postgres::PgClient) and its advisory locks. The facade's [`Client`]
/// does not run on PostgreSQL yet: [`Client::connect`] refuses such a URL with
/// [`Error::Unsupported`], naming this module.
#[cfg(feature = "postgres")]
pub mod postgres {
    pub use keylatch_postgres::*;
}

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../../README.md")]
mod readme {}

/// The examples of `docs/choosing-a-primitive.md`, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../../docs/choosing-a-primitive.md")]
mod choosing_a_primitive {}
