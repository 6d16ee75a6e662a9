//! [`PgReadWriteLock`]: a read-write lock on one advisory key, its read side the shared mode
//! (`pg_advisory_lock_shared`) and its write side the exclusive mode, each a [`PgMutex`].
//!
//! May import: keylatch-core, `session`, `key`, `mutex`.

use std::sync::Arc;

use crate::key::{AdvisoryKey, Mode};
use crate::mutex::PgMutex;
use crate::session::Shared;

/// A read-write lock on a PostgreSQL advisory key: readers hold it in shared mode together,
/// a writer in exclusive mode alone. A `psql` session takes the same sides with
/// `pg_advisory_lock_shared(hashtextextended(name, 0))` and `pg_advisory_lock(…)`.
///
/// **Writers are not starved**: PostgreSQL's lock manager makes a new request wait when it
/// conflicts with a request already waiting, so once a writer waits, readers that come later
/// queue behind it (tested in `tests/rwlock.rs`). Only the write side has fencing tokens.
/// An owner cannot hold both sides through one client (each hold is on its own session): a
/// reader asking for the write side gets [`UpgradeRefused`](keylatch_core::Error::UpgradeRefused),
/// a writer asking for the read side [`Unsupported`](keylatch_core::Error::Unsupported).
#[derive(Clone, Debug)]
pub struct PgReadWriteLock {
    read: PgMutex,
    write: PgMutex,
}

impl PgReadWriteLock {
    pub(crate) fn new(shared: Arc<Shared>, name: &str, key: AdvisoryKey) -> PgReadWriteLock {
        let key = Arc::new(key);
        PgReadWriteLock {
            read: PgMutex::with_mode(shared.clone(), name, key.clone(), Mode::Shared),
            write: PgMutex::with_mode(shared, name, key, Mode::Exclusive),
        }
    }

    /// The read side (shared mode; reentrant per owner).
    pub fn read_lock(&self) -> PgMutex {
        self.read.clone()
    }

    /// The write side (exclusive mode; reentrant per owner; fencing tokens).
    pub fn write_lock(&self) -> PgMutex {
        self.write.clone()
    }
}
