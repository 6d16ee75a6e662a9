//! The fair (FIFO) distributed lock of [keylatch](https://docs.rs/keylatch), compatible with
//! Redisson's `RFairLock`.
//!
//! Most users reach it through the facade: `client.fair_lock(name)`. See [`FairLock`] for its
//! rules (first come first served among live waiters, dead waiters evicted after a short
//! waiter timeout, reentrancy per owner, leases and the watchdog), and `docs/data-layout.md`
//! for the keys it writes.
//!
//! ```no_run
//! # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
//! use std::time::Duration;
//!
//! let lock = client.fair_lock("invoice-export");
//! // Waiters are served in the order they arrived, across every process.
//! let guard = lock.lock().await?;
//! // ... the job ...
//! guard.unlock().await?;
//!
//! // Who is waiting, in order, and how long each keeps its place if its process dies.
//! for waiter in lock.queue().await? {
//!     println!("{} (evicted in {:?} unless refreshed)", waiter.id, waiter.expires_in);
//! }
//!
//! // A bounded wait leaves the queue when it gives up.
//! if let Some(guard) = lock.try_lock_for(Duration::from_secs(1), None).await? {
//!     guard.unlock().await?;
//! }
//! # Ok(()) }
//! ```
//!
//! **Which primitive should you use?** This one when the order matters: jobs must run in the
//! order they were submitted, or no process may be starved by faster ones (a plain lock lets
//! whoever retries first win, so a busy node can take the lock again and again). It costs a
//! queue entry per waiter and a little more work per acquire than the reentrant lock, and a
//! hand-off can only go to the head: a waiter whose process died holds the queue up for at
//! most the waiter timeout. When any order will do, use the reentrant lock; for many readers
//! and an occasional writer the read-write lock; to let up to N run at once a semaphore. If
//! the work is idempotent and a duplicate run is harmless, you may not need a lock at all.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod flight;
mod handover;
mod keys;
mod lock;
mod reads;
mod release;
mod scripts;
mod wait;
mod waiter;

pub use lock::{DEFAULT_WAITER_TIMEOUT, FairLock, MIN_WAITER_TIMEOUT};
pub use scripts::SCRIPTS;
pub use waiter::QueuedWaiter;
