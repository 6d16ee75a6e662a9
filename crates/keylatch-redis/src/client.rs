//! The client: connections, identity, and the shared machinery of every primitive.

use std::fmt;
use std::sync::Arc;

use deadpool_redis::redis::{self, FromRedisValue, Value};
use keylatch_core::{
    Acquisition, Background, Error, Owner, OwnerId, ReleaseTicket, Result, StoreError, UndoGuard,
    WatchdogRegistry, WatchdogStats,
};
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

use crate::connection::commands::Commands;
use crate::connection::config::Config;
use crate::connection::script::{LuaScript, ScriptCall};
use crate::connection::topology::Topology;
use crate::connection::transport::{self, Endpoint};
use crate::pubsub::PubSubHub;

/// A connection to one Redis server, shared by every lock made from it. Cheap to clone.
///
/// A client has a random UUID (the first half of every owner id it writes), a few multiplexed
/// command connections from a deadpool-redis pool, one dedicated pub/sub connection
/// ([`PubSubHub`]) and one watchdog task ([`WatchdogRegistry`]). Its background tasks stop when
/// the last clone (and the last guard, which holds a clone) is dropped.
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

struct ClientInner {
    id: Uuid,
    config: Config,
    commands: Arc<Commands>,
    topology: Arc<Topology>,
    hub: PubSubHub,
    /// The hold registry, background releases and undos, acquisitions under way, and the
    /// shutdown's store-independent part: what guards and waits receive.
    background: Background,
    tasks: Vec<tokio::task::AbortHandle>,
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// A client's counters, for tests and monitoring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientStats {
    /// The watchdog's counters (live holds, renewals).
    pub watchdog: WatchdogStats,
    /// Pub/sub channels in use.
    pub channels: usize,
    /// Local waiters subscribed, summed over channels.
    pub subscribers: usize,
    /// Times the pub/sub connection was re-established.
    pub hub_reconnects: u64,
    /// Whether the pub/sub connection is up (on a cluster: the connection to every node).
    pub hub_connected: bool,
    /// Messages the pub/sub connection delivered to this client's waiters, in all.
    pub hub_messages: u64,
    /// Whether the server accepts pattern subscriptions (`PSUBSCRIBE`) from this client: an
    /// ACL user without them gets one channel per waiting name instead.
    pub hub_patterns: bool,
    /// Letters this client's waiters acted on ([`PubSubHub::letters`]): for the fair lock,
    /// locks handed to them on release and taken from the message, with no request of their
    /// own (a grant whose letter a wait cannot trust is taken by its next attempt instead).
    pub letters: u64,
    /// Background releases and undos not finished yet.
    pub background_pending: usize,
    /// Times a script had to be reloaded after `NOSCRIPT`.
    pub script_reloads: u64,
    /// On a Redis Cluster: redirections followed (`MOVED`, `ASK`) and back-offs while a slot
    /// had no reachable owner.
    pub cluster_redirections: u64,
    /// On a Redis Cluster: the primaries in the slot map last read (0 elsewhere, or before
    /// the first renewal read it).
    pub cluster_primaries: usize,
    /// On a Redis Cluster: whether wake-ups go by sharded pub/sub.
    pub sharded_pubsub: bool,
    /// Pipelined round trips sent for batches of script calls (the watchdog's renewals): one
    /// per batch on one server, one per node per batch on a cluster.
    pub batch_round_trips: u64,
    /// Times the primary moved or may have (Sentinel's `+switch-master`, a `READONLY` reply):
    /// each time, the client reconnected and re-checked every hold.
    pub primary_moves: u64,
    /// Times the primary was looked up through the sentinels (zero without Sentinel).
    pub primary_lookups: u64,
    /// Coalesced script calls sent ([`Config::coalesce`]): each carried several callers'
    /// acquisitions or releases.
    pub coalesced_calls: u64,
    /// The acquisitions and releases those coalesced calls carried.
    pub coalesced_requests: u64,
}

/// Whether the server behind `client` runs in cluster mode (`INFO cluster`), asked on a
/// connection of its own that is closed after. A server that refuses `INFO` (an ACL user
/// without it) is taken for a single server.
async fn runs_cluster(client: &redis::Client, config: &Config, shown: &str) -> Result<bool> {
    if matches!(
        client.get_connection_info().addr(),
        redis::ConnectionAddr::Unix(_)
    ) {
        return Ok(false);
    }
    let settings = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(config.connect_timeout))
        .set_response_timeout(Some(config.response_timeout));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&settings)
        .await
        .map_err(|source| connect_error(shown, config, source))?;
    let info: redis::RedisResult<String> = redis::cmd("INFO")
        .arg("cluster")
        .query_async(&mut conn)
        .await;
    match info {
        Ok(info) => Ok(info.lines().any(|line| line.trim() == "cluster_enabled:1")),
        Err(err) => match crate::error::from_redis(err.clone()) {
            // A server that wants credentials refuses INFO first: say so, not what the
            // script loading that would follow fails with.
            auth @ Error::Auth(_) => Err(auth),
            transient if transient.is_transient() => Err(connect_error(shown, config, err)),
            _ => Ok(false),
        },
    }
}

fn connect_error(shown: &str, config: &Config, source: redis::RedisError) -> Error {
    if transport::is_tls_verification(&source) {
        return Error::TlsVerification {
            url: shown.to_owned(),
            source: StoreError::new(source),
        };
    }
    match crate::error::from_redis(source) {
        Error::Connection(source) | Error::Store(source) => Error::Connect {
            url: shown.to_owned(),
            source,
        },
        Error::Timeout { .. } => Error::Timeout {
            after: config.connect_timeout,
        },
        other => other,
    }
}

impl Client {
    /// Connects: opens the command connections (so an unreachable server fails here, naming
    /// the URL) and starts the pub/sub hub and the watchdog.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`], [`Error::InvalidUrl`], [`Error::Connect`], [`Error::Auth`].
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub async fn connect(config: Config) -> Result<Client> {
        config.validate()?;
        let shown = config.url.redacted();
        let topology = match Endpoint::parse(config.url.expose_secret())? {
            Endpoint::Single => {
                let client = transport::single_client(&config)?;
                if runs_cluster(&client, &config, &shown).await? {
                    // A node of a cluster: the whole cluster, with this node as the seed.
                    let settings = transport::ClusterSettings::from_node(&config)?;
                    Topology::cluster(settings, &config, shown)?
                } else {
                    Topology::single(client, &config, shown)
                }
            }
            Endpoint::Sentinel(url) => {
                let resolver = transport::sentinel_client(&config, &url)?;
                Topology::sentinel(resolver, url.service, &config, shown)
            }
            Endpoint::Cluster(url) => {
                let settings = transport::ClusterSettings::from_url(&config, &url)?;
                Topology::cluster(settings, &config, shown)?
            }
        };
        Client::start(config, topology).await
    }

    /// Connects through a redis-rs client the application already has: its settings (address,
    /// TLS, credentials) are used for every connection, commands and pub/sub alike.
    /// `config.url`, credentials and TLS settings are not used.
    ///
    /// # Errors
    /// As [`connect`](Client::connect).
    pub async fn from_redis_client(client: redis::Client, config: Config) -> Result<Client> {
        config.validate()?;
        let shown = keylatch_core::redact_url(&client_url(&client));
        let topology = Topology::single(client, &config, shown);
        Client::start(config, topology).await
    }

    /// Connects through a deadpool-redis pool the application already has: keylatch takes
    /// [`Config::connections`] connections from it and keeps them (deadpool pings each
    /// connection it hands out, which would cost a round trip per call), and opens its one
    /// pub/sub connection through `pubsub`, a client with the same settings.
    /// `config.url`, credentials and TLS settings are not used.
    ///
    /// # Errors
    /// As [`connect`](Client::connect), and [`Error::Pool`].
    pub async fn from_pool(
        pool: deadpool_redis::Pool,
        pubsub: redis::Client,
        config: Config,
    ) -> Result<Client> {
        config.validate()?;
        let shown = keylatch_core::redact_url(&client_url(&pubsub));
        let topology = Topology::pool(pool, pubsub, &config, shown);
        Client::start(config, topology).await
    }

    async fn start(config: Config, topology: Topology) -> Result<Client> {
        let topology = Arc::new(topology);
        let commands = Arc::new(Commands::new(
            topology.clone(),
            config.connections,
            config.response_timeout,
            config.acknowledgement(),
            config.sharded_pubsub,
            config.coalesce,
        ));
        commands.warm_up().await?;
        let reconnected = Arc::new(Notify::new());
        let (hub, hub_tasks) = PubSubHub::start(
            topology.clone(),
            config.subscription_linger,
            reconnected.clone(),
            config.sharded_pubsub,
            config.pubsub_patterns,
        );
        let registry = WatchdogRegistry::new();
        let watchdog_task = crate::renewal::start(
            &registry,
            commands.clone(),
            reconnected,
            config.watchdog_batch_size,
        );
        let settle_window = (config.response_timeout * 3 + std::time::Duration::from_secs(1))
            .max(config.settle_window);
        let background = Background::new(registry, config.release_timeout, settle_window);
        let watcher = Topology::start_watcher(&topology);
        Ok(Client {
            inner: Arc::new(ClientInner {
                id: Uuid::new_v4(),
                config,
                commands,
                topology,
                hub,
                background,
                tasks: hub_tasks
                    .iter()
                    .chain([&watchdog_task])
                    .chain(watcher.as_ref())
                    .map(tokio::task::JoinHandle::abort_handle)
                    .collect(),
            }),
        })
    }

    /// The client's UUID: the first half of every owner id it writes.
    pub fn id(&self) -> Uuid {
        self.inner.id
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The owner id `owner` resolves to now (see [`Owner`]).
    pub fn owner_id(&self, owner: Owner) -> OwnerId {
        owner.resolve(self.inner.id)
    }

    /// The pub/sub hub.
    #[doc(hidden)]
    pub fn hub(&self) -> &PubSubHub {
        &self.inner.hub
    }

    /// The hold registry.
    #[doc(hidden)]
    pub fn watchdog(&self) -> &WatchdogRegistry {
        self.inner.background.registry()
    }

    /// What the client's guards and waits share: the hold registry, background work, the
    /// acquisitions under way (see [`Background`]).
    #[doc(hidden)]
    pub fn background(&self) -> &Background {
        &self.inner.background
    }

    /// Loads scripts now, in one round trip, so the first calls need no reload.
    ///
    /// # Errors
    /// Redis errors.
    #[doc(hidden)]
    pub async fn preload(&self, scripts: &[&'static LuaScript]) -> Result<()> {
        self.inner.commands.load(scripts).await
    }

    /// Runs a script call and converts its reply.
    ///
    /// # Errors
    /// [`Error::WrongType`] naming the call's first key, [`Error::UnexpectedReply`], Redis
    /// errors. Never `NOSCRIPT`.
    #[doc(hidden)]
    pub async fn eval<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T> {
        self.inner.commands.eval(call).await
    }

    /// Runs a script call and returns its raw reply.
    ///
    /// # Errors
    /// As [`eval`](Client::eval).
    #[doc(hidden)]
    pub async fn eval_value(&self, call: &ScriptCall) -> Result<Value> {
        self.inner.commands.eval_value(call).await
    }

    /// Runs a script call that may take something, with the undo armed for it, and returns its
    /// reply with the undo (for the caller to disarm or run, as after
    /// [`eval_value`](Client::eval_value)). A call of a
    /// [`coalescing`](LuaScript::coalescing) script may go to Redis together with other
    /// callers' calls ([`Config::coalesce`](crate::Config::coalesce)): if this future is
    /// dropped before the call was sent, it is not sent; if after, the undo travels with the
    /// reply and runs (in the background) when the reply says something was taken or was lost.
    ///
    /// # Errors
    /// As [`eval`](Client::eval).
    #[doc(hidden)]
    pub fn eval_undoable(
        &self,
        call: ScriptCall,
        undo: UndoGuard,
    ) -> impl Future<Output = (Result<Value>, UndoGuard)> + Send + '_ {
        self.inner.commands.eval_undoable(call, undo)
    }

    /// Runs a script call that takes nothing and needs no undo of its own (such as a release
    /// whose undo the caller keeps), coalesced with other callers' calls when its script is
    /// [`coalescing`](LuaScript::coalescing) (see [`eval_undoable`](Client::eval_undoable)).
    /// If this future is dropped before the call was sent, it is not sent.
    ///
    /// # Errors
    /// As [`eval`](Client::eval).
    #[doc(hidden)]
    pub async fn eval_coalesced(&self, call: ScriptCall) -> Result<Value> {
        self.inner
            .commands
            .eval_undoable(call, UndoGuard::disarmed())
            .await
            .0
    }

    /// Runs idempotent script calls in one pipelined round trip.
    ///
    /// # Errors
    /// As [`eval`](Client::eval).
    #[doc(hidden)]
    pub async fn eval_batch(&self, calls: &[ScriptCall]) -> Result<Vec<Result<Value>>> {
        self.inner.commands.eval_batch(calls).await
    }

    /// The time left on `key`'s expiry (`PTTL`); `None` when the key does not exist.
    ///
    /// # Errors
    /// [`Error::NoTtl`] for a key that exists without an expiry, [`Error::WrongType`], Redis
    /// errors.
    #[doc(hidden)]
    pub async fn remaining_ttl(&self, key: &str) -> Result<Option<std::time::Duration>> {
        let pttl: i64 = self.query(redis::cmd("PTTL").arg(key), key).await?;
        match pttl {
            -2 => Ok(None),
            -1 => Err(Error::NoTtl {
                key: key.to_owned(),
            }),
            ms => Ok(Some(std::time::Duration::from_millis(
                u64::try_from(ms).unwrap_or(0),
            ))),
        }
    }

    /// Runs one plain command (reads such as `PTTL`, `HGET`).
    ///
    /// # Errors
    /// [`Error::WrongType`] naming `key`, Redis errors.
    #[doc(hidden)]
    pub async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd, key: &str) -> Result<T> {
        self.inner.commands.query(cmd, key).await
    }

    /// A new connection of its own to the primary, with the client's settings (address, TLS,
    /// credentials; with Sentinel, the current primary), for the application's own commands.
    /// It does not follow a failover: open another one after an error.
    ///
    /// # Errors
    /// [`Error::Connect`], [`Error::Timeout`], [`Error::Auth`], [`Error::TlsVerification`],
    /// [`Error::Closed`].
    pub async fn connection(&self) -> Result<crate::Connection> {
        self.inner.commands.open().await
    }

    /// Checks a lock name under this client's configuration (see
    /// [`validate_name`](crate::validate_name) and [`Config::hash_tagged_names`]).
    ///
    /// # Errors
    /// [`Error::InvalidName`].
    pub fn validate_name(&self, name: &str) -> Result<()> {
        crate::keys::validate_name_with(name, self.inner.config.hash_tagged_names)
    }

    /// The settle window: how long a release or an undo whose reply was lost is retried (a
    /// semaphore's release goes on past it, while the client lives), and how long the request
    /// markers that make those retries idempotent live once the server applied their request:
    /// [`Config::settle_window`], and at least `3 × response_timeout + 1 s`.
    #[doc(hidden)]
    pub fn settle_window(&self) -> std::time::Duration {
        self.inner.background.settle_window()
    }

    /// Lists a release of `permits` permits of the semaphore `name` as under way until the
    /// returned ticket drops: if [`shutdown`](Client::shutdown) gives up while it is, it
    /// reports it ([`Error::ShutdownUnfinished`]).
    #[doc(hidden)]
    pub fn track_release(&self, name: &Arc<str>, permits: u64) -> ReleaseTicket {
        self.inner.background.track_release(name, permits)
    }

    /// Whether [`shutdown`](Client::shutdown) has started.
    pub fn is_closed(&self) -> bool {
        self.inner.background.is_closed()
    }

    /// Marks an acquisition as under way (see [`Background::begin_acquisition`]).
    ///
    /// # Errors
    /// [`Error::Closed`].
    #[doc(hidden)]
    pub fn begin_acquisition(&self, primitive: &'static str) -> Result<Acquisition> {
        self.inner.background.begin_acquisition(primitive)
    }

    /// Completes when the client's shutdown starts.
    #[doc(hidden)]
    pub fn closing(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.inner.background.closing()
    }

    /// Ends the client cleanly: refuses new acquisitions and ends the waits in progress with
    /// [`Error::Closed`], releases every hold and permit the client still has (their guards then
    /// report [`lost`](keylatch_core::LockGuard::lost), and their `unlock` returns `Closed`), waits for
    /// the background releases and undos, then stops the watchdog and the pub/sub hub. Every
    /// call after it returns [`Error::Closed`]. It takes at most
    /// [`Config::shutdown_timeout`]; call it before the program ends (a runtime that shuts
    /// down drops the releases still running in the background).
    ///
    /// Calling it again, or from another clone, waits for the same end.
    ///
    /// ```no_run
    /// # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
    /// let permit = client.semaphore("encoders").acquire().await?;
    /// // ... the program is told to stop ...
    /// client.shutdown().await?; // the permit is given back; the guard is now inert
    /// drop(permit);
    /// # Ok(()) }
    /// ```
    ///
    /// A semaphore release (plain permits given back, permit ids released) is retried until
    /// the server confirms it while the client lives; those still unconfirmed when the shutdown
    /// gives up are listed in its error, and nothing sends them again.
    ///
    /// # Errors
    /// [`Error::ShutdownUnfinished`] when semaphore releases were still unconfirmed at the
    /// timeout (the server could not be reached): it lists them, semaphore name and permit
    /// count. [`Error::Timeout`] when other releases or waits were still unfinished at the
    /// timeout (the leases end the holds). The client is closed all the same.
    ///
    /// # Cancel safety
    /// Once polled, the client is closing; dropping the future leaves the releases to the
    /// background (unreported).
    pub async fn shutdown(&self) -> Result<()> {
        let limit = self.inner.config.shutdown_timeout;
        let deadline = Instant::now() + limit;
        let outcome = self.inner.background.shutdown(deadline, limit).await;
        self.inner.commands.close();
        for task in &self.inner.tasks {
            task.abort();
        }
        outcome
    }

    /// The application let go of its last client handle (the facade's `Client`): if holds are
    /// still live, or releases still running, without a shutdown, say so and shut down in the
    /// background, which releases what it still can.
    #[doc(hidden)]
    pub fn abandon(&self) {
        if self.is_closed() {
            return;
        }
        let holds = self.watchdog().stats().holds;
        let pending = self.inner.background.pending();
        if holds == 0 && pending == 0 {
            return;
        }
        tracing::warn!(target: "keylatch::client",
            holds,
            pending,
            "keylatch client dropped with live holds and no shutdown(): releasing them in the \
             background (call Client::shutdown before the program ends)"
        );
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let client = self.clone();
        handle.spawn(async move {
            let _ = client.shutdown().await;
        });
    }

    /// Runs a release or undo in the background (see [`Background::spawn`]).
    #[doc(hidden)]
    pub fn spawn_background<F>(&self, work: F)
    where
        F: Future<Output = Result<()>> + Send + 'static,
    {
        self.inner.background.spawn(work);
    }

    /// Waits until every background release and undo has finished.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_idle(&self) {
        self.inner.background.wait_idle().await;
    }

    /// The client's counters.
    pub fn stats(&self) -> ClientStats {
        let (coalesced_calls, coalesced_requests) = self.inner.commands.coalesced();
        ClientStats {
            watchdog: self.watchdog().stats(),
            channels: self.inner.hub.channel_count(),
            subscribers: self.inner.hub.subscriber_count(),
            hub_reconnects: self.inner.hub.reconnects(),
            hub_connected: self.inner.hub.is_connected(),
            hub_messages: self.inner.hub.messages(),
            hub_patterns: self.inner.hub.supports_patterns(),
            letters: self.inner.hub.letters(),
            background_pending: self.inner.background.pending(),
            script_reloads: self.inner.commands.script_reloads(),
            cluster_redirections: self.inner.commands.redirections(),
            cluster_primaries: self.inner.commands.cluster_nodes(),
            sharded_pubsub: self.inner.commands.is_sharded(),
            batch_round_trips: self.inner.commands.batch_pipelines(),
            primary_moves: self.inner.topology.moves(),
            primary_lookups: self.inner.topology.lookups(),
            coalesced_calls,
            coalesced_requests,
        }
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("url", &self.inner.topology.shown())
            .finish_non_exhaustive()
    }
}

/// A redis-rs client's address, as a URL without credentials (for messages).
fn client_url(client: &redis::Client) -> String {
    match client.get_connection_info().addr() {
        redis::ConnectionAddr::Tcp(host, port) => format!("redis://{host}:{port}"),
        redis::ConnectionAddr::TcpTls { host, port, .. } => format!("rediss://{host}:{port}"),
        redis::ConnectionAddr::Unix(path) => format!("redis+unix://{}", path.display()),
        _ => "redis://(application client)".to_owned(),
    }
}
