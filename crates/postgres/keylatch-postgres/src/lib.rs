//! The PostgreSQL store of [keylatch](https://docs.rs/keylatch): PostgreSQL's session-level
//! advisory locks behind keylatch's core [`DistributedLock`](keylatch_core::DistributedLock)
//! trait, on [`tokio-postgres`](https://docs.rs/tokio-postgres) with a
//! [`deadpool-postgres`](https://docs.rs/deadpool-postgres) pool.
//!
//! - [`PgClient`]: a pool of sessions to one server (`postgres://` or `postgresql://`), and a
//!   probe that watches the session of every hold.
//! - [`PgMutex`]: the reentrant lock. A hold is a session-level `pg_advisory_lock` on a
//!   pooled connection taken out of the pool for the hold's life (unlocked and given back
//!   after the release; discarded after a fault, which ends its session and frees the lock).
//!   Re-entry is counted by the client; the server sees one lock.
//! - [`PgReadWriteLock`]: readers in the advisory lock's shared mode, a writer in its
//!   exclusive mode; writers are not starved (the server queues later readers behind a
//!   waiting writer).
//! - [`AdvisoryKey`]: a name maps to the key `hashtextextended(name, 0)`, which a `psql` user
//!   computes the same way; a lock can also name a `bigint` key or a pair of `integer` keys
//!   directly ([`PgClient::lock_with_key`]).
//!
//! ```no_run
//! use keylatch_core::DistributedLock;
//! use keylatch_postgres::PgClient;
//!
//! # async fn demo() -> keylatch_core::Result<()> {
//! let client = PgClient::connect("postgres://app@127.0.0.1:5432/app").await?;
//! // psql: SELECT pg_try_advisory_lock(hashtextextended('invoices', 0));
//! let lock = client.lock("invoices")?;
//! let guard = lock.lock().await?;
//! let token = guard.fencing_token(); // Some(n): the row `invoices` of keylatch_fencing
//! tokio::select! {
//!     () = guard.lost() => { /* the session ended: stop writing */ }
//!     () = async { /* ... critical section, passing `token` along ... */ } => {}
//! }
//! guard.unlock().await?;
//! client.shutdown().await?;
//! # let _ = token;
//! # Ok(()) }
//! ```
//!
//! **Layers.** This crate depends on keylatch-core, tokio-postgres and deadpool-postgres, never
//! on a Redis or ZooKeeper crate (docs/design.md).
//!
//! # What PostgreSQL guarantees
//! One server: advisory locks live in that server's memory and are not replicated, so a
//! failover to a replica (or a restart) ends every hold; the probe reports each one lost.
//!
//! # Fencing
//! The token is a counter row per name in the table `keylatch_fencing` (made on first use),
//! bumped by `INSERT … ON CONFLICT DO UPDATE … RETURNING` in the holding session after the
//! lock is granted: it strictly increases across holders and across server restarts (it is
//! committed like any row; a failover to a replica that had not received the last bumps can
//! give a number again).
//!
//! # Loss
//! Every [`PgConfig::probe_interval`] (1 s by default) each holding session runs `SELECT 1`:
//! a session the server ended (`pg_terminate_backend`, a restart, an idle timeout) makes the
//! hold [`lost`](keylatch_core::LockGuard::lost) at that probe; a server that does not answer
//! makes it lost three intervals after its last answer. TCP keepalives run both ways on every
//! session, and the server checks for a vanished client during waits
//! (`client_connection_check_interval`).
//!
//! # Leases
//! A fixed lease ([`AcquireOptions::with_lease`](keylatch_core::AcquireOptions::with_lease))
//! has no meaning here, where a lock lives as long as its session: an acquisition with one
//! fails with [`Error::Unsupported`](keylatch_core::Error::Unsupported) and sends nothing.
//!
//! # Cancel safety
//! Acquisitions are cancel safe: the connection of a dropped acquisition is never given back
//! to the pool; its request is cancelled and it is closed in the background
//! ([`PgClient::wait_idle`] waits for that), so nothing stays held or queued. A dropped guard
//! is released in the background; `unlock().await` releases and reports errors.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod client;
mod conn;
mod holds;
mod key;
mod mutex;
mod probe;
mod rwlock;
mod session;

pub use client::{PgClient, PgConfig, UrlError};
pub use key::AdvisoryKey;
pub use mutex::{FENCING_TABLE, PgMutex};
pub use rwlock::PgReadWriteLock;
/// The `tokio-postgres` crate this store is built on, for its error type (`SqlState`).
pub use tokio_postgres;
