//! The client: connections, identity, and the shared machinery of every primitive.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use deadpool_redis::redis::{self, FromRedisValue, Value};
use deadpool_redis::{Manager, Pool, Runtime};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::commands::Commands;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::hub::PubSubHub;
use crate::owner::{Owner, OwnerId};
use crate::script::{LuaScript, ScriptCall};
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
    hub: PubSubHub,
    watchdog: WatchdogRegistry,
    background: Arc<Background>,
    tasks: Vec<tokio::task::AbortHandle>,
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
    /// Background releases and undos not finished yet.
    pub background_pending: usize,
    /// Times a script had to be reloaded after `NOSCRIPT`.
    pub script_reloads: u64,
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
        let shown = redact(&config.url);
        let redis_client =
            redis::Client::open(config.url.as_str()).map_err(|source| Error::InvalidUrl {
                url: shown.clone(),
                source,
            })?;
        let connection_config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(config.connect_timeout))
            .set_response_timeout(Some(config.response_timeout));
        let manager =
            Manager::new_with_config(config.url.as_str(), connection_config).map_err(|source| {
                Error::InvalidUrl {
                    url: shown.clone(),
                    source,
                }
            })?;
        let pool = Pool::builder(manager)
            .max_size(config.connections + 8)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(config.connect_timeout))
            .create_timeout(Some(config.connect_timeout))
            .recycle_timeout(Some(config.connect_timeout))
            .build()
            .map_err(|_| Error::InvalidConfig {
                field: "connections",
                reason: "the pool could not be built",
            })?;
        let commands = Arc::new(Commands::new(
            pool,
            config.connections,
            shown,
            config.response_timeout,
        ));
        commands.warm_up().await?;
        let (hub, hub_tasks) = PubSubHub::start(
            redis_client,
            config.connect_timeout,
            config.subscription_linger,
        );
        let (watchdog, watchdog_task) = WatchdogRegistry::start(commands.clone());
        Ok(Client {
            inner: Arc::new(ClientInner {
                id: Uuid::new_v4(),
                config,
                commands,
                hub,
                watchdog,
                background: Arc::new(Background::default()),
                tasks: hub_tasks
                    .iter()
                    .chain([&watchdog_task])
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
    pub fn hub(&self) -> &PubSubHub {
        &self.inner.hub
    }

    /// The watchdog registry.
    pub fn watchdog(&self) -> &WatchdogRegistry {
        &self.inner.watchdog
    }

    /// Loads scripts now, in one round trip, so the first calls need no reload.
    ///
    /// # Errors
    /// Redis errors.
    pub async fn preload(&self, scripts: &[&'static LuaScript]) -> Result<()> {
        self.inner.commands.load(scripts).await
    }

    /// Runs a script call and converts its reply.
    ///
    /// # Errors
    /// [`Error::WrongType`] naming the call's first key, [`Error::UnexpectedReply`], Redis
    /// errors. Never `NOSCRIPT`.
    pub async fn eval<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T> {
        self.inner.commands.eval(call).await
    }

    /// Runs a script call and returns its raw reply.
    ///
    /// # Errors
    /// As [`eval`](Client::eval).
    pub async fn eval_value(&self, call: &ScriptCall) -> Result<Value> {
        self.inner.commands.eval_value(call).await
    }

    /// Runs idempotent script calls in one pipelined round trip.
    ///
    /// # Errors
    /// As [`eval`](Client::eval).
    pub async fn eval_batch(&self, calls: &[ScriptCall]) -> Result<Vec<Value>> {
        self.inner.commands.eval_batch(calls).await
    }

    /// The time left on `key`'s expiry (`PTTL`); `None` when the key does not exist.
    ///
    /// # Errors
    /// [`Error::NoTtl`] for a key that exists without an expiry, [`Error::WrongType`], Redis
    /// errors.
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
    pub async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd, key: &str) -> Result<T> {
        self.inner.commands.query(cmd, key).await
    }

    /// A connection from the client's deadpool-redis pool, for the application's own commands
    /// (it returns to the pool on drop).
    ///
    /// # Errors
    /// [`Error::Connect`], [`Error::Timeout`], [`Error::Pool`].
    pub async fn pool_connection(&self) -> Result<deadpool_redis::Connection> {
        self.inner.commands.pooled().await
    }

    /// Runs a release or undo in the background, tracked by [`wait_idle`](Client::wait_idle).
    /// Errors are logged (a `NotHeld` at debug level: the hold had already ended).
    pub fn spawn_background<F>(&self, work: F)
    where
        F: Future<Output = Result<()>> + Send + 'static,
    {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            tracing::debug!("no tokio runtime: the lease will end the hold");
            return;
        };
        let background = self.inner.background.clone();
        background.pending.fetch_add(1, Ordering::AcqRel);
        let done = Done(background);
        handle.spawn(async move {
            let _done = done;
            match work.await {
                Ok(()) => {}
                Err(Error::NotHeld { name }) => {
                    tracing::debug!(lock = %name, "background release: already released");
                }
                Err(err) => tracing::warn!(error = %err, "background release failed"),
            }
        });
    }

    /// Waits until every background release and undo has finished.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_idle(&self) {
        loop {
            let notified = self.inner.background.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.inner.background.pending.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// The client's counters.
    pub fn stats(&self) -> ClientStats {
        ClientStats {
            watchdog: self.inner.watchdog.stats(),
            channels: self.inner.hub.channel_count(),
            subscribers: self.inner.hub.subscriber_count(),
            hub_reconnects: self.inner.hub.reconnects(),
            background_pending: self.inner.background.pending.load(Ordering::Acquire),
            script_reloads: self.inner.commands.script_reloads(),
        }
    }
}

/// Decrements the pending count when a background task ends, however it ends.
struct Done(Arc<Background>);

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
            .field("url", &redact(&self.inner.config.url))
            .finish_non_exhaustive()
    }
}

/// The URL with any password replaced, for messages.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_owned(),
    }
}
