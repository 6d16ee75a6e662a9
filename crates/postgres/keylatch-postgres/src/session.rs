//! What every lock of one [`PgClient`](crate::PgClient) shares: the connection pool, the
//! core's [`Background`] (and through it the hold registry), the table of this client's live
//! holds (each with the connection whose session holds it, and its local reentrancy count),
//! and the mapping of tokio-postgres's errors to keylatch's.
//!
//! May import: keylatch-core, tokio-postgres, deadpool-postgres, `key`, `conn`.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use deadpool_postgres::{Pool, PoolError};
use keylatch_core::{Background, Error, OwnerId, Result, StoreError};
use tokio_postgres::error::SqlState;
use uuid::Uuid;

use crate::conn::HeldConn;
use crate::key::{AdvisoryKey, Mode};

/// One advisory lock this client holds, and how many guards of one owner share it.
#[derive(Clone, Debug)]
pub(crate) struct PgHold {
    /// The connection whose session holds the lock (out of the pool for the hold's life).
    pub(crate) conn: Arc<tokio::sync::Mutex<Option<HeldConn>>>,
    /// The advisory key.
    pub(crate) key: Arc<AdvisoryKey>,
    /// Exclusive or shared.
    pub(crate) mode: Mode,
    /// Guards of the owner on it.
    pub(crate) count: usize,
    /// The fencing token of the acquisition (exclusive holds only).
    pub(crate) token: Option<u64>,
}

/// A hold's identity in the table: its hold key (the lock's name) and owner, as the hold
/// registry writes them (`HoldKey::new(key, owner)`).
pub(crate) type HoldId = (Arc<str>, String);

/// The id of `owner`'s hold on `key`.
pub(crate) fn hold_id(key: &Arc<str>, owner: OwnerId) -> HoldId {
    (key.clone(), owner.to_string())
}

/// The state shared by a client and its locks.
pub(crate) struct Shared {
    /// This client's UUID (the first half of every owner id).
    pub(crate) id: Uuid,
    /// The connection pool.
    pub(crate) pool: Pool,
    /// Background work, the hold registry and the shutdown.
    pub(crate) background: Background,
    /// The live holds of this client.
    holds: Mutex<HashMap<HoldId, PgHold>>,
    /// Whether the fencing table is known to exist.
    pub(crate) fencing_ready: tokio::sync::OnceCell<()>,
    /// How long a probe of a holding session may take.
    pub(crate) probe_timeout: Duration,
    /// How long opening a connection may take.
    pub(crate) connect_timeout: Duration,
    /// The URL with its password masked.
    pub(crate) redacted: Arc<str>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("id", &self.id)
            .field("url", &self.redacted)
            .field("background", &self.background)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every change is one call: a panic elsewhere cannot leave the map half-updated.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub(crate) fn new(
        pool: Pool,
        background: Background,
        (probe_timeout, connect_timeout): (Duration, Duration),
        redacted: Arc<str>,
    ) -> Shared {
        Shared {
            id: Uuid::new_v4(),
            pool,
            background,
            holds: Mutex::new(HashMap::new()),
            fencing_ready: tokio::sync::OnceCell::new(),
            probe_timeout,
            connect_timeout,
            redacted,
        }
    }

    /// The hold of `id`, if any.
    pub(crate) fn hold(&self, id: &HoldId) -> Option<PgHold> {
        lock(&self.holds).get(id).cloned()
    }

    /// One more guard on an existing hold; `None` when there is none.
    pub(crate) fn reenter(&self, id: &HoldId) -> Option<PgHold> {
        let mut holds = lock(&self.holds);
        let hold = holds.get_mut(id)?;
        hold.count += 1;
        Some(hold.clone())
    }

    /// Records a fresh hold (count 1). Two sessions cannot both hold one exclusive advisory
    /// lock, so there is none for `id` yet.
    pub(crate) fn insert(&self, id: HoldId, hold: PgHold) -> PgHold {
        let mut holds = lock(&self.holds);
        holds.entry(id).or_insert(hold).clone()
    }

    /// One guard fewer on `id`, if its count is `expected` (any count for `None`): the hold
    /// to unlock when that was the last, `Ok(None)` when guards remain or the count differs.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when there is no such hold.
    pub(crate) fn leave(&self, id: &HoldId, expected: Option<usize>) -> Result<Option<PgHold>> {
        let mut holds = lock(&self.holds);
        let Some(hold) = holds.get_mut(id) else {
            return Err(Error::NotHeld {
                name: id.0.to_string(),
            });
        };
        if expected.is_some_and(|e| e != hold.count) {
            return Ok(None);
        }
        hold.count -= 1;
        if hold.count > 0 {
            return Ok(None);
        }
        Ok(holds.remove(id))
    }

    /// Forgets the hold of `id` whatever its count (its session ended).
    pub(crate) fn forget(&self, id: &HoldId) -> Option<PgHold> {
        lock(&self.holds).remove(id)
    }
}

/// Maps a tokio-postgres error: a closed connection is [`Error::Connection`] (ambiguous), a
/// refused login [`Error::Auth`], everything else [`Error::Store`] with the library's error as
/// the source.
pub(crate) fn store_error(err: tokio_postgres::Error) -> Error {
    if err.is_closed() || (err.code().is_none() && err.as_db_error().is_none()) {
        return Error::Connection(StoreError::new(err));
    }
    match err.code() {
        Some(code)
            if *code == SqlState::INVALID_PASSWORD
                || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION =>
        {
            Error::Auth(StoreError::new(err))
        }
        // The server ended the session (pg_terminate_backend, a shutdown): the request's
        // outcome is unknown, and the session's locks are gone.
        Some(code)
            if *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::CANNOT_CONNECT_NOW =>
        {
            Error::Connection(StoreError::new(err))
        }
        _ => Error::Store(StoreError::new(err)),
    }
}

/// Maps an error of the pool: the server could not be reached ([`Error::Connect`], with the
/// masked URL), the pool's wait timed out ([`Error::Pool`]), or it is closed.
pub(crate) fn pool_error(err: PoolError, redacted: &str) -> Error {
    match err {
        PoolError::Closed => Error::Closed,
        PoolError::Backend(err) => match store_error(err) {
            Error::Connection(source) | Error::Store(source) => Error::Connect {
                url: redacted.to_owned(),
                source,
            },
            other => other,
        },
        other => Error::Pool(StoreError::new(other)),
    }
}
