//! Making a client: from a URL (one server, a cluster found from one of its nodes, Sentinel,
//! a cluster's seed list), from an application's redis-rs client or pool; then its
//! command connections, pub/sub hub, watchdog and background handle.

use super::*;

/// Whether the server behind `client` runs in cluster mode (`INFO cluster`), asked on a
/// connection of its own that is closed after. A server that refuses `INFO` (an ACL user
/// without it) is taken for a single server.
pub(super) async fn runs_cluster(
    client: &redis::Client,
    config: &Config,
    shown: &str,
) -> Result<bool> {
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

pub(super) fn connect_error(shown: &str, config: &Config, source: redis::RedisError) -> Error {
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

    pub(super) async fn start(config: Config, topology: Topology) -> Result<Client> {
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
        let background = Background::new(registry, config.hold_settings());
        let watcher = Topology::start_watcher(&topology);
        let holder_metadata = if config.holder_metadata {
            crate::holder::metadata_lines(config.holder_program.as_deref()).into_boxed_str()
        } else {
            Box::default()
        };
        Ok(Client {
            inner: Arc::new(ClientInner {
                holder_metadata,
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
}

/// A redis-rs client's address, as a URL without credentials (for messages).
pub(super) fn client_url(client: &redis::Client) -> String {
    match client.get_connection_info().addr() {
        redis::ConnectionAddr::Tcp(host, port) => format!("redis://{host}:{port}"),
        redis::ConnectionAddr::TcpTls { host, port, .. } => format!("rediss://{host}:{port}"),
        redis::ConnectionAddr::Unix(path) => format!("redis+unix://{}", path.display()),
        _ => "redis://(application client)".to_owned(),
    }
}
