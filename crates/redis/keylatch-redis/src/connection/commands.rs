//! The command path: a few multiplexed connections kept out of the pool, and script calls on
//! them with transparent reloading.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use deadpool_redis::redis::{self, ErrorKind, FromRedisValue, RedisError, ServerErrorKind, Value};
use std::sync::Arc;

use crate::connection::app::Connection;
use crate::connection::cluster;
use crate::connection::config::Acknowledge;
use crate::connection::script::{LuaScript, ScriptCall};
use crate::connection::topology::Topology;
use keylatch_core::{Error, Result, StoreError};

mod ack;
mod coalesce;
mod fence;
mod on_cluster;
mod server_changes;
pub use coalesce::COALESCE_AFTER;

/// Connections for commands.
///
/// The client opens `connections` multiplexed connections to the primary (through the
/// [`Topology`]; from an application's pool, it checks them out once, as deadpool-redis pings
/// every connection it hands out) and shares them: a multiplexed connection carries many
/// requests at once. One that breaks is dropped and replaced on next use; when the primary
/// moves, every one is replaced. Commands on one key always use the same connection, so they
/// reach Redis in the order they were sent. A script refused with `READONLY` (the node is no
/// longer the primary: it did not run) is sent again to the new primary.
pub(crate) struct Commands {
    topology: Arc<Topology>,
    slots: Vec<Slot>,
    next: AtomicUsize,
    response_timeout: Duration,
    /// Replica acknowledgement for acquisitions ([`ack`]), or none.
    acknowledgement: Option<ack::Acknowledger>,
    script_reloads: AtomicU64,
    /// On a Redis Cluster: wake-ups go by sharded pub/sub (`SPUBLISH`), so scripts run in
    /// their sharded variant.
    sharded: bool,
    /// Redirections followed on a cluster (`MOVED`, `ASK`, back-offs).
    redirections: Arc<AtomicU64>,
    /// Pipelines sent for batches ([`eval_batch`](Commands::eval_batch)): on a cluster, one
    /// per node per batch.
    batch_pipelines: AtomicU64,
    /// Set at the end of the client's shutdown: every command is refused with
    /// [`Error::Closed`].
    closed: std::sync::atomic::AtomicBool,
    /// Coalescing of acquisitions ([`Config::coalesce`](crate::Config::coalesce)): one lane
    /// per connection, or none when it is off.
    lanes: Vec<Mutex<coalesce::Lane>>,
    /// Coalesced script calls sent, and the calls they carried.
    coalesced: coalesce::Counters,
}

struct Slot {
    current: Mutex<Option<Held>>,
    refill: tokio::sync::Mutex<()>,
    /// The slot's connections given up on, to fence before its next one is used (`fence.rs`).
    fences: Mutex<Vec<fence::Identity>>,
}

struct Held {
    generation: u64,
    /// The topology's move count when it was opened: stale once the primary moved.
    moves: u64,
    conn: Connection,
    /// Who it is on the server, to fence it if it is given up on.
    identity: Option<fence::Identity>,
    _pooled: Option<deadpool_redis::Connection>,
}

/// How many times a command refused with `READONLY` is sent again (each time to the primary
/// looked up anew).
const READONLY_RETRIES: usize = 3;

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// How many times a connection that broke while it was being opened is replaced.
const OPEN_RETRIES: usize = 3;

impl Commands {
    pub(crate) fn new(
        topology: Arc<Topology>,
        slots: usize,
        response_timeout: Duration,
        acknowledgement: Option<Acknowledge>,
        sharded: bool,
        coalesce: bool,
    ) -> Self {
        let sharded = sharded && topology.is_cluster();
        // Coalesced calls run in one script, whose keys must share a slot on a cluster; and
        // replica acknowledgement waits per call.
        let coalesce = coalesce && !topology.is_cluster() && acknowledgement.is_none();
        Commands {
            topology,
            slots: (0..slots)
                .map(|_| Slot {
                    current: Mutex::new(None),
                    refill: tokio::sync::Mutex::new(()),
                    fences: Mutex::default(),
                })
                .collect(),
            next: AtomicUsize::new(0),
            response_timeout,
            acknowledgement: acknowledgement.map(ack::Acknowledger::new),
            script_reloads: AtomicU64::new(0),
            sharded,
            redirections: Arc::new(AtomicU64::new(0)),
            batch_pipelines: AtomicU64::new(0),
            closed: std::sync::atomic::AtomicBool::new(false),
            lanes: if coalesce {
                (0..slots).map(|_| Mutex::default()).collect()
            } else {
                Vec::new()
            },
            coalesced: coalesce::Counters::default(),
        }
    }

    /// Opens every slot's connection (used at connect, so a bad URL fails there).
    pub(crate) async fn warm_up(&self) -> Result<()> {
        for index in 0..self.slots.len() {
            self.connection(index).await?;
        }
        Ok(())
    }

    pub(crate) fn script_reloads(&self) -> u64 {
        self.script_reloads.load(Ordering::Relaxed)
    }

    /// Redirections followed on a cluster.
    pub(crate) fn redirections(&self) -> u64 {
        self.redirections.load(Ordering::Relaxed)
    }

    /// Pipelines sent for batches.
    pub(crate) fn batch_pipelines(&self) -> u64 {
        self.batch_pipelines.load(Ordering::Relaxed)
    }

    /// Whether scripts publish with `SPUBLISH` (a cluster with sharded pub/sub).
    pub(crate) fn is_sharded(&self) -> bool {
        self.sharded
    }

    /// The connection for a command on `key`. Every command on one key goes over the same
    /// connection, and Redis runs the requests of one connection in order: so an undo can
    /// never overtake the request it undoes. Commands without a key rotate.
    fn pick(&self, key: &str) -> usize {
        if self.slots.len() == 1 {
            return 0;
        }
        if key.is_empty() {
            return self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        }
        let mut hasher = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(key, &mut hasher);
        (std::hash::Hasher::finish(&hasher) % self.slots.len() as u64) as usize
    }

    /// How many connections commands rotate over.
    pub(crate) fn connection_count(&self) -> usize {
        self.slots.len()
    }

    /// Refuses every command from now on, and drops the connections.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for slot in &self.slots {
            *slot.current.lock().expect("slot lock") = None;
        }
    }

    async fn connection(&self, index: usize) -> Result<(u64, Connection)> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        // Every caller sends one command or pipeline on the connection it gets.
        keylatch_core::telemetry::round_trip();
        if let Some(found) = self.held(index) {
            return Ok(found);
        }
        // Boxed: opening a connection is rare, and its future is large (TLS, Sentinel).
        Box::pin(self.refill(index)).await
    }

    /// The open connection of slot `index`, unless the primary moved since it was opened.
    fn held(&self, index: usize) -> Option<(u64, Connection)> {
        let moves = self.topology.moves();
        let mut held = self.slots[index].current.lock().expect("slot lock");
        match held.as_ref() {
            Some(h) if h.moves == moves => Some((h.generation, h.conn.clone())),
            Some(_) => {
                // The primary moved since it was opened.
                *held = None;
                None
            }
            None => None,
        }
    }

    /// Opens the connection of slot `index` (unless another caller just did).
    async fn refill(&self, index: usize) -> Result<(u64, Connection)> {
        let slot = &self.slots[index];
        let _refill = slot.refill.lock().await;
        if let Some(found) = self.held(index) {
            return Ok(found);
        }
        let moves = self.topology.moves();
        let (opened, identity) = self.open_fenced(&slot.fences).await?;
        let generation = GENERATION.fetch_add(1, Ordering::Relaxed);
        *slot.current.lock().expect("slot lock") = Some(Held {
            generation,
            moves,
            conn: opened.conn.clone(),
            identity,
            _pooled: opened.pooled,
        });
        Ok((generation, opened.conn))
    }

    /// A new connection of its own to the primary, for the application's own commands.
    pub(crate) async fn open(&self) -> Result<Connection> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        self.topology.open().await
    }

    /// Drops a broken connection so the next use opens a new one, which first fences it.
    fn discard(&self, index: usize, generation: u64) {
        let slot = &self.slots[index];
        let mut current = slot.current.lock().expect("slot lock");
        if current.as_ref().is_some_and(|h| h.generation == generation) {
            if let Some(identity) = current.take().and_then(|held| held.identity) {
                slot.fences.lock().expect("slot lock").push(identity);
            }
            self.topology.changes().doubt();
        }
    }

    /// The error for `err` on a single server, as [`map_error`](Commands::map_error) gives it,
    /// without its effects on the connection.
    fn classify(&self, err: RedisError, key: &str) -> Error {
        if is_readonly(&err) {
            return Error::ReadOnly(StoreError::new(err));
        }
        match crate::error::from_redis_key(err, key) {
            Error::Timeout { .. } => Error::Timeout {
                after: self.response_timeout,
            },
            other => other,
        }
    }

    fn map_error(&self, err: RedisError, key: &str, index: usize, generation: u64) -> Error {
        if self.topology.is_cluster() {
            // redis-rs keeps the nodes' connections and reconnects them itself.
            if cluster::is_redirection(&err) {
                return Error::ClusterUnavailable(StoreError::new(err));
            }
            return match crate::error::from_redis_key(err, key) {
                Error::Timeout { .. } => Error::Timeout {
                    after: self.response_timeout,
                },
                other => other,
            };
        }
        if is_readonly(&err) {
            self.discard(index, generation);
            self.topology.moved("a node answered READONLY");
            return Error::ReadOnly(StoreError::new(err));
        }
        let err = crate::error::from_redis_key(err, key);
        match err {
            Error::Timeout { .. } => {
                self.discard(index, generation);
                Error::Timeout {
                    after: self.response_timeout,
                }
            }
            Error::Connection(_) => {
                self.discard(index, generation);
                self.topology.connection_failed();
                err
            }
            other => other,
        }
    }

    /// Runs one command that is not a script.
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd, key: &str) -> Result<T> {
        let index = self.pick(key);
        if self.topology.is_cluster() {
            let mut replies = self
                .cluster_run(index, key, std::slice::from_ref(cmd), None)
                .await?;
            let value = replies
                .pop()
                .ok_or(Error::UnexpectedReply { what: "reply" })?;
            return value
                .extract_error()
                .map_err(|e| crate::error::from_redis_key(e, key))
                .and_then(|value| {
                    T::from_redis_value(value).map_err(|_| Error::UnexpectedReply { what: "reply" })
                });
        }
        let mut attempt = 0;
        loop {
            let (generation, mut conn) = self.connection(index).await?;
            match cmd
                .query_async(&mut conn)
                .await
                .map_err(|e| self.map_error(e, key, index, generation))
            {
                Err(Error::ReadOnly(_)) if attempt < READONLY_RETRIES => attempt += 1,
                other => return other,
            }
        }
    }

    /// Runs a script call: EVALSHA, and on NOSCRIPT `SCRIPT LOAD` + EVALSHA pipelined.
    pub(crate) async fn eval<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T> {
        let value = self.eval_value(call).await?;
        T::from_redis_value(value).map_err(|_| Error::UnexpectedReply {
            what: call.script().name(),
        })
    }

    pub(crate) async fn eval_value(&self, call: &ScriptCall) -> Result<Value> {
        let mut attempt = 0;
        loop {
            // A script refused with READONLY did not run: the new primary gets it.
            match self.eval_once(call).await {
                Err(Error::ReadOnly(_)) if attempt < READONLY_RETRIES => attempt += 1,
                other => return other,
            }
        }
    }

    async fn eval_once(&self, call: &ScriptCall) -> Result<Value> {
        if let Some(ack) = &self.acknowledgement
            && call.script().is_acquisition()
        {
            // Boxed: a rare path that should not grow every acquire's future.
            return Box::pin(self.eval_acknowledged(call, ack)).await;
        }
        if self.topology.is_cluster() {
            return Box::pin(self.cluster_eval(call)).await;
        }
        let index = self.pick(call.first_key());
        let (generation, mut conn) = self.connection(index).await?;
        let cmd = call.evalsha_cmd(false);
        match cmd.query_async::<Value>(&mut conn).await {
            Ok(value) => Ok(value),
            Err(err) if is_noscript(&err) => {
                // Boxed: a rare path that should not grow every call's future.
                Box::pin(self.reload_and_eval(call, cmd, conn, index, generation)).await
            }
            Err(err) => Err(self.map_error(err, call.first_key(), index, generation)),
        }
    }

    /// After NOSCRIPT: `SCRIPT LOAD` and the call again, pipelined on the same connection.
    async fn reload_and_eval(
        &self,
        call: &ScriptCall,
        cmd: redis::Cmd,
        mut conn: Connection,
        index: usize,
        generation: u64,
    ) -> Result<Value> {
        self.script_reloads.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(target: "keylatch::connection", script = call.script().name(), "NOSCRIPT: script reloaded");
        keylatch_core::telemetry::round_trip();
        let mut pipe = redis::pipe();
        pipe.add_command(call.script().load_cmd(false)).ignore();
        pipe.add_command(cmd);
        let (value,): (Value,) = pipe
            .query_async(&mut conn)
            .await
            .map_err(|e| self.map_error(e, call.first_key(), index, generation))?;
        Ok(value)
    }

    /// Runs several script calls in one pipelined round trip and returns each call's own
    /// outcome (one refused call, for example under `OOM`, does not fail the others). On
    /// NOSCRIPT, loads every script involved and runs the whole batch again (callers only batch
    /// idempotent calls). The outer error is the connection's.
    pub(crate) async fn eval_batch(&self, calls: &[ScriptCall]) -> Result<Vec<Result<Value>>> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        if self.topology.is_cluster() {
            return Box::pin(self.cluster_batch(calls)).await;
        }
        let index = self.pick("");
        let (generation, mut conn) = self.connection(index).await?;
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for call in calls {
            pipe.add_command(call.evalsha_cmd(false));
        }
        let first_key = calls[0].first_key();
        self.batch_pipelines.fetch_add(1, Ordering::Relaxed);
        let mut replies: Vec<redis::RedisResult<Value>> = pipe
            .query_async(&mut conn)
            .await
            .map_err(|e| self.map_error(e, first_key, index, generation))?;
        if replies.iter().any(|r| r.as_ref().is_err_and(is_noscript)) {
            self.script_reloads.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(target: "keylatch::connection", calls = calls.len(), "NOSCRIPT: scripts reloaded");
            keylatch_core::telemetry::round_trip();
            let mut loaded: Vec<&'static LuaScript> = Vec::new();
            for call in calls {
                if !loaded.iter().any(|s| std::ptr::eq(*s, call.script())) {
                    loaded.push(call.script());
                }
            }
            self.load(&loaded).await?;
            replies = pipe
                .query_async(&mut conn)
                .await
                .map_err(|e| self.map_error(e, first_key, index, generation))?;
        }
        if replies.iter().any(|r| r.as_ref().is_err_and(is_readonly)) {
            self.discard(index, generation);
            self.topology.moved("a node answered READONLY");
        }
        Ok(replies
            .into_iter()
            .zip(calls)
            .map(|(reply, call)| {
                reply.map_err(|e| crate::error::from_redis_key(e, call.first_key()))
            })
            .collect())
    }

    /// Loads scripts on one connection, in one round trip.
    pub(crate) async fn load(&self, scripts: &[&'static LuaScript]) -> Result<()> {
        if scripts.is_empty() {
            return Ok(());
        }
        let index = self.pick("");
        let (generation, mut conn) = self.connection(index).await?;
        if let Some(cluster) = conn.as_cluster() {
            return cluster::load_everywhere(cluster, scripts, self.sharded)
                .await
                .map_err(|e| self.map_error(e, "", index, generation));
        }
        let mut pipe = redis::pipe();
        for script in scripts {
            pipe.add_command(script.load_cmd(false)).ignore();
            // The batch variant too, so the first coalesced call needs no reload (a cluster
            // does not coalesce).
            if !self.lanes.is_empty()
                && let Some(batched) = script.batched_load_cmd()
            {
                pipe.add_command(batched).ignore();
            }
        }
        pipe.query_async::<()>(&mut conn)
            .await
            .map_err(|e| self.map_error(e, "", index, generation))
    }
}

fn is_readonly(err: &RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly) || err.code() == Some("READONLY")
}

fn is_noscript(err: &RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) || err.code() == Some("NOSCRIPT")
}
