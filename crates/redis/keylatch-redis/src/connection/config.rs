//! Client configuration.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use crate::connection::tls::TlsConfig;

mod builder;
mod duration;
mod env;
#[cfg(test)]
mod tests;
mod validate;

pub use builder::ConfigBuilder;
pub use duration::parse_duration;
pub use env::url_from_env;
#[cfg(doc)]
use keylatch_core::Error;
use keylatch_core::SecretUrl;

/// The URL used when neither `KEYLATCH_REDIS_URL` nor `REDIS_URL` is set.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// The default of [`Config::watchdog_batch_size`].
pub(crate) const DEFAULT_WATCHDOG_BATCH: usize = 100;

/// Which replicas an acquisition waits for ([`Config::replicas_mode`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum ReplicaMode {
    /// [`Config::replicas`] replicas, every one: fewer acknowledgements within
    /// [`Config::replicas_timeout`] is [`Error::NotReplicated`]. Off when `replicas` is 0
    /// (unless [`Config::replicas_aof`]).
    #[default]
    Count,
    /// Every replica the primary reports connected (`connected_slaves` of `INFO
    /// replication`, read with each acquisition for the next): the acquisition fails only
    /// when the primary has replicas and none acknowledged, as Redisson's
    /// `checkLockSyncedSlaves`. Works with any number of replicas, none included.
    AllConnected,
}

/// The replica acknowledgement of acquisitions, as the command path uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Acknowledge {
    /// How many replicas, with [`ReplicaMode::Count`].
    pub(crate) replicas: u32,
    pub(crate) mode: ReplicaMode,
    /// `WAITAOF` where the server has it and runs AOF.
    pub(crate) aof: bool,
    pub(crate) timeout: Duration,
}

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
    #[cfg_attr(feature = "serde", serde(with = "duration::serde_form"))]
    pub watchdog_timeout: Duration,
    /// How many multiplexed connections the client keeps open for commands.
    pub connections: usize,
    /// How long to wait for a TCP connection (and its handshake).
    #[cfg_attr(feature = "serde", serde(with = "duration::serde_form"))]
    pub connect_timeout: Duration,
    /// How long to wait for a command's reply before calling its outcome unknown.
    #[cfg_attr(feature = "serde", serde(with = "duration::serde_form"))]
    pub response_timeout: Duration,
    /// The longest a waiter sleeps between retries when no wake-up message arrives (messages
    /// are hints; a retry happens at the latest after this, with ±20 % jitter, or when the
    /// holder's lease ends, whichever comes first).
    #[cfg_attr(feature = "serde", serde(with = "duration::serde_form"))]
    pub fallback_poll: Duration,
    /// How long the pub/sub hub keeps a channel subscribed after its last local waiter left,
    /// so that a task that waits again soon (a worker taking job after job) finds it
    /// subscribed instead of paying a `SUBSCRIBE` and an `UNSUBSCRIBE` per wait. Zero
    /// unsubscribes at once.
    #[cfg_attr(feature = "serde", serde(with = "duration::serde_form"))]
    pub subscription_linger: Duration,
    /// The longest `unlock().await` (and a permit's `release().await`) waits for the server:
    /// past it the call returns [`Error::Timeout`] and the release goes on in the background,
    /// retried until it is known applied while the client lives; the lease ends the hold at
    /// the latest.
    #[cfg_attr(feature = "serde", serde(with = "duration::serde_form"))]
    pub release_timeout: Duration,
    /// How long the request markers that make retried calls apply once live (the request
    /// window): a release or the undo of an acquire whose reply was lost is retried while the
    /// client lives (with a warning once this has passed), and a request that reaches the
    /// server within this of its retry or undo applies once. Calls that are neither
    /// (`add_permits`, `try_set_permits`, `drain_permits`) are retried only within it. At least
    /// `3 × response_timeout + 1 s` is used.
    #[cfg_attr(feature = "serde", serde(with = "duration::serde_form"))]
    pub settle_window: Duration,
    /// The longest [`Client::shutdown`](crate::Client::shutdown) takes to release what the
    /// client holds.
    #[cfg_attr(feature = "serde", serde(with = "duration::serde_form"))]
    pub shutdown_timeout: Duration,
    /// Accept lock names with `{` or `}`, which Redisson reads as a cluster hash tag: a name
    /// `{x}` then shares every derived key (fair queue, semaphore timeouts, channels) with the
    /// name `x`, so only turn this on for a Redisson application's own hash-tagged names,
    /// never for names that come from users. Off by default: such names are refused with
    /// [`Error::InvalidName`].
    pub hash_tagged_names: bool,
    /// The ACL user, over the URL's (`KEYLATCH_REDIS_USERNAME` in [`Config::from_env`]); on
    /// a `zk://` URL, the digest user.
    pub username: Option<String>,
    /// The password, over the URL's (`KEYLATCH_REDIS_PASSWORD` in [`Config::from_env`]).
    /// On a `zk://` URL, the digest password of the URL's user or `username` (refused without
    /// a user name). Never shown, never serialized.
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
    /// budget). 0 (the default) waits for none, unless [`replicas_mode`](Config::replicas_mode)
    /// or [`replicas_aof`](Config::replicas_aof) asks. `KEYLATCH_REPLICAS` in
    /// [`Config::from_env`]. Releases and renewals never wait: losing one to a failover can
    /// only shorten a hold, which the watchdog then reports.
    pub replicas: u32,
    /// How long an acquisition waits for [`replicas`](Config::replicas) to acknowledge it
    /// (default 1 s; less than `response_timeout`). `KEYLATCH_REPLICAS_TIMEOUT`.
    #[cfg_attr(feature = "serde", serde(with = "duration::serde_form"))]
    pub replicas_timeout: Duration,
    /// Which replicas an acquisition waits for: [`ReplicaMode::Count`] (the default), exactly
    /// [`replicas`](Config::replicas) of them; or [`ReplicaMode::AllConnected`], every replica
    /// the primary reports connected, failing only when it has some and none acknowledged
    /// (Redisson's `checkLockSyncedSlaves`; `replicas` must then be 0).
    /// `KEYLATCH_REPLICAS_MODE` (`count`, `all-connected`) in [`Config::from_env`].
    pub replicas_mode: ReplicaMode,
    /// Wait for the hold to reach the append-only files (`WAITAOF 1 n timeout`: the primary's
    /// own and `n` replicas') instead of the replicas' memory (`WAIT`), on a server that has
    /// `WAITAOF` (Redis and Valkey 7.2 and later) and runs with `appendonly yes`; elsewhere
    /// (Redis 7.0, AOF off) the acquisition waits with `WAIT` as without it, and a warning is
    /// logged once per connection. The counts of [`Error::NotReplicated`] then include the
    /// primary's own file. Default off; `KEYLATCH_REPLICAS_AOF` (`true`/`false`).
    pub replicas_aof: bool,
    /// The most holds the watchdog renews in one script call (Redisson's
    /// `lockWatchdogBatchSize`); the calls of one renewal tick still go in one pipelined round
    /// trip. Default [`RENEWAL_BATCH`](crate::RENEWAL_BATCH) (100), between 1 and 1000.
    /// `KEYLATCH_WATCHDOG_BATCH_SIZE` in [`Config::from_env`].
    pub watchdog_batch_size: usize,
    /// Put before every lock name to make its keys and channels (Redisson's `NameMapper`),
    /// so several applications or tenants share one Redis without sharing locks: with
    /// `"billing:"`, the lock `jobs` is the hash `billing:jobs` and its channel
    /// `redisson_lock__channel:{billing:jobs}`. A Redisson application sharing the locks must
    /// map its names the same way. At most 64 bytes, no `{`, `}` or control character.
    /// Default empty; `KEYLATCH_KEY_PREFIX` in [`Config::from_env`].
    pub key_prefix: String,
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
    /// Record who holds each reentrant-lock hold (host, process id, program, since when) in
    /// keylatch's own hash `keylatch_meta:{name}` beside the lock, written by the acquiring
    /// script and kept with the hold's lifetime, for `keylatch top` and `keylatch serve`.
    /// Redisson never reads that key. Default off: it adds an `HSET`, a `PEXPIRE` and a
    /// `TIME` to each acquisition (3–10 % on the lock bench, docs/operators.md); `keylatch run`
    /// turns it on for its own hold.
    pub holder_metadata: bool,
    /// The program recorded in the holder metadata; `None`: this process's command line.
    /// `keylatch run` sets it to the command it runs.
    pub holder_program: Option<String>,
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
            .field("replicas_mode", &self.replicas_mode)
            .field("replicas_aof", &self.replicas_aof)
            .field("watchdog_batch_size", &self.watchdog_batch_size)
            .field("key_prefix", &self.key_prefix)
            .field("sharded_pubsub", &self.sharded_pubsub)
            .field("coalesce", &self.coalesce)
            .field("holder_metadata", &self.holder_metadata)
            .field("holder_program", &self.holder_program)
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
            replicas_mode,
            replicas_aof,
            watchdog_batch_size,
            key_prefix,
            sharded_pubsub,
            pubsub_patterns,
            coalesce,
            holder_metadata,
            holder_program,
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
            && *replicas_mode == other.replicas_mode
            && *replicas_aof == other.replicas_aof
            && *watchdog_batch_size == other.watchdog_batch_size
            && *key_prefix == other.key_prefix
            && *sharded_pubsub == other.sharded_pubsub
            && *pubsub_patterns == other.pubsub_patterns
            && *coalesce == other.coalesce
            && *holder_metadata == other.holder_metadata
            && *holder_program == other.holder_program
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
            replicas_mode: ReplicaMode::Count,
            replicas_aof: false,
            watchdog_batch_size: DEFAULT_WATCHDOG_BATCH,
            key_prefix: String::new(),
            sharded_pubsub: true,
            coalesce: true,
            holder_metadata: false,
            holder_program: None,
            pubsub_patterns: 4,
            env_problem: None,
        }
    }
}

impl Config {
    /// Every environment variable [`Config::from_env`] reads (and nothing else does).
    pub const ENV_VARS: &'static [&'static str] = &[
        "KEYLATCH_URL",
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
        "KEYLATCH_REPLICAS_MODE",
        "KEYLATCH_REPLICAS_AOF",
        "KEYLATCH_WATCHDOG_BATCH_SIZE",
        "KEYLATCH_KEY_PREFIX",
    ];

    /// The settings every store shares ([`HoldSettings`](keylatch_core::HoldSettings)), as
    /// this configuration sets them; the settle window is at least
    /// `3 × response_timeout + 1 s` (a lost reply's retry must outlast a response timeout).
    pub fn hold_settings(&self) -> keylatch_core::HoldSettings {
        let settle_window = (self.response_timeout * 3 + Duration::from_secs(1))
            .max(self.settle_window)
            .min(Duration::from_secs(30 * 24 * 3600));
        keylatch_core::HoldSettings::default()
            .with_release_timeout(self.release_timeout)
            .with_settle_window(settle_window)
            .with_shutdown_timeout(self.shutdown_timeout)
    }

    /// A builder starting from the defaults; it reads no environment variable (start from
    /// the environment with `ConfigBuilder::from(Config::from_env())`).
    pub fn builder() -> ConfigBuilder {
        ConfigBuilder::from(Config::default())
    }

    /// The replica acknowledgement acquisitions wait for, or `None` when they wait for none.
    pub(crate) fn acknowledgement(&self) -> Option<Acknowledge> {
        let on = self.replicas > 0
            || self.replicas_mode == ReplicaMode::AllConnected
            || self.replicas_aof;
        on.then_some(Acknowledge {
            replicas: self.replicas,
            mode: self.replicas_mode,
            aof: self.replicas_aof,
            timeout: self.replicas_timeout,
        })
    }

    /// How often the watchdog renews: a third of the watchdog timeout.
    pub fn renewal_interval(&self) -> Duration {
        self.watchdog_timeout / 3
    }
}
