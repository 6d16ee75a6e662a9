//! The distributed read-write lock of [keylatch](https://docs.rs/keylatch), compatible with
//! Redisson's `RReadWriteLock`.
//!
//! Most users reach it through the facade: `client.rw_lock(name)`. See [`RwLock`] for its
//! rules (sharing, reentrancy and downgrade, no writer starvation, leases), [`ReadLock`] and
//! [`WriteLock`] for the two sides as lock handles, and `docs/data-layout.md` for the keys it
//! writes.
//!
//! ```no_run
//! # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
//! use std::time::Duration;
//!
//! let rw = client.rw_lock("config-cache");
//!
//! // Readers share the lock.
//! let read = rw.read().await?;
//! read.unlock().await?;
//!
//! // The refresher is alone; waiting makes new readers queue behind it.
//! let write = rw.write().await?;
//! // Downgrade: read for the writer's own owner, then let other readers in.
//! let read = rw.read_lock().with_owner(write.owner()).lock().await?;
//! write.unlock().await?;
//! read.unlock().await?;
//!
//! // The sides as lock handles: bounded waits, fixed leases, the shared trait.
//! if let Some(guard) = rw
//!     .write_lock()
//!     .try_lock_for(Duration::from_secs(1), Some(Duration::from_secs(10)))
//!     .await?
//! {
//!     guard.unlock().await?;
//! }
//! # Ok(()) }
//! ```
//!
//! **Which primitive should you use?** This one when many tasks read a shared resource and an
//! occasional one rewrites it (the cache-refresh case): readers do not exclude each other, and a
//! waiting writer is not starved by a steady stream of readers. If nearly every access writes,
//! or the critical sections are short, the reentrant lock is simpler and one script cheaper per
//! release. For FIFO order use the fair lock; to let up to N run at once, a semaphore. If
//! readers can tolerate a stale or half-written value, or the writer can publish a new version
//! atomically (write a new key, then `RENAME` or swap a pointer in one command), you need no
//! lock at all.
//!
//! **Sharing the lock with Redisson.** Keys, fields and messages are Redisson's, so Java
//! services on Redisson and Rust services on keylatch exclude each other correctly. Fairness
//! is keylatch's own: Redisson readers ignore the `{name}:write_intent` marker, so they may
//! keep a keylatch writer waiting, and Redisson writers record no intent, so keylatch readers
//! do not defer to them.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod intent;
mod read;
mod release;
mod rwlock;
mod scripts;
mod shared;
mod write;

pub use read::ReadLock;
pub use rwlock::RwLock;
pub use scripts::SCRIPTS;
pub use write::WriteLock;
