//! The client: connections, identity, and the shared machinery of every primitive.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use deadpool_redis::redis::{self, FromRedisValue, Value};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::commands::Commands;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::guard::UndoGuard;
use crate::hub::PubSubHub;
use crate::owner::{Owner, OwnerId};
use crate::release::{PendingReleases, ReleaseTicket};
use crate::script::{LuaScript, ScriptCall};
use crate::topology::Topology;
use crate::transport::{self, Endpoint};
use crate::watchdog::{WatchdogRegistry, WatchdogStats};

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
    watchdog: WatchdogRegistry,
    background: Arc<Background>,
    tasks: Vec<tokio::task::AbortHandle>,
    /// Cancelled when [`Client::shutdown`] starts: new acquisitions are refused and waits end.
    closing: CancellationToken,
    /// Acquisitions under way (see [`Client::begin_acquisition`]).
    active: Arc<Background>,
    /// Semaphore releases under way (see [`Client::track_release`]).
    releases: Arc<PendingReleases>,
}

#[derive(Debug, Default)]
struct Background {
    pending: AtomicUsize,
    idle: Notify,
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
        Err(err) => match Error::from(err.clone()) {
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
            source,
        };
    }
    match Error::from(source) {
        Error::Connection(source) | Error::Redis(source) => Error::Connect {
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
        let shown = redact(&client_url(&client));
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
        let shown = redact(&client_url(&pubsub));
        let topology = Topology::pool(pool, pubsub, &config, shown);
        Client::start(config, topology).await
    }

    async fn start(config: Config, topology: Topology) -> Result<Client> {
        let topology = Arc::new(topology);
        let commands = Arc::new(Commands::new(
            topology.clone(),
            config.connections,
            config.response_timeout,
            (config.replicas > 0).then_some((config.replicas, config.replicas_timeout)),
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
        let (watchdog, watchdog_task) = WatchdogRegistry::start(commands.clone(), reconnected);
        let watcher = Topology::start_watcher(&topology);
        Ok(Client {
            inner: Arc::new(ClientInner {
                id: Uuid::new_v4(),
                config,
                commands,
                topology,
                hub,
                watchdog,
                background: Arc::new(Background::default()),
                tasks: hub_tasks
                    .iter()
                    .chain([&watchdog_task])
                    .chain(watcher.as_ref())
                    .map(tokio::task::JoinHandle::abort_handle)
                    .collect(),
                closing: CancellationToken::new(),
                active: Arc::new(Background::default()),
                releases: Arc::default(),
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

    /// The watchdog registry.
    #[doc(hidden)]
    pub fn watchdog(&self) -> &WatchdogRegistry {
        &self.inner.watchdog
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
        let config = &self.inner.config;
        (config.response_timeout * 3 + std::time::Duration::from_secs(1)).max(config.settle_window)
    }

    /// Lists a release of `permits` permits of the semaphore `name` as under way until the
    /// returned ticket drops: if [`shutdown`](Client::shutdown) gives up while it is, it
    /// reports it ([`Error::ShutdownUnfinished`]).
    #[doc(hidden)]
    pub fn track_release(&self, name: &Arc<str>, permits: u64) -> ReleaseTicket {
        self.inner.releases.track(name, permits)
    }

    /// Whether [`shutdown`](Client::shutdown) has started.
    pub fn is_closed(&self) -> bool {
        self.inner.closing.is_cancelled()
    }

    /// Marks an acquisition as under way until the returned value drops: refused with
    /// [`Error::Closed`] once the client is shutting down, and counted so that the shutdown
    /// waits for it to end. Every primitive's wait takes one, and ends with `Closed` when
    /// [`closing`](Client::closing) completes.
    ///
    /// # Errors
    /// [`Error::Closed`].
    #[doc(hidden)]
    pub fn begin_acquisition(&self, primitive: &'static str) -> Result<Acquisition> {
        if self.is_closed() {
            return Err(Error::Closed);
        }
        Ok(Acquisition {
            _active: Done::enter(&self.inner.active),
            primitive,
            span: tracing::debug_span!(target: "keylatch::client",
                "keylatch.acquire",
                primitive,
                lock = tracing::field::Empty,
                owner = tracing::field::Empty,
                outcome = tracing::field::Empty,
                waited_us = tracing::field::Empty,
            ),
            started: Instant::now(),
            outcome: None,
        })
    }

    /// Completes when the client's shutdown starts.
    #[doc(hidden)]
    pub fn closing(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.inner.closing.cancelled()
    }

    /// Ends the client cleanly: refuses new acquisitions and ends the waits in progress with
    /// [`Error::Closed`], releases every hold and permit the client still has (their guards then
    /// report [`lost`](crate::LockGuard::lost), and their `unlock` returns `Closed`), waits for
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
        self.inner.closing.cancel();
        // The waits in progress see the cancellation and undo what they may have taken.
        let quiet = tokio::time::timeout_at(deadline, self.inner.active.idle()).await;
        // Every hold still registered is released, each as many times as guards share it.
        let releases = self.inner.watchdog.take_all();
        let work = releases
            .into_iter()
            .map(|(release, owner, guards)| async move {
                for _ in 0..guards {
                    match release.release(owner).await {
                        Ok(()) | Err(Error::NotHeld { .. }) => {}
                        // Not sent, or its reply lost: settled by the conditional release.
                        Err(err) if err.is_transient() => {
                            let _ = release.release_if_count(owner, 1).await;
                        }
                        Err(err) => {
                            tracing::warn!(target: "keylatch::client", error = %err, "shutdown: a release failed");
                            return;
                        }
                    }
                }
            });
        let work = futures_util::future::join_all(work);
        tokio::pin!(work);
        let released = tokio::time::timeout_at(deadline, work.as_mut()).await;
        let idle = tokio::time::timeout_at(deadline, self.inner.background.idle()).await;
        // Read before anything under way is dropped (each release is listed until it ends).
        let unfinished = self.inner.releases.snapshot();
        self.inner.commands.close();
        for task in &self.inner.tasks {
            task.abort();
        }
        if !unfinished.is_empty() {
            tracing::warn!(
                releases = %crate::release::list(&unfinished),
                "shutdown: semaphore releases the server did not confirm in time"
            );
            return Err(Error::ShutdownUnfinished {
                after: limit,
                releases: unfinished,
            });
        }
        if quiet.is_err() || released.is_err() || idle.is_err() {
            return Err(Error::Timeout { after: limit });
        }
        Ok(())
    }

    /// The application let go of its last client handle (the facade's `Client`): if holds are
    /// still live, or releases still running, without a shutdown, say so and shut down in the
    /// background, which releases what it still can.
    #[doc(hidden)]
    pub fn abandon(&self) {
        if self.is_closed() {
            return;
        }
        let holds = self.inner.watchdog.stats().holds;
        let pending = self.inner.background.pending.load(Ordering::Acquire);
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

    /// Runs a release or undo in the background, tracked by [`wait_idle`](Client::wait_idle).
    /// Errors are logged (a `NotHeld` at debug level: the hold had already ended).
    #[doc(hidden)]
    pub fn spawn_background<F>(&self, work: F)
    where
        F: Future<Output = Result<()>> + Send + 'static,
    {
        if self.inner.commands.is_closed() {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(target: "keylatch::client", "no tokio runtime: the lease will end the hold");
            return;
        };
        let done = Done::enter(&self.inner.background);
        handle.spawn(async move {
            let _done = done;
            match work.await {
                Ok(()) => {}
                Err(Error::NotHeld { name }) => {
                    tracing::debug!(target: "keylatch::client", lock = %name, "background release: already released");
                }
                Err(err) => tracing::warn!(target: "keylatch::client", error = %err, "background release failed"),
            }
        });
    }

    /// Waits until every background release and undo has finished.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_idle(&self) {
        self.inner.background.idle().await;
    }

    /// The client's counters.
    pub fn stats(&self) -> ClientStats {
        let (coalesced_calls, coalesced_requests) = self.inner.commands.coalesced();
        ClientStats {
            watchdog: self.inner.watchdog.stats(),
            channels: self.inner.hub.channel_count(),
            subscribers: self.inner.hub.subscriber_count(),
            hub_reconnects: self.inner.hub.reconnects(),
            letters: self.inner.hub.letters(),
            background_pending: self.inner.background.pending.load(Ordering::Acquire),
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

impl Background {
    /// Waits until nothing is pending.
    async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.pending.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// An acquisition under way; see [`Client::begin_acquisition`].
#[doc(hidden)]
#[derive(Debug)]
pub struct Acquisition {
    _active: Done,
    primitive: &'static str,
    /// A span per acquisition (`keylatch.acquire`): primitive, lock, owner, outcome, time
    /// waited.
    span: tracing::Span,
    started: Instant,
    /// How it ended, once known: `acquired`, `timed_out`; otherwise it failed or was dropped.
    outcome: Option<&'static str>,
}

impl Acquisition {
    /// Names what is acquired (the lock's name or wake-up channel) in the acquisition's span.
    pub fn naming(&mut self, lock: &str) {
        self.span.record("lock", lock);
    }

    /// Names the owner the acquisition is for (`<client-uuid>:<number>`) in its span.
    pub fn owned_by(&mut self, owner: OwnerId) {
        self.span.record("owner", tracing::field::display(owner));
    }

    /// Records how the acquisition ended (`acquired`, `timed_out`), for the metrics.
    pub fn finish(&mut self, outcome: &'static str) {
        self.outcome = Some(outcome);
    }
}

impl Drop for Acquisition {
    fn drop(&mut self) {
        // Neither acquired nor timed out: an error, or a dropped (cancelled) future.
        let outcome = self.outcome.unwrap_or("error_or_cancelled");
        let waited = self.started.elapsed();
        self.span.record("outcome", outcome);
        self.span.record(
            "waited_us",
            u64::try_from(waited.as_micros()).unwrap_or(u64::MAX),
        );
        self.span
            .in_scope(|| tracing::debug!(target: "keylatch::client", outcome, "acquisition ended"));
        crate::telemetry::acquisition(self.primitive, outcome, waited);
    }
}

/// Decrements the pending count when a background task (or an acquisition) ends, however it
/// ends.
#[derive(Debug)]
struct Done(Arc<Background>);

impl Done {
    fn enter(counter: &Arc<Background>) -> Done {
        counter.pending.fetch_add(1, Ordering::AcqRel);
        Done(counter.clone())
    }
}

impl Drop for Done {
    fn drop(&mut self) {
        if self.0.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
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

/// The URL with any password replaced, for messages.
pub(crate) fn redact(url: &str) -> String {
    crate::redact::redact_url(url)
}
