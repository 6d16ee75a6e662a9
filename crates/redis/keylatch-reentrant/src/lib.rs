//! The reentrant distributed lock of [keylatch](https://docs.rs/keylatch), compatible with
//! Redisson's `RLock`.
//!
//! Most users reach it through the facade: `client.lock(name)`. See [`ReentrantLock`] for its
//! rules (reentrancy per owner, leases and the watchdog, fencing tokens), and
//! `docs/data-layout.md` for the keys it writes. The same crate has its non-reentrant variant
//! ([`ReentrantLock::non_reentrant`], `client.non_reentrant_lock(name)`) and the
//! [`SpinLock`] (`client.spin_lock(name)`), which waits by polling instead of pub/sub.
//!
//! **Which primitive should you use?** This one when one node at a time must run something
//! ("only one node runs the nightly job"). For FIFO order among waiters use the fair lock; for
//! many readers and an occasional writer the read-write lock; to let up to N run at once a
//! semaphore. If the work is idempotent and a duplicate run is harmless, you may not need a
//! lock at all.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod backoff;
mod handover;
mod lock;
mod multi_value;
mod multi_value_hash;
mod multi_value_release;
mod reads;
mod release;
mod scripts;
mod spin;

pub use backoff::SpinBackoff;
pub use lock::ReentrantLock;
pub use multi_value::{MAX_VALUES, MultiValueLock};
pub use multi_value_release::MULTI_VALUE_SCRIPTS;
pub use scripts::SCRIPTS;
pub use spin::SpinLock;
