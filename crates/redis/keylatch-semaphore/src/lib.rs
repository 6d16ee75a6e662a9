//! The distributed semaphores of [keylatch](https://docs.rs/keylatch), compatible with
//! Redisson's `RSemaphore` and `RPermitExpirableSemaphore`: cap how many processes do
//! something at once, fleet-wide.
//!
//! Most users reach them through the facade: `client.semaphore(name)` and
//! `client.permit_expirable_semaphore(name)`.
//!
//! ## Which primitive should you use?
//!
//! - **At most N at once, and a crashed worker must not keep its slot**:
//!   [`PermitExpirableSemaphore`]. Each permit has an id and a lease (renewed by the watchdog
//!   while the holder lives), so a crashed holder's permit comes back within the lease. This is
//!   the right default for capping workers, connections or API calls across machines.
//! - **Permits that are not owned**: [`Semaphore`]. Anyone may release, so one process can
//!   acquire and another release (a producer/consumer hand-over, a budget refilled by a
//!   scheduler). Its permits never expire: a permit taken by a process that crashes is gone
//!   until someone adds it back ([`Semaphore::add_permits`]).
//! - **One at a time**: not a semaphore with one permit, but a lock (`client.lock(name)`):
//!   it is reentrant, has a watchdog and fencing tokens.
//! - **No lock at all**: when the work is idempotent, or one atomic command (`INCR` with a
//!   limit in a script) already does the counting.
//!
//! Both have a guard form behind the shared [`DistributedLock`](keylatch_core::DistributedLock)
//! trait, one permit per guard: [`Semaphore::as_lock`] and [`PermitExpirableSemaphore::as_lock`].
//!
//! ```no_run
//! # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
//! // At most 3 workers at once across every machine.
//! let workers = client.permit_expirable_semaphore("image-workers");
//! workers.try_set_permits(3).await?;
//! let permit = workers.acquire().await?;
//! // ... work; the permit's lease is renewed while this process lives ...
//! permit.release().await?;
//! # Ok(()) }
//! ```
//!
//! See `docs/data-layout.md` for the keys each one writes.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod counts;
mod expirable;
mod expirable_ids;
mod expirable_lock;
mod expirable_shared;
mod handover;
mod lifecycle;
mod lock;
mod permit;
mod request;
mod retry;
mod scripts;
mod semaphore;
mod semaphore_permit;
mod semaphore_shared;
mod settled;

pub use counts::{MAX_PERMITS, MAX_PERMITS_PER_CALL};
pub use expirable::PermitExpirableSemaphore;
pub use expirable_lock::ExpirableSemaphoreLock;
pub use lock::SemaphoreLock;
pub use permit::Permit;
pub use scripts::SCRIPTS;
pub use semaphore::Semaphore;
pub use semaphore_permit::SemaphorePermit;
