//! [`ConfigBuilder`]: a [`Config`] changed field by field, checked by `build`.
//!
//! May import: the parent `config` module, `keylatch-core`.

use std::time::Duration;

use secrecy::SecretString;

use super::{Config, ReplicaMode};
use keylatch_core::Result;
use keylatch_core::SecretUrl;

/// Builds a [`Config`]; see there for an example.
#[derive(Clone, Debug)]
#[must_use]
pub struct ConfigBuilder {
    config: Config,
}

/// A builder that changes `config` further, for example the environment's:
/// `ConfigBuilder::from(Config::from_env()).watchdog_timeout(…).build()`.
impl From<Config> for ConfigBuilder {
    fn from(config: Config) -> ConfigBuilder {
        ConfigBuilder { config }
    }
}

impl ConfigBuilder {
    /// The Redis URL.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.config.url = SecretUrl::new(url);
        self
    }

    /// The watchdog timeout (default 30 s).
    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.config.watchdog_timeout = timeout;
        self
    }

    /// How many multiplexed command connections to keep (default 2).
    pub fn connections(mut self, n: usize) -> Self {
        self.config.connections = n;
        self
    }

    /// The connect timeout (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// The response timeout (default 5 s).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.config.response_timeout = timeout;
        self
    }

    /// The fallback poll bound for waiters (default 2 s).
    pub fn fallback_poll(mut self, poll: Duration) -> Self {
        self.config.fallback_poll = poll;
        self
    }

    /// The longest an unlock or a release waits for the server (default 5 s; see
    /// [`Config::release_timeout`]).
    pub fn release_timeout(mut self, timeout: Duration) -> Self {
        self.config.release_timeout = timeout;
        self
    }

    /// How long lost releases are retried (default 30 s; see [`Config::settle_window`]).
    pub fn settle_window(mut self, window: Duration) -> Self {
        self.config.settle_window = window;
        self
    }

    /// The longest [`Client::shutdown`](crate::Client::shutdown) takes (default 5 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.config.shutdown_timeout = timeout;
        self
    }

    /// Coalescing of concurrent acquisitions (see [`Config::coalesce`]; default on).
    pub fn coalesce(mut self, coalesce: bool) -> Self {
        self.config.coalesce = coalesce;
        self
    }

    /// Holder metadata beside reentrant-lock holds (see [`Config::holder_metadata`];
    /// default on).
    pub fn holder_metadata(mut self, record: bool) -> Self {
        self.config.holder_metadata = record;
        self
    }

    /// The program named in the holder metadata (see [`Config::holder_program`]).
    pub fn holder_program(mut self, program: impl Into<String>) -> Self {
        self.config.holder_program = Some(program.into());
        self
    }

    /// Pattern subscriptions for fair-lock waiters (see [`Config::pubsub_patterns`]; default
    /// 4, 0 for none).
    pub fn pubsub_patterns(mut self, patterns: usize) -> Self {
        self.config.pubsub_patterns = patterns;
        self
    }

    /// Sharded pub/sub on a Redis Cluster (see [`Config::sharded_pubsub`]; default on).
    pub fn sharded_pubsub(mut self, sharded: bool) -> Self {
        self.config.sharded_pubsub = sharded;
        self
    }

    /// Accept lock names with braces (see [`Config::hash_tagged_names`]; default off).
    pub fn hash_tagged_names(mut self, accept: bool) -> Self {
        self.config.hash_tagged_names = accept;
        self
    }

    /// The ACL user, over the URL's (see [`Config::username`]).
    pub fn username(mut self, username: impl Into<String>) -> Self {
        self.config.username = Some(username.into());
        self
    }

    /// The password, over the URL's (see [`Config::password`]).
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.config.password = Some(SecretString::from(password.into()));
        self
    }

    /// The sentinels' user and password (see [`Config::sentinel_password`]).
    pub fn sentinel_credentials(
        mut self,
        username: Option<String>,
        password: impl Into<String>,
    ) -> Self {
        self.config.sentinel_username = username;
        self.config.sentinel_password = Some(SecretString::from(password.into()));
        self
    }

    /// Trust this CA file (PEM) instead of the system's roots (see [`TlsConfig`](crate::TlsConfig)).
    pub fn tls_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.config.tls.ca_file = Some(path.into());
        self
    }

    /// Present this client certificate and key (PEM files) for mutual TLS.
    pub fn tls_client_cert(
        mut self,
        cert: impl Into<std::path::PathBuf>,
        key: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.config.tls.cert_file = Some(cert.into());
        self.config.tls.key_file = Some(key.into());
        self
    }

    /// **Dangerous**: accept any server certificate (see [`TlsConfig::insecure`](crate::TlsConfig::insecure)).
    pub fn tls_insecure(mut self, insecure: bool) -> Self {
        self.config.tls.insecure = insecure;
        self
    }

    /// Every acquisition waits for `n` replicas to acknowledge it, at most `timeout` (see
    /// [`Config::replicas`]).
    pub fn replicas(mut self, n: u32, timeout: Duration) -> Self {
        self.config.replicas = n;
        self.config.replicas_timeout = timeout;
        self
    }

    /// Every acquisition waits for every replica the primary reports connected, at most
    /// `timeout`, and fails only when it has some and none acknowledged (see
    /// [`ReplicaMode::AllConnected`]).
    pub fn replicas_all_connected(mut self, timeout: Duration) -> Self {
        self.config.replicas = 0;
        self.config.replicas_mode = ReplicaMode::AllConnected;
        self.config.replicas_timeout = timeout;
        self
    }

    /// Which replicas an acquisition waits for (see [`Config::replicas_mode`]).
    pub fn replicas_mode(mut self, mode: ReplicaMode) -> Self {
        self.config.replicas_mode = mode;
        self
    }

    /// Wait for the append-only files (`WAITAOF`) where the server has them (see
    /// [`Config::replicas_aof`]; default off).
    pub fn replicas_aof(mut self, aof: bool) -> Self {
        self.config.replicas_aof = aof;
        self
    }

    /// Put before every lock name to make its keys and channels (see [`Config::key_prefix`]).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config.key_prefix = prefix.into();
        self
    }

    /// The most holds renewed by one script call (see [`Config::watchdog_batch_size`];
    /// default 100).
    pub fn watchdog_batch_size(mut self, size: usize) -> Self {
        self.config.watchdog_batch_size = size;
        self
    }

    /// How long an unused channel stays subscribed (default 250 ms; zero: not at all).
    pub fn subscription_linger(mut self, linger: Duration) -> Self {
        self.config.subscription_linger = linger;
        self
    }

    /// Validates and returns the configuration.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`](keylatch_core::Error::InvalidConfig).
    pub fn build(self) -> Result<Config> {
        self.config.validate()?;
        Ok(self.config)
    }
}
