//! The reentrant distributed lock of [keylatch](https://docs.rs/keylatch), compatible with
//! Redisson's `RLock`.
//!
//! Most users reach it through the facade: `client.lock(name)`. See [`ReentrantLock`] for its
//! rules (reentrancy per owner, leases and the watchdog, fencing tokens), and
//! `docs/data-layout.md` for the keys it writes.
//!
//! **Which primitive should you use?** This one when one node at a time must run something
//! ("only one node runs the nightly job"). For FIFO order among waiters use the fair lock; for
//! many readers and an occasional writer the read-write lock; to let up to N run at once a
//! semaphore. If the work is idempotent and a duplicate run is harmless, you may not need a
//! lock at all.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod lock;
mod release;
mod scripts;

pub use lock::ReentrantLock;
pub use scripts::SCRIPTS;
