//! Locks made of several keylatch locks.
//!
//! A [`RedLock`] holds one lock on a majority of independent Redis servers, so that a
//! minority of them failing or failing over loses nothing.
//!
//! A [`MultiLock`] takes a set of locks — any primitives, on the same or different Redis
//! servers — all-or-nothing: in a canonical order (by name), so two callers that take
//! `{A, B}` and `{B, A}` never deadlock; when one part cannot be taken (its wait ran out, or an
//! error), the parts already taken are released before the call returns. Its
//! [`MultiGuard`] releases every part, and its [`lost`](MultiGuard::lost) completes when any
//! part is lost.
//!
//! ```no_run
//! # async fn demo() -> keylatch::Result<()> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use keylatch::{Client, DistributedLock, MultiLock};
//!
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! // Move money between two accounts: both locks, or neither.
//! let transfer = MultiLock::new([
//!     Arc::new(client.lock("account:17")) as Arc<dyn DistributedLock>,
//!     Arc::new(client.lock("account:42")),
//! ])?;
//! if let Some(both) = transfer.try_lock_for(Duration::from_secs(2), None).await? {
//!     // ... move the money ...
//!     both.unlock().await?;
//! }
//! # Ok(()) }
//! ```

mod multi;
mod redlock;

pub use multi::{MultiGuard, MultiLock};
pub use redlock::{DEFAULT_RETRY_DELAY, DEFAULT_SERVER_TIMEOUT, RedLock, RedLockGuard};
