//! The facade's client: `Client::connect(url)` and `client.lock(name)`.

use std::sync::Arc;

use keylatch_core::{Owner, OwnerId, Result};

use keylatch_redis::{ClientStats, Config, LuaScript};

use crate::expirable::PermitExpirableSemaphore;
use crate::locks::{FairLock, Kind, ReentrantLock};
use crate::redis_only::{CountDownLatch, MultiValueLock, SpinLock};
use crate::rwlock::RwLock;
use crate::semaphore::Semaphore;
use crate::store::{Store, is_zookeeper_url};

/// A connection to the store — Redis, or a ZooKeeper ensemble with the `zookeeper` feature (the
/// URL picks it) — and the factory of every keylatch primitive. Cheap to clone: clones share
/// the connections, the pub/sub connection and the watchdog (on ZooKeeper: the session).
///
/// The lock family (reentrant, fair, non-reentrant, read-write) and the semaphores (Curator's
/// `InterProcessSemaphoreV2` on ZooKeeper, the maximum from `with_permits`) run on both
/// stores, with the same guards and permits. What exists on Redis only (fixed leases, setting
/// a semaphore's count, the latch, the spin and multi-value locks, Redis-layout reads such as
/// `hold_count`) answers
/// [`Error::Unsupported`](crate::Error::Unsupported) on ZooKeeper; docs/choosing-a-primitive.md
/// ("Redis or ZooKeeper") compares the two.
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
    store: Store,
    /// The configuration it was made with (on Redis: the Redis client's own).
    config: Arc<Config>,
    /// Shared by the clones: its drop is the drop of the last clone.
    _last: Arc<LastClone>,
}

/// Notices the drop of the last clone of a [`Client`].
#[derive(Debug)]
struct LastClone(Store);

impl Drop for LastClone {
    fn drop(&mut self) {
        if let Store::Redis(redis) = &self.0 {
            redis.abandon();
        }
    }
}

/// Which store a [`Client`] is connected to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreKind {
    /// Redis: single, TLS, Sentinel or Cluster.
    Redis,
    /// A ZooKeeper ensemble (`zk://`).
    ZooKeeper,
}

/// Every script of every primitive, preloaded at connect.
fn all_scripts() -> Vec<&'static LuaScript> {
    let mut scripts = keylatch_reentrant::SCRIPTS.to_vec();
    scripts.extend_from_slice(&keylatch_reentrant::MULTI_VALUE_SCRIPTS);
    scripts.extend_from_slice(keylatch_fair::SCRIPTS);
    scripts.extend_from_slice(keylatch_rwlock::SCRIPTS);
    scripts.extend_from_slice(keylatch_semaphore::SCRIPTS);
    scripts.extend_from_slice(keylatch_latch::SCRIPTS);
    scripts.extend_from_slice(keylatch_queue::SCRIPTS);
    scripts
}

impl Client {
    /// Connects to `url` with the default configuration: `redis://`, `rediss://` (TLS, verified
    /// against the system's roots), `redis+unix://`, `redis+sentinel://host:port,…/service`
    /// (see [`Config::url`]), or, with the `zookeeper` feature,
    /// `zk://[user[:password]@]host:port[,host:port…][/chroot][?acl=…]` (a ZooKeeper ensemble; see
    /// `Client::connect_zookeeper` for its settings) and, with `zookeeper-tls`, `zk+tls://…`
    /// (its TLS port: give the CA in [`Config::tls`], see [`connect_with`](Client::connect_with)).
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
    /// A `zk://` URL connects to ZooKeeper: the session timeout asked for is
    /// [`Config::watchdog_timeout`] (how long a crashed holder keeps its locks, as on Redis;
    /// the server bounds it), the release and shutdown timeouts are `config`'s, and the other
    /// Redis settings do not apply there. A `zk+tls://` URL (the `zookeeper-tls` feature) takes
    /// its TLS files from [`Config::tls`] as `rediss://` does: `ca_file` (required: the
    /// server's certificate is verified against it), `cert_file` and `key_file` for a server
    /// with `ssl.clientAuth=need`; `insecure` is refused there.
    ///
    /// # Errors
    /// As [`connect`](Client::connect), and [`Error::InvalidConfig`](crate::Error::InvalidConfig),
    /// [`Error::TlsFile`](crate::Error::TlsFile).
    /// A `zk://` URL in a build without the `zookeeper` feature is
    /// [`Error::InvalidUrl`](crate::Error::InvalidUrl); a `zk+tls://` URL without
    /// `zookeeper-tls` is [`Error::InvalidConfig`](crate::Error::InvalidConfig). A
    /// `postgres://` or `postgresql://` URL is [`Error::Unsupported`](crate::Error::Unsupported)
    /// (nothing sent): use `keylatch::postgres::PgClient` (the `postgres` feature).
    pub async fn connect_with(config: Config) -> Result<Client> {
        if crate::store::is_postgres_url(config.url.expose_secret()) {
            return Err(crate::store::postgres_not_in_facade());
        }
        if is_zookeeper_url(config.url.expose_secret()) {
            let zk = crate::zk::connect(&config).await?;
            return Ok(Client::on(Store::ZooKeeper(zk), config));
        }
        Client::ready(keylatch_redis::Client::connect(config).await?).await
    }

    /// Connects to a ZooKeeper ensemble with ZooKeeper's own settings (session timeout, base
    /// path of the lock names, when a disconnected client's holds count as lost).
    ///
    /// ```no_run
    /// # async fn demo() -> keylatch::Result<()> {
    /// use std::time::Duration;
    /// use keylatch::zookeeper::ZkConfig;
    ///
    /// let settings = ZkConfig::default()
    ///     .with_session_timeout(Duration::from_secs(6))
    ///     .with_base_path("/apps/orders/locks");
    /// let client = keylatch::Client::connect_zookeeper("zk://127.0.0.1:2181", settings).await?;
    /// let guard = client.lock("nightly-report").lock().await?;
    /// guard.unlock().await?;
    /// client.shutdown().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`connect`](Client::connect), and [`Error::InvalidConfig`](crate::Error::InvalidConfig).
    #[cfg(feature = "zookeeper")]
    pub async fn connect_zookeeper(
        url: &str,
        settings: keylatch_zookeeper::ZkConfig,
    ) -> Result<Client> {
        let zk = crate::zk::ZkClient::new(
            keylatch_zookeeper::ZkClient::connect_with(url, settings).await?,
        );
        let mut config = Config::default();
        config.url = url.into();
        Ok(Client::on(Store::ZooKeeper(zk), config))
    }

    /// Wraps a ZooKeeper client the application already has.
    #[cfg(feature = "zookeeper")]
    pub fn from_zookeeper(client: keylatch_zookeeper::ZkClient) -> Client {
        let mut config = Config::default();
        config.url = "zk://(application client)".into();
        Client::on(Store::ZooKeeper(crate::zk::ZkClient::new(client)), config)
    }

    fn on(store: Store, config: Config) -> Client {
        Client {
            _last: Arc::new(LastClone(store.clone())),
            config: Arc::new(config),
            store,
        }
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

    /// The store it is connected to.
    pub fn store_kind(&self) -> StoreKind {
        match &self.store {
            Store::Redis(_) => StoreKind::Redis,
            Store::ZooKeeper(_) => StoreKind::ZooKeeper,
        }
    }

    /// The Redis client underneath, when the store is Redis: for the Redis layer's own types
    /// (`keylatch_redis`, and each primitive crate's `new(&client, name)`).
    pub fn as_redis(&self) -> Option<&keylatch_redis::Client> {
        match &self.store {
            Store::Redis(redis) => Some(redis),
            Store::ZooKeeper(_) => None,
        }
    }

    /// The ZooKeeper client underneath, when the store is ZooKeeper (its session id, the
    /// recipes' own types).
    #[cfg(feature = "zookeeper")]
    pub fn as_zookeeper(&self) -> Option<&keylatch_zookeeper::ZkClient> {
        match &self.store {
            Store::Redis(_) => None,
            Store::ZooKeeper(zk) => Some(zk.get()),
        }
    }

    /// The reentrant lock `name` (see [`ReentrantLock`]).
    pub fn lock(&self, name: &str) -> ReentrantLock {
        ReentrantLock::on(&self.store, name, Kind::Reentrant)
    }

    /// The fair (FIFO) lock `name` (see [`FairLock`]).
    pub fn fair_lock(&self, name: &str) -> FairLock {
        FairLock::on(&self.store, name, Kind::Reentrant)
    }

    /// The non-reentrant lock `name`: a second acquisition by its holder is
    /// [`Error::AlreadyHeld`](crate::Error::AlreadyHeld) (see [`keylatch_reentrant::ReentrantLock::non_reentrant`]).
    pub fn non_reentrant_lock(&self, name: &str) -> ReentrantLock {
        ReentrantLock::on(&self.store, name, Kind::NonReentrant)
    }

    /// The non-reentrant fair lock `name` (see [`keylatch_fair::FairLock::non_reentrant`]).
    pub fn non_reentrant_fair_lock(&self, name: &str) -> FairLock {
        FairLock::on(&self.store, name, Kind::NonReentrant)
    }

    /// The spin lock `name`: the reentrant lock without pub/sub (see
    /// [`SpinLock`](keylatch_reentrant::SpinLock)).
    pub fn spin_lock(&self, name: &str) -> SpinLock {
        SpinLock::on(&self.store, name, |redis| {
            keylatch_reentrant::SpinLock::new(redis, name)
        })
    }

    /// The values `values` of the group `group`, locked all-or-nothing in one script call
    /// (Redisson's `getMultiLock(group, values)`; see
    /// [`MultiValueLock`](keylatch_reentrant::MultiValueLock)).
    pub fn multi_value_lock<I, S>(&self, group: &str, values: I) -> MultiValueLock
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        MultiValueLock::on(&self.store, group, |redis| {
            keylatch_reentrant::MultiValueLock::new(redis, group, values)
        })
    }

    /// The read-write lock `name` (see [`RwLock`]).
    pub fn rw_lock(&self, name: &str) -> RwLock {
        RwLock::on(&self.store, name)
    }

    /// The counting semaphore `name` (see [`Semaphore`]; on ZooKeeper give its maximum with
    /// [`Semaphore::with_permits`]).
    pub fn semaphore(&self, name: &str) -> Semaphore {
        Semaphore::on(&self.store, name)
    }

    /// The permit-expirable semaphore `name` (see [`PermitExpirableSemaphore`]; on ZooKeeper
    /// give its maximum with [`PermitExpirableSemaphore::with_permits`]).
    pub fn permit_expirable_semaphore(&self, name: &str) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::on(&self.store, name)
    }

    /// The count-down latch `name` (see [`CountDownLatch`]).
    pub fn latch(&self, name: &str) -> CountDownLatch {
        CountDownLatch::on(&self.store, name, |redis| {
            keylatch_latch::CountDownLatch::new(redis, name)
        })
    }

    /// The delayed queue `name` in Redisson's `RDelayedQueue` layout, its values read and
    /// written by the codec `C` (see [`queue::DelayedQueue`](crate::queue::DelayedQueue)).
    ///
    /// # Errors
    /// [`Error::Unsupported`](crate::Error::Unsupported) on ZooKeeper (nothing is written).
    pub fn delayed_queue<C: crate::queue::Codec>(
        &self,
        name: &str,
    ) -> keylatch_core::Result<crate::queue::DelayedQueue<C>> {
        match &self.store {
            Store::Redis(redis) => Ok(crate::queue::DelayedQueue::new(redis, name)),
            Store::ZooKeeper(_) => Err(crate::store::redis_only("delayed queue", "delayed_queue")),
        }
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
        match &self.store {
            Store::Redis(redis) => redis.shutdown().await,
            Store::ZooKeeper(zk) => zk.shutdown().await,
        }
    }

    /// Whether [`shutdown`](Client::shutdown) has started.
    pub fn is_closed(&self) -> bool {
        match &self.store {
            Store::Redis(redis) => redis.is_closed(),
            Store::ZooKeeper(zk) => zk.background().is_closed(),
        }
    }

    /// The client's UUID: the first half of every owner id it writes.
    pub fn id(&self) -> uuid::Uuid {
        match &self.store {
            Store::Redis(redis) => redis.id(),
            Store::ZooKeeper(zk) => zk.id(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The owner id `owner` is written under by this client (`<client-uuid>:<number>`).
    pub fn owner_id(&self, owner: Owner) -> OwnerId {
        owner.resolve(self.id())
    }

    /// The client's counters: live holds, renewals, channels, reconnects, background work.
    pub fn stats(&self) -> ClientStats {
        match &self.store {
            Store::Redis(redis) => redis.stats(),
            Store::ZooKeeper(zk) => {
                let mut stats = ClientStats::default();
                stats.watchdog = zk.background().registry().stats();
                stats.background_pending = zk.background().pending();
                stats
            }
        }
    }

    /// Waits until every background release and undo has finished (a dropped guard releases
    /// in the background).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_idle(&self) {
        match &self.store {
            Store::Redis(redis) => redis.wait_idle().await,
            Store::ZooKeeper(zk) => zk.wait_idle().await,
        }
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
        match &self.store {
            Store::Redis(redis) => redis.connection().await,
            Store::ZooKeeper(_) => Err(crate::store::redis_only("client", "connection")),
        }
    }
}

impl From<keylatch_redis::Client> for Client {
    fn from(core: keylatch_redis::Client) -> Self {
        let config = core.config().clone();
        Client::on(Store::Redis(core), config)
    }
}
