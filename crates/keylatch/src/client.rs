//! The facade's client: `Client::connect(url)` and `client.lock(name)`.

use std::sync::Arc;

use keylatch_core::{Owner, OwnerId, Result};

use keylatch_fair::FairLock;
use keylatch_latch::CountDownLatch;
use keylatch_redis::{ClientStats, Config, LuaScript};
use keylatch_reentrant::ReentrantLock;
use keylatch_rwlock::RwLock;
use keylatch_semaphore::{PermitExpirableSemaphore, Semaphore};

/// A connection to Redis, and the factory of every keylatch primitive. Cheap to clone: clones
/// share the connections, the pub/sub connection and the watchdog.
///
/// End it with [`shutdown`](Client::shutdown) before the program ends: it releases every hold
/// and permit still taken. A client whose last clone is dropped while holds are live, without a
/// shutdown, logs a warning and releases them in the background (which a runtime that is
/// shutting down may not let finish).
///
/// ```no_run
/// # async fn demo() -> keylatch::Result<()> {
/// let client = keylatch::Client::connect("redis://127.0.0.1:6379").await?;
/// let guard = client.lock("nightly-report").lock().await?;
/// guard.unlock().await?;
/// client.shutdown().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    core: keylatch_redis::Client,
    /// Shared by the clones: its drop is the drop of the last clone.
    _last: Arc<LastClone>,
}

/// Notices the drop of the last clone of a [`Client`].
#[derive(Debug)]
struct LastClone(keylatch_redis::Client);

impl Drop for LastClone {
    fn drop(&mut self) {
        self.0.abandon();
    }
}

/// Every script of every primitive, preloaded at connect.
fn all_scripts() -> Vec<&'static LuaScript> {
    let mut scripts = keylatch_reentrant::SCRIPTS.to_vec();
    scripts.extend_from_slice(&keylatch_reentrant::MULTI_VALUE_SCRIPTS);
    scripts.extend_from_slice(keylatch_fair::SCRIPTS);
    scripts.extend_from_slice(keylatch_rwlock::SCRIPTS);
    scripts.extend_from_slice(keylatch_semaphore::SCRIPTS);
    scripts.extend_from_slice(keylatch_latch::SCRIPTS);
    scripts
}

impl Client {
    /// Connects to `url` with the default configuration: `redis://`, `rediss://` (TLS, verified
    /// against the system's roots), `redis+unix://`, or `redis+sentinel://host:port,…/service`
    /// (see [`Config::url`]).
    ///
    /// # Errors
    /// [`Error::InvalidUrl`](crate::Error::InvalidUrl), [`Error::Connect`](crate::Error::Connect)
    /// (naming the URL), [`Error::Auth`](crate::Error::Auth),
    /// [`Error::TlsVerification`](crate::Error::TlsVerification).
    pub async fn connect(url: &str) -> Result<Client> {
        let mut config = Config::default();
        config.url = url.into();
        Client::connect_with(config).await
    }

    /// Connects with [`Config::from_env`]: the URL from `KEYLATCH_URL`, else
    /// `KEYLATCH_REDIS_URL`, else `REDIS_URL`, else `redis://127.0.0.1:6379`, the password
    /// from `KEYLATCH_REDIS_PASSWORD`, TLS files from `KEYLATCH_TLS_CA`, `KEYLATCH_TLS_CERT` and `KEYLATCH_TLS_KEY`.
    ///
    /// # Errors
    /// As [`connect`](Client::connect).
    pub async fn connect_from_env() -> Result<Client> {
        Client::connect_with(Config::from_env()).await
    }

    /// Connects with a full configuration.
    ///
    /// # Errors
    /// As [`connect`](Client::connect), and [`Error::InvalidConfig`](crate::Error::InvalidConfig).
    pub async fn connect_with(config: Config) -> Result<Client> {
        Client::ready(keylatch_redis::Client::connect(config).await?).await
    }

    /// Builds a client on a redis-rs client the application already has, so that its Redis
    /// settings (address, TLS, credentials) live in one place. Commands and the pub/sub
    /// connection both go through it; `config`'s URL, credentials and TLS are not used.
    ///
    /// ```no_run
    /// # async fn demo() -> keylatch::Result<()> {
    /// use keylatch::redis;
    /// let app_client = redis::Client::open("redis://127.0.0.1:6379").expect("a valid url");
    /// let client = keylatch::Client::from_redis_client(app_client, keylatch::Config::default()).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`connect_with`](Client::connect_with).
    pub async fn from_redis_client(client: crate::redis::Client, config: Config) -> Result<Client> {
        Client::ready(keylatch_redis::Client::from_redis_client(client, config).await?).await
    }

    /// Builds a client on a deadpool-redis pool the application already has. keylatch takes
    /// [`Config::connections`] connections from the pool and keeps them; its one pub/sub
    /// connection is opened through `pubsub`, a redis-rs client with the same settings as the
    /// pool (Redis serves pub/sub on a connection of its own, which a pool cannot lend).
    ///
    /// ```no_run
    /// # async fn demo() -> keylatch::Result<()> {
    /// use keylatch::{deadpool_redis, redis};
    /// let url = "redis://127.0.0.1:6379";
    /// let pool = deadpool_redis::Config::from_url(url)
    ///     .create_pool(Some(deadpool_redis::Runtime::Tokio1))
    ///     .expect("a valid url");
    /// let pubsub = redis::Client::open(url).expect("a valid url");
    /// let client = keylatch::Client::from_pool(pool, pubsub, keylatch::Config::default()).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`connect_with`](Client::connect_with), and [`Error::Pool`](crate::Error::Pool).
    pub async fn from_pool(
        pool: crate::deadpool_redis::Pool,
        pubsub: crate::redis::Client,
        config: Config,
    ) -> Result<Client> {
        Client::ready(keylatch_redis::Client::from_pool(pool, pubsub, config).await?).await
    }

    async fn ready(core: keylatch_redis::Client) -> Result<Client> {
        core.preload(&all_scripts()).await?;
        Ok(Client::from(core))
    }

    /// The reentrant lock `name` (see [`ReentrantLock`]).
    pub fn lock(&self, name: &str) -> ReentrantLock {
        ReentrantLock::new(&self.core, name)
    }

    /// The fair (FIFO) lock `name` (see [`FairLock`]).
    pub fn fair_lock(&self, name: &str) -> FairLock {
        FairLock::new(&self.core, name)
    }

    /// The non-reentrant lock `name`: a second acquisition by its holder is
    /// [`Error::AlreadyHeld`](crate::Error::AlreadyHeld) (see [`ReentrantLock::non_reentrant`]).
    pub fn non_reentrant_lock(&self, name: &str) -> ReentrantLock {
        ReentrantLock::non_reentrant(&self.core, name)
    }

    /// The non-reentrant fair lock `name` (see [`FairLock::non_reentrant`]).
    pub fn non_reentrant_fair_lock(&self, name: &str) -> FairLock {
        FairLock::non_reentrant(&self.core, name)
    }

    /// The spin lock `name`: the reentrant lock without pub/sub (see
    /// [`SpinLock`](keylatch_reentrant::SpinLock)).
    pub fn spin_lock(&self, name: &str) -> keylatch_reentrant::SpinLock {
        keylatch_reentrant::SpinLock::new(&self.core, name)
    }

    /// The values `values` of the group `group`, locked all-or-nothing in one script call
    /// (Redisson's `getMultiLock(group, values)`; see
    /// [`MultiValueLock`](keylatch_reentrant::MultiValueLock)).
    pub fn multi_value_lock<I, S>(
        &self,
        group: &str,
        values: I,
    ) -> keylatch_reentrant::MultiValueLock
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        keylatch_reentrant::MultiValueLock::new(&self.core, group, values)
    }

    /// The read-write lock `name` (see [`RwLock`]).
    pub fn rw_lock(&self, name: &str) -> RwLock {
        RwLock::new(&self.core, name)
    }

    /// The counting semaphore `name` (see [`Semaphore`]).
    pub fn semaphore(&self, name: &str) -> Semaphore {
        Semaphore::new(&self.core, name)
    }

    /// The permit-expirable semaphore `name` (see [`PermitExpirableSemaphore`]).
    pub fn permit_expirable_semaphore(&self, name: &str) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(&self.core, name)
    }

    /// The count-down latch `name` (see [`CountDownLatch`]).
    pub fn latch(&self, name: &str) -> CountDownLatch {
        CountDownLatch::new(&self.core, name)
    }

    /// Ends the client: refuses new acquisitions, ends the waits in progress with
    /// [`Error::Closed`](crate::Error::Closed), releases every hold and permit it still has,
    /// waits for the background releases, and stops its background tasks, all within
    /// [`Config::shutdown_timeout`]. Every call after it returns `Closed`.
    ///
    /// ```no_run
    /// # async fn demo() -> keylatch::Result<()> {
    /// let client = keylatch::Client::connect_from_env().await?;
    /// let guard = client.lock("nightly-report").lock().await?;
    /// tokio::select! {
    ///     _ = tokio::signal::ctrl_c() => eprintln!("interrupted"),
    ///     _ = guard.lost() => eprintln!("lock lost"),
    ///     _ = async { /* the work */ } => {}
    /// }
    /// client.shutdown().await?; // the lock is released even if the work was interrupted
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::ShutdownUnfinished`](crate::Error::ShutdownUnfinished) when semaphore releases
    /// were still unconfirmed at the timeout (the server could not be reached): it lists them,
    /// semaphore name and permit count. [`Error::Timeout`](crate::Error::Timeout) when other
    /// releases were unfinished at the timeout (their leases end them). The client is closed
    /// all the same.
    ///
    /// # Cancel safety
    /// Once polled, the client is closing; dropping the future leaves the releases to the
    /// background.
    pub async fn shutdown(&self) -> Result<()> {
        self.core.shutdown().await
    }

    /// Whether [`shutdown`](Client::shutdown) has started.
    pub fn is_closed(&self) -> bool {
        self.core.is_closed()
    }

    /// The client's UUID: the first half of every owner id it writes.
    pub fn id(&self) -> uuid::Uuid {
        self.core.id()
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        self.core.config()
    }

    /// The owner id `owner` is written under by this client (`<client-uuid>:<number>`).
    pub fn owner_id(&self, owner: Owner) -> OwnerId {
        self.core.owner_id(owner)
    }

    /// The client's counters: live holds, renewals, channels, reconnects, background work.
    pub fn stats(&self) -> ClientStats {
        self.core.stats()
    }

    /// Waits until every background release and undo has finished (a dropped guard releases
    /// in the background).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_idle(&self) {
        self.core.wait_idle().await;
    }

    /// A new connection of its own to the primary, with the client's settings (address, TLS,
    /// credentials; with Sentinel, the primary of the moment), for the application's own
    /// commands. On a Redis Cluster it is a cluster connection, which sends each command to the
    /// node that owns its key. It does not follow a Sentinel failover: open another one after
    /// an error.
    ///
    /// # Errors
    /// [`Error::Connect`](crate::Error::Connect), [`Error::Timeout`](crate::Error::Timeout),
    /// [`Error::Auth`](crate::Error::Auth), [`Error::Closed`](crate::Error::Closed).
    pub async fn connection(&self) -> Result<crate::Connection> {
        self.core.connection().await
    }
}

impl From<keylatch_redis::Client> for Client {
    fn from(core: keylatch_redis::Client) -> Self {
        Client {
            _last: Arc::new(LastClone(core.clone())),
            core,
        }
    }
}
