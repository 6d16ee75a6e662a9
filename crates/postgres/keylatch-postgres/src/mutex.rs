//! The reentrant lock: a session-level advisory lock on a connection taken out of the pool for
//! the hold's life; reentrancy is local (a count per client and owner); the fencing token is a
//! counter row per name, bumped in the holding session once the lock is granted.
//!
//! May import: keylatch-core, tokio-postgres, `session`, `conn`, `key`, `holds`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::{AcquireOptions, DistributedLock, Error, LockGuard, Owner, Result};
use tokio::time::Instant;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use crate::conn::HeldConn;
use crate::holds::{make_guard, reenter};
use crate::key::{AdvisoryKey, Mode};
use crate::session::{PgHold, Shared, hold_id, pool_error, store_error};

/// The table of fencing counters, one row per lock name.
pub const FENCING_TABLE: &str = "keylatch_fencing";

/// A reentrant distributed lock on a PostgreSQL session-level advisory lock.
///
/// Made by [`PgClient::lock`](crate::PgClient::lock). Every acquisition is a new owner unless
/// one is given ([`with_owner`](PgMutex::with_owner)); an owner that already holds the lock
/// through this client re-enters it without a request (only its last release unlocks it). A
/// [`non_reentrant`](PgMutex::non_reentrant) handle refuses that re-entry instead.
///
/// **Fairness**: waiters queue in the server's lock manager (`pg_advisory_lock` under a
/// `lock_timeout`), which grants a freed lock to the waiters in the order they asked.
/// **Leases**: none; a hold lasts until it is released or its session ends.
#[derive(Clone)]
pub struct PgMutex {
    shared: Arc<Shared>,
    name: Arc<str>,
    /// The hold key in this client's tables: the name, or its read side's.
    hold_key: Arc<str>,
    key: Arc<AdvisoryKey>,
    mode: Mode,
    owner: Option<Owner>,
    reentrant: bool,
}

impl fmt::Debug for PgMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgMutex")
            .field("name", &self.name)
            .field("key", &self.key)
            .field("mode", &self.mode)
            .field("owner", &self.owner)
            .field("reentrant", &self.reentrant)
            .finish()
    }
}

impl PgMutex {
    pub(crate) fn new(shared: Arc<Shared>, name: &str, key: AdvisoryKey) -> PgMutex {
        PgMutex::with_mode(shared, name, Arc::new(key), Mode::Exclusive)
    }

    /// A side of a read-write lock (`Shared`: the read side), or the lock itself.
    pub(crate) fn with_mode(
        shared: Arc<Shared>,
        name: &str,
        key: Arc<AdvisoryKey>,
        mode: Mode,
    ) -> PgMutex {
        PgMutex {
            shared,
            name: Arc::from(name),
            hold_key: hold_key(name, mode),
            key,
            mode,
            owner: None,
            reentrant: true,
        }
    }

    /// The same lock, not reentrant: an acquisition by an owner that already holds it through
    /// this client fails at once with [`Error::AlreadyHeld`].
    pub fn non_reentrant(&self) -> PgMutex {
        PgMutex {
            reentrant: false,
            ..self.clone()
        }
    }

    /// The same lock, acquiring for `owner`: re-enters the holds it already has.
    pub fn with_owner(&self, owner: Owner) -> PgMutex {
        PgMutex {
            owner: Some(owner),
            ..self.clone()
        }
    }

    /// The advisory key the lock takes.
    pub fn key(&self) -> &AdvisoryKey {
        &self.key
    }
}

/// The hold key of `name`'s holds in `mode` in this client's tables (a name cannot contain
/// NUL: PostgreSQL's text cannot).
fn hold_key(name: &str, mode: Mode) -> Arc<str> {
    match mode {
        Mode::Exclusive => Arc::from(name),
        Mode::Shared => Arc::from(format!("{name}\0read")),
    }
}

impl PgMutex {
    /// Refuses an acquisition that would wait for the same owner's hold of the other mode
    /// through this client (a hold is on another session, so the server would make it wait
    /// for ever): a reader asking for the write lock, a writer asking for the read lock.
    fn refuse_self_wait(&self, owner: keylatch_core::OwnerId) -> Result<()> {
        let other = match self.mode {
            Mode::Exclusive => Mode::Shared,
            Mode::Shared => Mode::Exclusive,
        };
        if self
            .shared
            .hold(&hold_id(&hold_key(&self.name, other), owner))
            .is_none()
        {
            return Ok(());
        }
        Err(match self.mode {
            Mode::Exclusive => Error::UpgradeRefused {
                name: self.name.to_string(),
            },
            Mode::Shared => Error::Unsupported {
                primitive: "postgres read-write lock",
                operation: "a read lock by the write holder",
                reason: "the read would wait for the owner's own write hold (on another \
                         session): release the write lock first",
            },
        })
    }
}

/// What a fixed lease is refused with: an advisory lock lasts as long as its session.
fn lease_unsupported(options: &AcquireOptions) -> Result<()> {
    match options.lease() {
        None => Ok(()),
        Some(lease) => {
            keylatch_core::validate_lease(lease)?;
            Err(Error::Unsupported {
                primitive: "postgres lock",
                operation: "a fixed lease",
                reason: "a PostgreSQL advisory lock lasts as long as its session; release it \
                         instead",
            })
        }
    }
}

#[async_trait]
impl DistributedLock for PgMutex {
    fn name(&self) -> &str {
        &self.name
    }

    /// Acquires: re-enters a hold of the same owner, else takes a connection out of the pool
    /// and the advisory lock on its session (`pg_try_advisory_lock` for a zero wait, else
    /// `pg_advisory_lock` under a `lock_timeout` of the wait left), then bumps the name's
    /// fencing counter in that session. `Ok(None)` when the wait bound passed first.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a fixed lease (nothing sent); [`Error::AlreadyHeld`] for a
    /// [`non_reentrant`](PgMutex::non_reentrant) handle's owner that holds it already;
    /// [`Error::Closed`] after the shutdown; [`Error::Connect`] when no session could be
    /// opened; store errors (a deadlock the server broke is [`Error::Store`] with SQLSTATE
    /// `40P01` in its source).
    ///
    /// # Cancel safety
    /// Cancel safe: the connection of a dropped acquisition (which may be waiting for the lock
    /// or hold it) is not given back to the pool; its request is cancelled and it is closed in
    /// the background, so the server ends its session and frees what it held or waited for.
    async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        lease_unsupported(&options)?;
        let background = &self.shared.background;
        let mut acquisition = background.begin_acquisition("postgres_mutex")?;
        acquisition.naming(&self.name);
        let owner = Owner::or_unique(self.owner).resolve(self.shared.id);
        acquisition.owned_by(owner);
        let id = hold_id(&self.hold_key, owner);
        if !self.reentrant && self.shared.hold(&id).is_some() {
            return Err(Error::AlreadyHeld {
                name: self.name.to_string(),
            });
        }
        self.refuse_self_wait(owner)?;
        if let Some(guard) = reenter(&self.shared, (&self.hold_key, &self.name), owner) {
            acquisition.finish("acquired");
            return Ok(Some(guard));
        }
        let taken = tokio::select! {
            taken = take(&self.shared, (&self.name, &self.key, self.mode), options) => taken,
            () = background.closing() => Err(Error::Closed),
        };
        let Some((conn, token)) = background.open(taken)? else {
            acquisition.finish("timed_out");
            return Ok(None);
        };
        let hold = self.shared.insert(
            id,
            PgHold {
                conn: Arc::new(tokio::sync::Mutex::new(Some(conn))),
                key: self.key.clone(),
                mode: self.mode,
                count: 1,
                token,
            },
        );
        acquisition.finish("acquired");
        Ok(Some(make_guard(
            &self.shared,
            (self.hold_key.clone(), self.name.clone()),
            owner,
            &hold,
        )))
    }

    /// Whether any session holds the advisory lock (from `pg_locks`).
    ///
    /// # Errors
    /// Store errors.
    async fn is_locked(&self) -> Result<bool> {
        let conn = self
            .shared
            .pool
            .get()
            .await
            .map_err(|e| pool_error(e, &self.shared.redacted))?;
        let sql = format!(
            "SELECT count(*) FROM pg_locks WHERE granted AND {}",
            self.key.pg_locks_filter(1)
        );
        let row = conn
            .query_one(&sql, &self.key.params())
            .await
            .map_err(store_error)?;
        Ok(row.get::<_, i64>(0) > 0)
    }

    /// Ends the session holding the advisory lock (`pg_terminate_backend`; it needs the
    /// privilege to signal that session). Its holder's guard reports lost at its next probe.
    /// Returns whether a session held it.
    ///
    /// # Errors
    /// Store errors (`42501` without the privilege).
    async fn force_unlock(&self) -> Result<bool> {
        let conn = self
            .shared
            .pool
            .get()
            .await
            .map_err(|e| pool_error(e, &self.shared.redacted))?;
        let sql = format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE granted AND {}",
            self.key.pg_locks_filter(1)
        );
        let row = conn
            .query_one(&sql, &self.key.params())
            .await
            .map_err(store_error)?;
        Ok(row.get::<_, i64>(0) > 0)
    }
}

/// Takes a connection and the lock on its session, within the options' wait; bumps the
/// fencing counter. `Ok(None)` when the wait passed first. Dropped or failed midway, the
/// connection is discarded (see [`HeldConn`]).
async fn take(
    shared: &Arc<Shared>,
    (name, key, mode): (&str, &AdvisoryKey, Mode),
    options: AcquireOptions,
) -> Result<Option<(HeldConn, Option<u64>)>> {
    let deadline = options.deadline();
    // Opening a connection is not waiting for the lock: a try (or a short wait) still gets
    // the time a connection takes.
    let pool_deadline = deadline.map(|d| d.max(Instant::now() + shared.connect_timeout));
    let got = match pool_deadline {
        Some(deadline) => match tokio::time::timeout_at(deadline, shared.pool.get()).await {
            Ok(got) => got,
            Err(_) => return Ok(None),
        },
        None => shared.pool.get().await,
    };
    let conn = HeldConn::new(
        got.map_err(|e| pool_error(e, &shared.redacted))?,
        shared.background.clone(),
    );
    let mut params: Vec<&(dyn ToSql + Sync)> = key.params();
    let granted = if options.wait() == Some(Duration::ZERO) {
        let sql = format!(
            "SELECT {}",
            key.call(&mode.function("pg_try_advisory_lock"), 1)
        );
        let statement = conn.prepared(&sql).await.map_err(store_error)?;
        let row = conn
            .client()
            .query_one(&statement, &params)
            .await
            .map_err(store_error)?;
        row.get::<_, bool>(0)
    } else {
        // The server's own queue: pg_advisory_lock under a lock_timeout of the wait left
        // (0 = none); set and lock in one statement, one round trip.
        let millis = deadline.map_or(0, |d| {
            let left = d.saturating_duration_since(Instant::now());
            left.as_millis().clamp(1, i32::MAX as u128)
        });
        let timeout = format!("{millis}ms");
        params.push(&timeout);
        let sql = format!(
            "SELECT set_config('lock_timeout', ${}, false), {}",
            params.len(),
            key.call(&mode.function("pg_advisory_lock"), 1)
        );
        let statement = conn.prepared(&sql).await.map_err(store_error)?;
        match conn.client().execute(&statement, &params).await {
            Ok(_) => true,
            Err(err) if err.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => false,
            Err(err) => return Err(store_error(err)),
        }
    };
    if !granted {
        // Nothing held: the connection goes back to the pool.
        conn.give_back();
        return Ok(None);
    }
    // Shared holders overlap each other: no token orders them.
    let token = match mode {
        Mode::Exclusive => Some(bump_fencing(shared, &conn, name).await?),
        Mode::Shared => None,
    };
    Ok(Some((conn, token)))
}

/// Bumps `name`'s fencing counter in the holding session (the table made on first use).
async fn bump_fencing(shared: &Shared, conn: &HeldConn, name: &str) -> Result<u64> {
    let client = conn.client();
    shared
        .fencing_ready
        .get_or_try_init(|| async {
            let sql = format!(
                "CREATE TABLE IF NOT EXISTS {FENCING_TABLE} \
                 (name text PRIMARY KEY, token bigint NOT NULL)"
            );
            match client.batch_execute(&sql).await {
                Ok(()) => Ok(()),
                // Another client created it at the same moment.
                Err(err)
                    if err.code() == Some(&SqlState::UNIQUE_VIOLATION)
                        || err.code() == Some(&SqlState::DUPLICATE_TABLE) =>
                {
                    Ok(())
                }
                Err(err) => Err(store_error(err)),
            }
        })
        .await?;
    let sql = format!(
        "INSERT INTO {FENCING_TABLE} AS f (name, token) VALUES ($1, 1) \
         ON CONFLICT (name) DO UPDATE SET token = f.token + 1 RETURNING token"
    );
    let statement = conn.prepared(&sql).await.map_err(store_error)?;
    let row = client
        .query_one(&statement, &[&name])
        .await
        .map_err(store_error)?;
    let token: i64 = row.get(0);
    u64::try_from(token).map_err(|_| Error::UnexpectedReply {
        what: "the fencing counter",
    })
}
