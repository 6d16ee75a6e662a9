//! [`PgClient`]: a pool of sessions to one PostgreSQL server and the locks made on it, and its
//! [`PgConfig`].
//!
//! May import: keylatch-core, tokio-postgres, deadpool-postgres, `session`, `key`, `mutex`,
//! `rwlock`, `probe`.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use keylatch_core::{Background, Error, HoldSettings, Result, StoreError, WatchdogRegistry};
use tokio::time::Instant;
use tokio_postgres::NoTls;
use uuid::Uuid;

use crate::key::AdvisoryKey;
use crate::mutex::PgMutex;
use crate::rwlock::PgReadWriteLock;
use crate::session::{Shared, pool_error};

/// The settings of a [`PgClient`].
///
/// ```
/// use std::time::Duration;
/// use keylatch_postgres::PgConfig;
///
/// let config = PgConfig::default()
///     .with_probe_interval(Duration::from_millis(500))
///     .with_max_connections(32);
/// assert_eq!(config.probe_interval(), Duration::from_millis(500));
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct PgConfig {
    probe_interval: Duration,
    connect_timeout: Duration,
    max_connections: usize,
    /// What every store shares: the release and shutdown timeouts.
    hold: HoldSettings,
}

impl Default for PgConfig {
    fn default() -> PgConfig {
        PgConfig {
            probe_interval: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(5),
            max_connections: 64,
            hold: HoldSettings::default(),
        }
    }
}

impl PgConfig {
    /// How often the session of every hold is probed (`SELECT 1` on the holding connection).
    /// A session the server ended (`pg_terminate_backend`, a restart) makes the hold lost at
    /// the next probe; a server that does not answer makes it lost three intervals after its
    /// last answer. Default 1 s.
    pub fn with_probe_interval(mut self, interval: Duration) -> Self {
        self.probe_interval = interval;
        self
    }

    /// How long opening one connection may take. Default 5 s.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The most connections the client opens: every hold keeps one for its life, and every
    /// waiting acquisition one while it waits. Default 64.
    pub fn with_max_connections(mut self, max: usize) -> Self {
        self.max_connections = max;
        self
    }

    /// The longest an `unlock().await` waits for the server. Default 5 s.
    pub fn with_release_timeout(mut self, timeout: Duration) -> Self {
        self.hold = self.hold.with_release_timeout(timeout);
        self
    }

    /// The longest [`PgClient::shutdown`] waits for releases. Default 10 s.
    pub fn with_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.hold = self.hold.with_shutdown_timeout(timeout);
        self
    }

    /// The probe interval.
    pub fn probe_interval(&self) -> Duration {
        self.probe_interval
    }

    fn validate(&self) -> Result<()> {
        let invalid = |field, reason| Err(Error::InvalidConfig { field, reason });
        if self.probe_interval < Duration::from_millis(50) {
            return invalid("probe_interval", "must be at least 50ms");
        }
        if self.connect_timeout.is_zero() {
            return invalid("connect_timeout", "must not be zero");
        }
        if self.max_connections == 0 {
            return invalid("max_connections", "must not be zero");
        }
        self.hold.validate()
    }
}

/// Why a PostgreSQL URL was refused (the URL itself is never quoted: it may hold a password).
#[derive(Debug, thiserror::Error)]
#[error(
    "not a PostgreSQL connection URL (postgres://[user[:password]@]host[:port][/database][?param=value])"
)]
pub struct UrlError;

/// A pool of sessions to one PostgreSQL server, and the locks made on them. Cheap to clone
/// (clones share the pool).
///
/// Every hold keeps one session (a pooled connection) for its life; when that session ends
/// (the server ends it, restarts, or stops answering) the server has freed the lock, and the
/// hold's guard reports [`lost`](keylatch_core::LockGuard::lost).
#[derive(Clone)]
pub struct PgClient {
    pub(crate) shared: Arc<Shared>,
    config: Arc<PgConfig>,
}

impl fmt::Debug for PgClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgClient")
            .field("url", &self.shared.redacted)
            .field("id", &self.shared.id)
            .finish_non_exhaustive()
    }
}

impl PgClient {
    /// Connects with the default [`PgConfig`]; see [`connect_with`](PgClient::connect_with).
    ///
    /// # Errors
    /// As [`connect_with`](PgClient::connect_with).
    pub async fn connect(url: &str) -> Result<PgClient> {
        PgClient::connect_with(url, PgConfig::default()).await
    }

    /// Connects to `postgres://[user[:password]@]host[:port][/database][?param=value…]` (or
    /// `postgresql://…`, the parameters of libpq's URIs that tokio-postgres reads). One
    /// connection is opened at once, to report a server that cannot be reached now; more are
    /// opened as holds and waits need them. Each session sets `application_name` to
    /// `keylatch` unless the URL names one, and asks the server to check for a vanished
    /// client during waits (`client_connection_check_interval`) and to send TCP keepalives.
    ///
    /// # Errors
    /// [`Error::InvalidUrl`] and [`Error::InvalidConfig`] (nothing sent); [`Error::Connect`]
    /// when the server cannot be reached; [`Error::Auth`] when it refuses the credentials. The
    /// password never appears in an error, a log or a `Debug` output.
    ///
    /// # Cancel safety
    /// Cancel safe: a connection being opened is closed when the future is dropped.
    pub async fn connect_with(url: &str, config: PgConfig) -> Result<PgClient> {
        config.validate()?;
        let redacted: Arc<str> = Arc::from(keylatch_core::redact_url(url));
        let scheme_ok = ["postgres://", "postgresql://"].iter().any(|s| {
            url.get(..s.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(s))
        });
        let mut pg = match tokio_postgres::Config::from_str(url) {
            Ok(pg) if scheme_ok => pg,
            _ => {
                return Err(Error::InvalidUrl {
                    url: redacted.to_string(),
                    source: StoreError::new(UrlError),
                });
            }
        };
        if pg.get_application_name().is_none() {
            pg.application_name("keylatch");
        }
        let interval = config.probe_interval;
        let secs = interval.as_secs().max(1);
        let mut options = pg.get_options().unwrap_or_default().to_owned();
        options.push_str(&format!(
            " -c client_connection_check_interval={}ms -c tcp_keepalives_idle={secs} \
             -c tcp_keepalives_interval={secs} -c tcp_keepalives_count=3",
            interval.as_millis()
        ));
        pg.options(options.trim_start());
        pg.connect_timeout(config.connect_timeout)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(secs))
            .keepalives_interval(Duration::from_secs(secs))
            .keepalives_retries(3);
        let manager = Manager::from_config(
            pg,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(config.max_connections)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|_| Error::InvalidConfig {
                field: "max_connections",
                reason: "the pool could not be built",
            })?;
        // One connection now: a server that cannot be reached is reported by connect.
        drop(pool.get().await.map_err(|e| pool_error(e, &redacted))?);
        let registry = WatchdogRegistry::new();
        let background = Background::new(registry, config.hold);
        let shared = Arc::new(Shared::new(
            pool,
            background,
            (interval, config.connect_timeout),
            redacted,
        ));
        crate::probe::spawn(Arc::downgrade(&shared), interval);
        Ok(PgClient {
            shared,
            config: Arc::new(config),
        })
    }

    /// The reentrant lock `name`: the advisory lock `hashtextextended(name, 0)` (see
    /// [`AdvisoryKey`]).
    ///
    /// # Errors
    /// [`Error::InvalidName`] for an empty or too long name.
    pub fn lock(&self, name: &str) -> Result<PgMutex> {
        self.lock_with_key(name, AdvisoryKey::Hashed(name.to_owned()))
    }

    /// The reentrant lock `name` on the advisory lock `key` given directly (an existing
    /// application's `pg_advisory_lock(a, b)`); `name` names its fencing counter and its
    /// guards.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for an empty or too long name.
    pub fn lock_with_key(&self, name: &str, key: AdvisoryKey) -> Result<PgMutex> {
        keylatch_core::names::validate_name_length(name)?;
        Ok(PgMutex::new(self.shared.clone(), name, key))
    }

    /// The read-write lock `name` on the key `hashtextextended(name, 0)`.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for an empty or too long name.
    pub fn read_write_lock(&self, name: &str) -> Result<PgReadWriteLock> {
        self.read_write_lock_with_key(name, AdvisoryKey::Hashed(name.to_owned()))
    }

    /// The read-write lock `name` on the advisory lock `key` given directly.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for an empty or too long name.
    pub fn read_write_lock_with_key(
        &self,
        name: &str,
        key: AdvisoryKey,
    ) -> Result<PgReadWriteLock> {
        keylatch_core::names::validate_name_length(name)?;
        Ok(PgReadWriteLock::new(self.shared.clone(), name, key))
    }

    /// This client's UUID: the first half of its owner ids.
    pub fn id(&self) -> Uuid {
        self.shared.id
    }

    /// The background-work handle (hold registry, background releases).
    pub fn background(&self) -> &Background {
        &self.shared.background
    }

    /// Connections open and idle in the pool (for tests and monitoring).
    pub fn pool_status(&self) -> (usize, usize) {
        let status = self.shared.pool.status();
        (status.size, status.available)
    }

    /// Waits until every background release (of a dropped guard, or of a dropped
    /// acquisition's session) has finished.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_idle(&self) {
        self.shared.background.wait_idle().await;
    }

    /// Ends the client: refuses new acquisitions, ends waits, releases every hold (guards
    /// report lost), and closes the pool's connections.
    ///
    /// # Errors
    /// [`Error::Timeout`] when something was still unfinished after the shutdown timeout (the
    /// connections are closed all the same, which ends their sessions and frees their locks).
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped shutdown leaves the pool open until the client drops.
    pub async fn shutdown(&self) -> Result<()> {
        let limit = self.config.hold.shutdown_timeout();
        let deadline = Instant::now() + limit;
        let result = self.shared.background.shutdown(deadline, limit).await;
        self.shared.pool.close();
        result
    }
}
