//! Guards over advisory locks: registering a hold in the core's registry and making its
//! [`LockGuard`], and [`PgRelease`], the core's [`HoldRelease`] for a hold (a local count, the
//! lock unlocked by the last release and its connection given back to the pool).
//!
//! May import: keylatch-core, tokio-postgres, `session`, `conn`, `key`, `probe`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::{
    Error, HoldKey, HoldRelease, LockGuard, OwnerId, Renewal, Result, hold::RenewWith,
};
use tokio::time::Instant;

use crate::probe::PROBE;
use crate::session::{HoldId, PgHold, Shared, hold_id, store_error};

/// How many probe intervals a hold stays valid without an answer from its session.
pub(crate) const PROBES_PER_VALIDITY: u32 = 3;

/// Releases one guard of an advisory-lock hold: the last one unlocks it.
#[derive(Debug)]
pub(crate) struct PgRelease {
    shared: Arc<Shared>,
    key: Arc<str>,
}

#[async_trait]
impl HoldRelease for PgRelease {
    async fn release(&self, owner: OwnerId) -> Result<()> {
        let id = hold_id(&self.key, owner);
        match self.shared.leave(&id, None)? {
            Some(hold) => unlock(&id, hold).await,
            None => Ok(()),
        }
    }

    async fn release_if_count(&self, owner: OwnerId, expected: u64) -> Result<()> {
        let id = hold_id(&self.key, owner);
        let expected = usize::try_from(expected).unwrap_or(usize::MAX);
        match self.shared.leave(&id, Some(expected)) {
            Ok(Some(hold)) => unlock(&id, hold).await,
            Ok(None) | Err(Error::NotHeld { .. }) => Ok(()),
            Err(err) => Err(err),
        }
    }
}

/// Unlocks the advisory lock of `hold` on its session and gives the connection back to the
/// pool; a session that failed is discarded instead (closing it frees the lock).
///
/// # Errors
/// [`Error::NotHeld`] when the session had ended (the server freed the lock then) or no
/// longer held it; store errors (the connection is discarded, which frees the lock).
async fn unlock(id: &HoldId, hold: PgHold) -> Result<()> {
    let not_held = || Error::NotHeld {
        name: id.0.to_string(),
    };
    let Some(conn) = hold.conn.lock().await.take() else {
        return Err(not_held());
    };
    if conn.is_closed() {
        return Err(not_held());
    }
    let unlock = hold.mode.function("pg_advisory_unlock");
    let sql = format!("SELECT {}", hold.key.call(&unlock, 1));
    let answer = match conn.prepared(&sql).await {
        Ok(statement) => {
            conn.client()
                .query_one(&statement, &hold.key.params())
                .await
        }
        Err(err) => Err(err),
    };
    match answer {
        Ok(row) if row.try_get::<_, bool>(0).unwrap_or(false) => {
            conn.give_back();
            Ok(())
        }
        // Not held by this session: someone ran pg_advisory_unlock_all on it? Discarded.
        Ok(_) => Err(not_held()),
        Err(err) => match store_error(err) {
            // The session ended: the server freed the lock with it.
            Error::Connection(_) => Err(not_held()),
            err => Err(err),
        },
    }
}

/// How long a hold is known valid after its session last answered a probe.
pub(crate) fn validity(shared: &Shared) -> Duration {
    shared.probe_timeout * PROBES_PER_VALIDITY
}

/// A guard for a hold the table already counts (a fresh hold inserted, or a re-entry): `key`
/// is its hold key (the name, or the name's read side), `name` the lock's name.
pub(crate) fn make_guard(
    shared: &Arc<Shared>,
    (key, name): (Arc<str>, Arc<str>),
    owner: OwnerId,
    hold: &PgHold,
) -> LockGuard {
    let registry = shared.background.registry();
    let registered = registry.register(
        HoldKey::new(&key, owner),
        validity(shared),
        Renewal::Watchdog(RenewWith::new(&PROBE)),
        Instant::now(),
    );
    let release = Arc::new(PgRelease {
        shared: shared.clone(),
        key: key.clone(),
    });
    LockGuard::new(
        shared.background.clone(),
        name,
        owner,
        release,
        registered,
        hold.token,
    )
}

/// A hold for `owner` on `key`, entered again if this client already holds it (re-entry is
/// counted here, the server sees one lock): `None` when it does not.
pub(crate) fn reenter(
    shared: &Arc<Shared>,
    (key, name): (&Arc<str>, &Arc<str>),
    owner: OwnerId,
) -> Option<LockGuard> {
    let hold = shared.reenter(&hold_id(key, owner))?;
    Some(make_guard(
        shared,
        (key.clone(), name.clone()),
        owner,
        &hold,
    ))
}
