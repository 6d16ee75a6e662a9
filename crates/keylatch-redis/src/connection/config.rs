//! Client configuration.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use crate::connection::tls::TlsConfig;
use keylatch_core::SecretUrl;
use keylatch_core::{Error, Result};

/// The URL used when neither `KEYLATCH_REDIS_URL` nor `REDIS_URL` is set.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// How a [`Client`](crate::Client) connects and how long its holds last.
///
/// Build one with [`Config::builder`] (a few fields changed, the rest defaults), read the
/// environment with [`Config::from_env`] (and change more with
/// `ConfigBuilder::from(Config::from_env())`), or keep it in the application's own
/// configuration file: it is `Serialize` and `Deserialize` (feature `serde`, on by default),
/// with durations written as text (`"500ms"`, `"30s"`, `"2m"`; a bare number is refused, with
/// a message that says to add a unit). Only [`Config::from_env`] reads environment variables;
/// `Default` and [`Config::builder`] read none.
///
/// Secrets are held in types that cannot be shown or written by accident: the URL is a
/// [`SecretUrl`] (`Debug`, `Display` and serialization mask its password) and the passwords are
/// [`SecretString`]s (`Debug` prints `[REDACTED]`; they are read from a configuration file but
/// never written to one).
///
/// ```
/// # fn main() -> keylatch::Result<()> {
/// use std::time::Duration;
/// use keylatch::Config;
///
/// let config = Config::builder()
///     .url("redis://127.0.0.1:6379")
///     .watchdog_timeout(Duration::from_secs(9))
///     .build()?;
/// assert_eq!(config.renewal_interval(), Duration::from_secs(3));
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
#[non_exhaustive]
pub struct Config {
    /// Where Redis is: `redis://[user:password@]host:port[/db]`, `rediss://…` (TLS, see
    /// [`tls`](Config::tls)), `redis+unix:///path/to/socket`, or a service behind Sentinel:
    /// `redis+sentinel://[user:password@]host:port[,host:port…]/<service-name>[/db]`
    /// (`rediss+sentinel://` for TLS to the sentinels and the data nodes; the URL's
    /// credentials are the data nodes', see [`sentinel_password`](Config::sentinel_password)).
    pub url: SecretUrl,
    /// The lease of a hold taken without an explicit lease; the watchdog renews it every
    /// third of this while the hold lives. Redisson's default: 30 s.
    #[cfg_attr(feature = "serde", serde(with = "duration"))]
    pub watchdog_timeout: Duration,
    /// How many multiplexed connections the client keeps open for commands.
    pub connections: usize,
    /// How long to wait for a TCP connection (and its handshake).
    #[cfg_attr(feature = "serde", serde(with = "duration"))]
    pub connect_timeout: Duration,
    /// How long to wait for a command's reply before calling its outcome unknown.
    #[cfg_attr(feature = "serde", serde(with = "duration"))]
    pub response_timeout: Duration,
    /// The longest a waiter sleeps between retries when no wake-up message arrives (messages
    /// are hints; a retry happens at the latest after this, with ±20 % jitter, or when the
    /// holder's lease ends, whichever comes first).
    #[cfg_attr(feature = "serde", serde(with = "duration"))]
    pub fallback_poll: Duration,
    /// How long the pub/sub hub keeps a channel subscribed after its last local waiter left,
    /// so that a task that waits again soon (a worker taking job after job) finds it
    /// subscribed instead of paying a `SUBSCRIBE` and an `UNSUBSCRIBE` per wait. Zero
    /// unsubscribes at once.
    #[cfg_attr(feature = "serde", serde(with = "duration"))]
    pub subscription_linger: Duration,
    /// The longest `unlock().await` (and a permit's `release().await`) waits for the server:
    /// past it the call returns [`Error::Timeout`] and the release goes on in the background,
    /// retried until it is known applied or [`Config::settle_window`] passes; the lease ends the
    /// hold at the latest.
    #[cfg_attr(feature = "serde", serde(with = "duration"))]
    pub release_timeout: Duration,
    /// How long a release (or the undo of an acquire) whose reply was lost goes on being
    /// retried in the background, and how long the request markers that make those retries
    /// apply once live: a server paused or cut off for less than this still gets every
    /// release once it answers again. At least `3 × response_timeout + 1 s` is used.
    #[cfg_attr(feature = "serde", serde(with = "duration"))]
    pub settle_window: Duration,
    /// The longest [`Client::shutdown`](crate::Client::shutdown) takes to release what the
    /// client holds.
    #[cfg_attr(feature = "serde", serde(with = "duration"))]
    pub shutdown_timeout: Duration,
    /// Accept lock names with `{` or `}`, which Redisson reads as a cluster hash tag: a name
    /// `{x}` then shares every derived key (fair queue, semaphore timeouts, channels) with the
    /// name `x`, so only turn this on for a Redisson application's own hash-tagged names,
    /// never for names that come from users. Off by default: such names are refused with
    /// [`Error::InvalidName`].
    pub hash_tagged_names: bool,
    /// The ACL user, over the URL's (`KEYLATCH_REDIS_USERNAME` in [`Config::from_env`]).
    pub username: Option<String>,
    /// The password, over the URL's (`KEYLATCH_REDIS_PASSWORD` in [`Config::from_env`]).
    /// Never shown, never serialized.
    #[cfg_attr(feature = "serde", serde(skip_serializing))]
    pub password: Option<SecretString>,
    /// The sentinels' ACL user, when they require one (`KEYLATCH_SENTINEL_USERNAME`).
    pub sentinel_username: Option<String>,
    /// The sentinels' password, when they require one (`KEYLATCH_SENTINEL_PASSWORD`).
    /// Never shown, never serialized.
    #[cfg_attr(feature = "serde", serde(skip_serializing))]
    pub sentinel_password: Option<SecretString>,
    /// TLS settings for `rediss://` and `rediss+sentinel://` URLs (`KEYLATCH_TLS_CA`,
    /// `KEYLATCH_TLS_CERT`, `KEYLATCH_TLS_KEY`).
    pub tls: TlsConfig,
    /// Replica acknowledgement: every acquisition (a lock, a reentrant increment, a read or
    /// write hold, a fair-lock grant, a semaphore permit) waits until this many replicas have
    /// it (`WAIT`, sent in one pipeline with the acquire script on the same connection). With
    /// fewer acknowledgements in [`replicas_timeout`](Config::replicas_timeout) the acquisition
    /// is undone and fails with [`Error::NotReplicated`] (a wait tries again within its
    /// budget). 0 (the default) waits for none. `KEYLATCH_REPLICAS` in
    /// [`Config::from_env`]. Releases and renewals never wait: losing one to a failover can
    /// only shorten a hold, which the watchdog then reports.
    pub replicas: u32,
    /// How long an acquisition waits for [`replicas`](Config::replicas) to acknowledge it
    /// (default 1 s; less than `response_timeout`). `KEYLATCH_REPLICAS_TIMEOUT`.
    #[cfg_attr(feature = "serde", serde(with = "duration"))]
    pub replicas_timeout: Duration,
    /// On a Redis Cluster: wake-ups go by sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`, Redis 7),
    /// as Redisson does there by default, so each goes only to the shard of its lock; with
    /// `false`, by classic pub/sub, which every node of the cluster relays to every other
    /// (match Redisson's `shardedSubscriptionMode` when both share locks). Default `true`;
    /// not used outside a cluster. `KEYLATCH_SHARDED_PUBSUB` (`true`/`false`) in
    /// [`Config::from_env`].
    pub sharded_pubsub: bool,
    /// How many pattern subscriptions the client may hold at once to wake fair-lock waiters
    /// (one per fair lock with waiters of this client, lingering between waits: no
    /// `SUBSCRIBE` per wait). Each pattern costs the server a little on every `PUBLISH` it
    /// handles (measured: 100 patterns, 0.79× the publish rate; 1 000, 0.18×), so the
    /// budget is small; beyond it, and with 0, waiters subscribe to their own channels.
    /// Default 4, at most 64; not used on a cluster. `KEYLATCH_PUBSUB_PATTERNS` in
    /// [`Config::from_env`].
    pub pubsub_patterns: usize,
    /// Coalesce concurrent acquisitions and releases: when a command connection already
    /// carries [`COALESCE_AFTER`](crate::COALESCE_AFTER) calls, further reentrant-lock
    /// acquisitions (and releases of a last guard) on it wait for one of them to finish and
    /// then go together, in one script call that runs each in turn (each with its own result,
    /// error and cancellation). A lone caller never waits. Fewer calls for the server where
    /// many tasks acquire at once; not used on a cluster or with replica acknowledgement.
    /// Default on; `KEYLATCH_COALESCE` (`true`/`false`) in [`Config::from_env`].
    pub coalesce: bool,
    /// A setting from the environment that did not parse: `validate` reports it.
    #[cfg_attr(feature = "serde", serde(skip))]
    env_problem: Option<(&'static str, &'static str)>,
}

/// Shows every field, the URL with its password masked.
impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("url", &self.url)
            .field("watchdog_timeout", &self.watchdog_timeout)
            .field("connections", &self.connections)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("fallback_poll", &self.fallback_poll)
            .field("subscription_linger", &self.subscription_linger)
            .field("release_timeout", &self.release_timeout)
            .field("settle_window", &self.settle_window)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("hash_tagged_names", &self.hash_tagged_names)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("sentinel_username", &self.sentinel_username)
            .field(
                "sentinel_password",
                &self.sentinel_password.as_ref().map(|_| "***"),
            )
            .field("tls", &self.tls)
            .field("replicas", &self.replicas)
            .field("replicas_timeout", &self.replicas_timeout)
            .field("sharded_pubsub", &self.sharded_pubsub)
            .field("coalesce", &self.coalesce)
            .field("pubsub_patterns", &self.pubsub_patterns)
            .finish()
    }
}

/// Compares every field, the secrets by their contents.
impl PartialEq for Config {
    fn eq(&self, other: &Config) -> bool {
        fn secret(s: &Option<SecretString>) -> Option<&str> {
            s.as_ref().map(|s| s.expose_secret())
        }
        let Config {
            url,
            watchdog_timeout,
            connections,
            connect_timeout,
            response_timeout,
            fallback_poll,
            subscription_linger,
            release_timeout,
            settle_window,
            shutdown_timeout,
            hash_tagged_names,
            username,
            password,
            sentinel_username,
            sentinel_password,
            tls,
            replicas,
            replicas_timeout,
            sharded_pubsub,
            pubsub_patterns,
            coalesce,
            env_problem,
        } = self;
        *url == other.url
            && *watchdog_timeout == other.watchdog_timeout
            && *connections == other.connections
            && *connect_timeout == other.connect_timeout
            && *response_timeout == other.response_timeout
            && *fallback_poll == other.fallback_poll
            && *subscription_linger == other.subscription_linger
            && *release_timeout == other.release_timeout
            && *settle_window == other.settle_window
            && *shutdown_timeout == other.shutdown_timeout
            && *hash_tagged_names == other.hash_tagged_names
            && *username == other.username
            && secret(password) == secret(&other.password)
            && *sentinel_username == other.sentinel_username
            && secret(sentinel_password) == secret(&other.sentinel_password)
            && *tls == other.tls
            && *replicas == other.replicas
            && *replicas_timeout == other.replicas_timeout
            && *sharded_pubsub == other.sharded_pubsub
            && *pubsub_patterns == other.pubsub_patterns
            && *coalesce == other.coalesce
            && *env_problem == other.env_problem
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            url: SecretUrl::from(DEFAULT_URL),
            watchdog_timeout: Duration::from_secs(30),
            connections: 2,
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(5),
            fallback_poll: Duration::from_secs(2),
            subscription_linger: Duration::from_millis(250),
            release_timeout: Duration::from_secs(5),
            settle_window: Duration::from_secs(30),
            shutdown_timeout: Duration::from_secs(5),
            hash_tagged_names: false,
            username: None,
            password: None,
            sentinel_username: None,
            sentinel_password: None,
            tls: TlsConfig::default(),
            replicas: 0,
            replicas_timeout: Duration::from_secs(1),
            sharded_pubsub: true,
            coalesce: true,
            pubsub_patterns: 4,
            env_problem: None,
        }
    }
}

impl Config {
    /// Every environment variable [`Config::from_env`] reads (and nothing else does).
    pub const ENV_VARS: [&'static str; 14] = [
        "KEYLATCH_REDIS_URL",
        "REDIS_URL",
        "KEYLATCH_REDIS_USERNAME",
        "KEYLATCH_REDIS_PASSWORD",
        "KEYLATCH_SENTINEL_USERNAME",
        "KEYLATCH_SENTINEL_PASSWORD",
        "KEYLATCH_TLS_CA",
        "KEYLATCH_TLS_CERT",
        "KEYLATCH_TLS_KEY",
        "KEYLATCH_SHARDED_PUBSUB",
        "KEYLATCH_COALESCE",
        "KEYLATCH_PUBSUB_PATTERNS",
        "KEYLATCH_REPLICAS",
        "KEYLATCH_REPLICAS_TIMEOUT",
    ];

    /// The defaults, with the URL from `KEYLATCH_REDIS_URL`, else `REDIS_URL`, else
    /// [`DEFAULT_URL`].
    pub fn from_env() -> Config {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let mut config = Config {
            url: SecretUrl::new(url_from_env()),
            username: var("KEYLATCH_REDIS_USERNAME"),
            password: var("KEYLATCH_REDIS_PASSWORD").map(SecretString::from),
            sentinel_username: var("KEYLATCH_SENTINEL_USERNAME"),
            sentinel_password: var("KEYLATCH_SENTINEL_PASSWORD").map(SecretString::from),
            tls: TlsConfig {
                ca_file: var("KEYLATCH_TLS_CA").map(Into::into),
                cert_file: var("KEYLATCH_TLS_CERT").map(Into::into),
                key_file: var("KEYLATCH_TLS_KEY").map(Into::into),
                insecure: false,
            },
            ..Config::default()
        };
        for (name, field) in [
            ("KEYLATCH_SHARDED_PUBSUB", &mut config.sharded_pubsub),
            ("KEYLATCH_COALESCE", &mut config.coalesce),
        ] {
            if let Some(text) = var(name) {
                match text.trim().to_ascii_lowercase().as_str() {
                    "true" | "1" | "yes" | "on" => *field = true,
                    "false" | "0" | "no" | "off" => *field = false,
                    _ => config.env_problem = Some((name, "not true or false")),
                }
            }
        }
        if let Some(text) = var("KEYLATCH_PUBSUB_PATTERNS") {
            match text.trim().parse() {
                Ok(n) => config.pubsub_patterns = n,
                Err(_) => {
                    config.env_problem = Some(("KEYLATCH_PUBSUB_PATTERNS", "not a whole number"));
                }
            }
        }
        if let Some(text) = var("KEYLATCH_REPLICAS") {
            match text.trim().parse() {
                Ok(n) => config.replicas = n,
                Err(_) => config.env_problem = Some(("KEYLATCH_REPLICAS", "not a whole number")),
            }
        }
        if let Some(text) = var("KEYLATCH_REPLICAS_TIMEOUT") {
            match parse_duration(&text) {
                Ok(timeout) => config.replicas_timeout = timeout,
                Err(_) => {
                    config.env_problem = Some((
                        "KEYLATCH_REPLICAS_TIMEOUT",
                        "not a duration such as 500ms or 2s",
                    ));
                }
            }
        }
        config
    }

    /// A builder starting from the defaults; it reads no environment variable (start from
    /// the environment with `ConfigBuilder::from(Config::from_env())`).
    pub fn builder() -> ConfigBuilder {
        ConfigBuilder {
            config: Config::default(),
        }
    }

    /// How often the watchdog renews: a third of the watchdog timeout.
    pub fn renewal_interval(&self) -> Duration {
        self.watchdog_timeout / 3
    }

    /// Checks every field.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first bad field.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason| Err(Error::InvalidConfig { field, reason });
        if self.url.expose_secret().trim().is_empty() {
            return bad("url", "the url is empty");
        }
        if self.watchdog_timeout < Duration::from_millis(30) {
            return bad("watchdog_timeout", "must be at least 30ms");
        }
        if keylatch_core::names::validate_lease(self.watchdog_timeout).is_err() {
            return bad("watchdog_timeout", "must be at most 30 days");
        }
        if self.connections == 0 || self.connections > 64 {
            return bad("connections", "must be between 1 and 64");
        }
        let max = keylatch_core::MAX_LEASE;
        if self.connect_timeout.is_zero() || self.connect_timeout > max {
            return bad("connect_timeout", "must be positive and at most 30 days");
        }
        if self.response_timeout.is_zero() || self.response_timeout > max {
            return bad("response_timeout", "must be positive and at most 30 days");
        }
        if self.fallback_poll < Duration::from_millis(10) || self.fallback_poll > max {
            return bad("fallback_poll", "must be between 10ms and 30 days");
        }
        if self.release_timeout.is_zero() || self.release_timeout > max {
            return bad("release_timeout", "must be positive and at most 30 days");
        }
        if self.settle_window > max {
            return bad("settle_window", "must be at most 30 days");
        }
        if self.shutdown_timeout.is_zero() || self.shutdown_timeout > max {
            return bad("shutdown_timeout", "must be positive and at most 30 days");
        }
        if self.subscription_linger > Duration::from_secs(60) {
            return bad("subscription_linger", "must be at most 60s");
        }
        if let Some((field, reason)) = self.env_problem {
            return bad(field, reason);
        }
        if self.pubsub_patterns > 64 {
            return bad("pubsub_patterns", "must be at most 64");
        }
        if self.replicas > 64 {
            return bad("replicas", "must be at most 64");
        }
        if self.replicas_timeout < Duration::from_millis(1) {
            return bad("replicas_timeout", "must be at least 1ms");
        }
        if self.replicas > 0 && self.replicas_timeout >= self.response_timeout {
            return bad(
                "replicas_timeout",
                "must be less than response_timeout (the acquisition's reply waits for it)",
            );
        }
        Ok(())
    }
}

/// The URL from `KEYLATCH_REDIS_URL`, else `REDIS_URL`, else [`DEFAULT_URL`].
pub fn url_from_env() -> String {
    ["KEYLATCH_REDIS_URL", "REDIS_URL"]
        .iter()
        .filter_map(|var| std::env::var(var).ok())
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_URL.to_owned())
}

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

    /// Trust this CA file (PEM) instead of the system's roots (see [`TlsConfig`]).
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

    /// **Dangerous**: accept any server certificate (see [`TlsConfig::insecure`]).
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

    /// How long an unused channel stays subscribed (default 250 ms; zero: not at all).
    pub fn subscription_linger(mut self, linger: Duration) -> Self {
        self.config.subscription_linger = linger;
        self
    }

    /// Validates and returns the configuration.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`].
    pub fn build(self) -> Result<Config> {
        self.config.validate()?;
        Ok(self.config)
    }
}

/// Parses a duration in keylatch's one grammar, humantime's: `"250ms"`, `"30s"`, `"2m"`,
/// `"1h 30m"`. A bare number is refused with a message that says to add a unit.
///
/// # Errors
/// A message for people: what is wrong and an example.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "{text:?} has no unit: write {text}ms, {text}s or {text}m"
        ));
    }
    humantime::parse_duration(text).map_err(|e| format!("{text:?}: {e} (examples: 500ms, 10s, 2m)"))
}

/// Durations in configuration files: humantime text both ways (`"30s"`).
#[cfg(feature = "serde")]
mod duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub(super) fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_duration(*value))
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Number(f64),
        Text(String),
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        match Repr::deserialize(d)? {
            Repr::Number(n) => Err(D::Error::custom(format!(
                "the duration {n} has no unit: write \"{n}ms\", \"{n}s\" or \"{n}m\""
            ))),
            Repr::Text(text) => super::parse_duration(&text).map_err(D::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m 30s"), Ok(Duration::from_secs(90)));
        let bare = parse_duration("250").unwrap_err();
        assert!(bare.contains("no unit") && bare.contains("250ms"), "{bare}");
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("99999999999999999999999s").is_err());
    }

    #[cfg(feature = "serde")]
    #[test]
    fn deserialises_with_readable_durations() {
        let config: Config = serde_json::from_str(
            r#"{"url": "redis://10.0.0.1:6380", "watchdog_timeout": "10s", "fallback_poll": "500ms"}"#,
        )
        .unwrap();
        assert_eq!(config.url.expose_secret(), "redis://10.0.0.1:6380");
        assert_eq!(config.watchdog_timeout, Duration::from_secs(10));
        assert_eq!(config.fallback_poll, Duration::from_millis(500));
        assert_eq!(config.connections, 2, "missing fields take their defaults");
        assert!(serde_json::from_str::<Config>(r#"{"watchdog_timeout": "soon"}"#).is_err());
        assert!(serde_json::from_str::<Config>(r#"{"colour": "blue"}"#).is_err());
        let bare = serde_json::from_str::<Config>(r#"{"fallback_poll": 500}"#).unwrap_err();
        assert!(bare.to_string().contains("no unit"), "{bare}");
        // Round trip: what is written reads back the same.
        let written = serde_json::to_string(&config).unwrap();
        assert!(written.contains(r#""watchdog_timeout":"10s""#), "{written}");
        assert_eq!(serde_json::from_str::<Config>(&written).unwrap(), config);
    }

    #[cfg(feature = "serde")]
    #[test]
    fn secrets_are_read_from_a_file_and_never_written() {
        let config: Config = serde_json::from_str(
            r#"{"url": "redis://app:hunter1@db:6379", "password": "hunter2", "sentinel_password": "hunter3"}"#,
        )
        .unwrap();
        assert_eq!(config.url.expose_secret(), "redis://app:hunter1@db:6379");
        assert_eq!(config.password.as_ref().unwrap().expose_secret(), "hunter2");
        assert_eq!(
            config.sentinel_password.as_ref().unwrap().expose_secret(),
            "hunter3"
        );
        let written = serde_json::to_string(&config).unwrap();
        assert!(!written.contains("hunter"), "{written}");
        assert!(!written.contains("password"), "{written}");
        assert!(
            written.contains(r#""url":"redis://app:***@db:6379""#),
            "{written}"
        );
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(Config::builder().connections(0).build().is_err());
        assert!(
            Config::builder()
                .watchdog_timeout(Duration::from_millis(1))
                .build()
                .is_err()
        );
        assert!(Config::builder().url(" ").build().is_err());
        assert!(Config::builder().pubsub_patterns(65).build().is_err());
        assert!(Config::builder().pubsub_patterns(0).build().is_ok());
        assert!(
            Config::builder()
                .subscription_linger(Duration::from_secs(61))
                .build()
                .is_err()
        );
        for huge in [Duration::MAX, Duration::from_secs(u64::MAX / 2)] {
            assert!(Config::builder().fallback_poll(huge).build().is_err());
            assert!(Config::builder().response_timeout(huge).build().is_err());
            assert!(Config::builder().connect_timeout(huge).build().is_err());
            assert!(Config::builder().shutdown_timeout(huge).build().is_err());
            assert!(Config::builder().watchdog_timeout(huge).build().is_err());
            assert!(Config::builder().subscription_linger(huge).build().is_err());
        }
        assert!(Config::builder().build().is_ok());
    }

    #[test]
    fn replica_acknowledgement_settings_are_checked() {
        let ok = Config::builder()
            .replicas(2, Duration::from_millis(500))
            .build()
            .unwrap();
        assert_eq!((ok.replicas, ok.replicas_timeout.as_millis()), (2, 500));
        for (replicas, timeout, field) in [
            (65, Duration::from_millis(500), "replicas"),
            (1, Duration::ZERO, "replicas_timeout"),
            (1, Duration::from_secs(5), "replicas_timeout"),
        ] {
            let err = Config::builder()
                .replicas(replicas, timeout)
                .build()
                .unwrap_err();
            assert!(
                matches!(err, Error::InvalidConfig { field: f, .. } if f == field),
                "{replicas} {timeout:?}: {err}"
            );
        }
        let config = Config {
            env_problem: Some(("KEYLATCH_REPLICAS", "not a whole number")),
            ..Config::default()
        };
        assert!(
            config
                .validate()
                .unwrap_err()
                .to_string()
                .contains("KEYLATCH_REPLICAS")
        );
    }

    #[test]
    fn debug_never_shows_a_password() {
        let config = Config::builder()
            .url("redis://app:hunter2@db:6379?password=hunter3")
            .build()
            .unwrap();
        let shown = format!("{config:?}");
        assert!(!shown.contains("hunter"), "{shown}");
        assert!(shown.contains("app:***@db"), "{shown}");
    }
}
