//! Where commands and subscriptions go: one server, a primary found through Sentinel, or an
//! application's own pool. The command path, the pub/sub hub and the watchdog ask this layer
//! for connections and learn from it when the primary may have changed; the primitives never
//! see which topology runs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_redis::redis::{
    self, AsyncConnectionConfig, RedisError, aio::PubSub, cluster::ClusterClient,
    cluster_async::ClusterConnection, sentinel::SentinelClient,
};
use futures_util::StreamExt;
use tokio::sync::watch;

use crate::connection::app::Connection;
use crate::connection::changes::ServerChanges;
use crate::connection::cluster::SlotMap;
use crate::connection::transport::ClusterSettings;
use keylatch_core::{Error, Result, StoreError};

/// One of the topologies, and the moves of its primary.
pub(crate) struct Topology {
    kind: Kind,
    /// Bumped each time the primary changed or may have changed: the command path drops its
    /// connections, the hub reconnects, the watchdog re-checks every hold.
    moves: watch::Sender<u64>,
    /// Times the primary was looked up through the sentinels.
    lookups: AtomicU64,
    connection_config: AsyncConnectionConfig,
    connect_timeout: Duration,
    /// The URL as it may be shown (no password).
    shown: String,
    /// Restarts and failovers seen, for the watchdog's loss reasons.
    changes: ServerChanges,
}

enum Kind {
    /// One server.
    Single(redis::Client),
    /// An application's deadpool-redis pool for commands, and a client for pub/sub.
    Pool {
        pool: deadpool_redis::Pool,
        pubsub: redis::Client,
    },
    /// The primary of a Sentinel-managed service.
    Sentinel {
        resolver: Box<tokio::sync::Mutex<SentinelClient>>,
        /// The primary found last; `None` after a move, until the next lookup.
        primary: Mutex<Option<redis::Client>>,
        service: String,
    },
    /// A Redis Cluster: every command goes to the node that owns its key's slot.
    Cluster {
        settings: Box<ClusterSettings>,
        /// The client for commands (redis-rs's automatic retries off).
        client: ClusterClient,
        /// Which node serves which slots, as last read (`CLUSTER SLOTS`); `None` until read,
        /// and again after a redirection showed it stale.
        slots: Mutex<Option<Arc<SlotMap>>>,
    },
}

/// A command connection, and the pool entry it came from (dropped with it).
pub(crate) struct CommandConnection {
    pub(crate) conn: Connection,
    pub(crate) pooled: Option<deadpool_redis::Connection>,
    /// The server's address (one server, or the primary behind Sentinel), whose run id is
    /// read when it opens; `None` for a pool's connection or a cluster's.
    pub(crate) address: Option<String>,
}

impl Topology {
    fn new(kind: Kind, config: &crate::Config, shown: String) -> Topology {
        Topology {
            kind,
            moves: watch::channel(0).0,
            lookups: AtomicU64::new(0),
            connection_config: AsyncConnectionConfig::new()
                .set_connection_timeout(Some(config.connect_timeout))
                .set_response_timeout(Some(config.response_timeout)),
            connect_timeout: config.connect_timeout,
            shown,
            changes: ServerChanges::default(),
        }
    }

    /// One server, reached through `client`.
    pub(crate) fn single(client: redis::Client, config: &crate::Config, shown: String) -> Self {
        Topology::new(Kind::Single(client), config, shown)
    }

    /// Commands from an application's pool, pub/sub through `pubsub`.
    pub(crate) fn pool(
        pool: deadpool_redis::Pool,
        pubsub: redis::Client,
        config: &crate::Config,
        shown: String,
    ) -> Self {
        Topology::new(Kind::Pool { pool, pubsub }, config, shown)
    }

    /// The primary of `service`, found through the sentinels.
    pub(crate) fn sentinel(
        resolver: SentinelClient,
        service: String,
        config: &crate::Config,
        shown: String,
    ) -> Self {
        Topology::new(
            Kind::Sentinel {
                resolver: Box::new(tokio::sync::Mutex::new(resolver)),
                primary: Mutex::new(None),
                service,
            },
            config,
            shown,
        )
    }

    /// A Redis Cluster, reached through `settings`' seed nodes.
    pub(crate) fn cluster(
        settings: ClusterSettings,
        config: &crate::Config,
        shown: String,
    ) -> Result<Self> {
        let client = settings.client(None).map_err(|source| Error::InvalidUrl {
            url: shown.clone(),
            source: StoreError::new(source),
        })?;
        Ok(Topology::new(
            Kind::Cluster {
                settings: Box::new(settings),
                client,
                slots: Mutex::new(None),
            },
            config,
            shown,
        ))
    }

    /// Whether this is a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.kind, Kind::Cluster { .. })
    }

    /// The slot map last read, if any.
    pub(crate) fn slot_map(&self) -> Option<Arc<SlotMap>> {
        match &self.kind {
            Kind::Cluster { slots, .. } => slots.lock().expect("slots lock").clone(),
            _ => None,
        }
    }

    /// Restarts and failovers seen so far.
    pub(crate) fn changes(&self) -> &ServerChanges {
        &self.changes
    }

    /// Keeps `map` as the slot map (or forgets it, with `None`); slots it gives a new primary
    /// are recorded as moved.
    pub(crate) fn set_slot_map(&self, map: Option<Arc<SlotMap>>) {
        if let Kind::Cluster { slots, .. } = &self.kind {
            match &map {
                Some(map) => self.changes.slot_map_seen(map),
                None => self.changes.doubt(),
            }
            *slots.lock().expect("slots lock") = map;
        }
    }

    /// On a cluster: a new cluster connection that speaks RESP3 and delivers its pushes
    /// (messages, and the server's own `SUNSUBSCRIBE` after a slot moved) to `push`. redis-rs
    /// keeps one connection per node and moves subscriptions to a slot's new owner when it
    /// refreshes its slot map.
    pub(crate) async fn cluster_subscriber(
        &self,
        push: tokio::sync::mpsc::UnboundedSender<redis::PushInfo>,
    ) -> Result<ClusterConnection> {
        let Kind::Cluster { settings, .. } = &self.kind else {
            return Err(Error::Closed);
        };
        let client = settings
            .client(Some(push))
            .map_err(|source| Error::InvalidUrl {
                url: self.shown.clone(),
                source: StoreError::new(source),
            })?;
        match tokio::time::timeout(self.connect_timeout, client.get_async_connection()).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(err)) => Err(self.connect_error(err)),
            Err(_) => Err(Error::Timeout {
                after: self.connect_timeout,
            }),
        }
    }

    /// How long a connection may take to open.
    pub(crate) fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The URL as it may be shown.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    /// How many moves were seen so far.
    pub(crate) fn moves(&self) -> u64 {
        *self.moves.borrow()
    }

    /// A receiver that sees every move.
    pub(crate) fn watch_moves(&self) -> watch::Receiver<u64> {
        self.moves.subscribe()
    }

    /// How many times the primary was looked up through the sentinels.
    pub(crate) fn lookups(&self) -> u64 {
        self.lookups.load(Ordering::Relaxed)
    }

    /// The primary changed or may have (a sentinel said so, or a node answered `READONLY`):
    /// forget it, and tell everyone that holds a connection to it.
    pub(crate) fn moved(&self, why: &'static str) {
        self.changes.doubt();
        if let Kind::Sentinel { primary, .. } = &self.kind {
            *primary.lock().expect("primary lock") = None;
        }
        self.moves.send_modify(|n| *n += 1);
        tracing::info!(target: "keylatch::connection", why, "the primary may have moved: reconnecting");
    }

    /// A connection failed: with Sentinel, look the primary up again before the next one.
    pub(crate) fn connection_failed(&self) {
        self.changes.doubt();
        if let Kind::Sentinel { primary, .. } = &self.kind {
            *primary.lock().expect("primary lock") = None;
        }
    }

    /// The client for the current primary.
    async fn primary(&self) -> Result<redis::Client> {
        match &self.kind {
            Kind::Single(client) => Ok(client.clone()),
            Kind::Pool { pubsub, .. } => Ok(pubsub.clone()),
            Kind::Cluster { .. } => Err(Error::Closed),
            Kind::Sentinel {
                resolver,
                primary,
                service,
            } => {
                if let Some(client) = primary.lock().expect("primary lock").clone() {
                    return Ok(client);
                }
                let mut resolver = resolver.lock().await;
                if let Some(client) = primary.lock().expect("primary lock").clone() {
                    return Ok(client);
                }
                self.lookups.fetch_add(1, Ordering::Relaxed);
                let found = tokio::time::timeout(self.connect_timeout, resolver.async_get_client())
                    .await
                    .map_err(|_| Error::Timeout {
                        after: self.connect_timeout,
                    })?
                    .map_err(|source| self.connect_error(source))?;
                tracing::debug!(target: "keylatch::connection", service = %service, "primary found through the sentinels");
                self.changes
                    .primary_seen(&found.get_connection_info().addr().to_string());
                *primary.lock().expect("primary lock") = Some(found.clone());
                Ok(found)
            }
        }
    }

    /// A multiplexed connection for keylatch's commands, to the current primary.
    pub(crate) async fn command_connection(&self) -> Result<CommandConnection> {
        if let Kind::Pool { pool, .. } = &self.kind {
            let pooled = pool.get().await.map_err(|err| self.pool_error(err))?;
            return Ok(CommandConnection {
                conn: Connection::single((*pooled).clone()),
                pooled: Some(pooled),
                address: None,
            });
        }
        if self.is_cluster() {
            let conn = self.open().await?;
            return Ok(CommandConnection {
                conn,
                pooled: None,
                address: None,
            });
        }
        let client = self.primary().await?;
        let address = client.get_connection_info().addr().to_string();
        let conn = self.open_on(&client).await?;
        Ok(CommandConnection {
            conn,
            pooled: None,
            address: Some(address),
        })
    }

    /// A new connection of its own: to the current primary, or to the cluster.
    pub(crate) async fn open(&self) -> Result<Connection> {
        if let Kind::Pool { pool, .. } = &self.kind {
            let pooled = pool.get().await.map_err(|err| self.pool_error(err))?;
            return Ok(Connection::single(deadpool_redis::Connection::take(pooled)));
        }
        if let Kind::Cluster { client, .. } = &self.kind {
            return match tokio::time::timeout(self.connect_timeout, client.get_async_connection())
                .await
            {
                Ok(Ok(conn)) => Ok(Connection::cluster(conn)),
                Ok(Err(err)) => Err(self.connect_error(err)),
                Err(_) => Err(Error::Timeout {
                    after: self.connect_timeout,
                }),
            };
        }
        let client = self.primary().await?;
        self.open_on(&client).await
    }

    /// A new multiplexed connection through `client` (one server, or the primary).
    async fn open_on(&self, client: &redis::Client) -> Result<Connection> {
        match client
            .get_multiplexed_async_connection_with_config(&self.connection_config)
            .await
        {
            Ok(conn) => Ok(Connection::single(conn)),
            Err(err) => {
                self.connection_failed();
                Err(self.connect_error(err))
            }
        }
    }

    /// A pub/sub connection to the current primary.
    pub(crate) async fn pubsub(&self) -> Result<PubSub> {
        let client = self.primary().await?;
        let connecting = client.get_async_pubsub();
        match tokio::time::timeout(self.connect_timeout, connecting).await {
            Ok(Ok(pubsub)) => Ok(pubsub),
            Ok(Err(err)) => {
                self.connection_failed();
                Err(self.connect_error(err))
            }
            Err(_) => {
                self.connection_failed();
                Err(Error::Timeout {
                    after: self.connect_timeout,
                })
            }
        }
    }

    /// A connection error, typed: credentials refused, TLS verification, or unreachable.
    pub(crate) fn connect_error(&self, source: RedisError) -> Error {
        if crate::connection::transport::is_tls_verification(&source) {
            return Error::TlsVerification {
                url: self.shown.clone(),
                source: StoreError::new(source),
            };
        }
        match crate::error::from_redis(source) {
            Error::Connection(source) | Error::Store(source) => Error::Connect {
                url: self.shown.clone(),
                source,
            },
            Error::Timeout { .. } => Error::Timeout {
                after: self.connect_timeout,
            },
            other => other,
        }
    }

    fn pool_error(&self, err: deadpool_redis::PoolError) -> Error {
        match err {
            deadpool_redis::PoolError::Backend(source) => self.connect_error(source),
            deadpool_redis::PoolError::Timeout(_) => Error::Timeout {
                after: self.connect_timeout,
            },
            other => Error::Pool(StoreError::new(other)),
        }
    }

    /// With Sentinel: a task that listens to the sentinels' `+switch-master` and reports each
    /// move of this service's primary at once. Reconnects to the sentinels with back-off; a
    /// reconnection counts as a possible move (one may have been missed meanwhile).
    pub(crate) fn start_watcher(
        topology: &std::sync::Arc<Topology>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let Kind::Sentinel { service, .. } = &topology.kind else {
            return None;
        };
        let service = service.clone();
        let weak = std::sync::Arc::downgrade(topology);
        Some(tokio::spawn(async move {
            let retry =
                keylatch_core::Backoff::new(Duration::from_millis(50), Duration::from_secs(1));
            let mut backoff = retry;
            let mut first = true;
            loop {
                let Some(topology) = weak.upgrade() else {
                    return;
                };
                let stream = match topology.sentinel_events().await {
                    Ok(stream) => stream,
                    Err(err) => {
                        tracing::debug!(target: "keylatch::connection", error = %err, "sentinel events: cannot subscribe");
                        drop(topology);
                        backoff.wait().await;
                        continue;
                    }
                };
                if !first {
                    topology.moved("reconnected to the sentinels");
                }
                first = false;
                backoff = retry;
                drop(topology);
                let mut stream = std::pin::pin!(stream);
                while let Some(msg) = stream.next().await {
                    let payload: String = msg.get_payload().unwrap_or_default();
                    // "<service> <old ip> <old port> <new ip> <new port>"
                    if payload.split(' ').next() == Some(service.as_str()) {
                        let Some(topology) = weak.upgrade() else {
                            return;
                        };
                        topology.moved("+switch-master");
                    }
                }
                backoff.wait().await;
            }
        }))
    }

    /// A subscription to `+switch-master` on one of the sentinels.
    async fn sentinel_events(
        &self,
    ) -> Result<impl futures_util::Stream<Item = redis::Msg> + use<>> {
        let Kind::Sentinel { resolver, .. } = &self.kind else {
            return Err(Error::Closed);
        };
        let client = {
            let mut resolver = resolver.lock().await;
            tokio::time::timeout(self.connect_timeout, resolver.async_get_sentinel_client())
                .await
                .map_err(|_| Error::Timeout {
                    after: self.connect_timeout,
                })?
                .map_err(|source| self.connect_error(source))?
        };
        let mut pubsub = tokio::time::timeout(self.connect_timeout, client.get_async_pubsub())
            .await
            .map_err(|_| Error::Timeout {
                after: self.connect_timeout,
            })?
            .map_err(|source| self.connect_error(source))?;
        pubsub
            .subscribe("+switch-master")
            .await
            .map_err(|source| self.connect_error(source))?;
        Ok(pubsub.into_on_message())
    }
}

impl std::fmt::Debug for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            Kind::Single(_) => "single",
            Kind::Pool { .. } => "pool",
            Kind::Sentinel { .. } => "sentinel",
            Kind::Cluster { .. } => "cluster",
        };
        f.debug_struct("Topology")
            .field("kind", &kind)
            .field("url", &self.shown)
            .field("moves", &self.moves())
            .finish()
    }
}
