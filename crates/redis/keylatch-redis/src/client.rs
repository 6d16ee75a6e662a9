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

mod connect;
mod stats;

pub use stats::ClientStats;

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
    /// The holder metadata lines recorded with each hold (`""`: none), made once.
    holder_metadata: Box<str>,
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Client {
    /// The client's UUID: the first half of every owner id it writes.
    pub fn id(&self) -> Uuid {
        self.inner.id
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The holder metadata lines this client records with each reentrant-lock hold (host,
    /// pid, program; see [`Config::holder_metadata`]); `""` when it records none.
    pub fn holder_metadata(&self) -> &str {
        &self.inner.holder_metadata
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

    /// The name a primitive makes its keys and channels from: `name` after
    /// [`Config::key_prefix`] (borrowed when there is no prefix).
    pub fn key_name<'a>(&self, name: &'a str) -> std::borrow::Cow<'a, str> {
        let prefix = &self.inner.config.key_prefix;
        if prefix.is_empty() {
            std::borrow::Cow::Borrowed(name)
        } else {
            std::borrow::Cow::Owned(format!("{prefix}{name}"))
        }
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
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("url", &self.inner.topology.shown())
            .finish_non_exhaustive()
    }
}
