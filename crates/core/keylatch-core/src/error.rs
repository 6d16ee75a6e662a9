//! The error type shared by every keylatch crate and store.

use std::time::Duration;

/// A `Result` whose error is keylatch's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in keylatch.
///
/// Input errors (`InvalidName`, `InvalidLease`, `InvalidConfig`, …) are detected before
/// anything is sent to the store, so the store is left untouched. Errors that come from the
/// store's client library keep their cause in [`std::error::Error::source`] as a
/// [`StoreError`] (downcast it to the library's error type, for example
/// `redis::RedisError`); the message never repeats it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The lock name is empty or longer than [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) bytes.
    #[error("invalid lock name: {reason}")]
    InvalidName {
        /// Why the name was refused.
        reason: &'static str,
    },
    /// A lease is zero or longer than [`MAX_LEASE`](crate::MAX_LEASE).
    #[error("invalid lease {lease:?}: {reason}")]
    InvalidLease {
        /// The lease that was given.
        lease: Duration,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A configuration value is out of range.
    #[error("invalid configuration: {field}: {reason}")]
    InvalidConfig {
        /// The offending field.
        field: &'static str,
        /// Why it was refused.
        reason: &'static str,
    },
    /// The caller does not hold the lock it tried to release (it was never acquired by this
    /// owner, it expired, or it was force-unlocked). Nothing was changed.
    #[error("lock {name:?} is not held by this owner")]
    NotHeld {
        /// The lock name.
        name: String,
    },
    /// The owner that holds a non-reentrant lock asked for it again: an error at once rather
    /// than a wait that would never end. Nothing was changed (the first hold is intact).
    #[error("lock {name:?} is non-reentrant and already held by this owner")]
    AlreadyHeld {
        /// The lock name.
        name: String,
    },
    /// A reader asked for the write lock of the same read-write lock: waiting would deadlock
    /// (it would wait for its own read hold to end). Nothing was changed.
    #[error(
        "lock {name:?}: a read holder cannot take the write lock (release the read lock first)"
    )]
    UpgradeRefused {
        /// The lock name.
        name: String,
    },
    /// A permit count is zero, negative, larger than the semaphore could ever hold, or would
    /// overflow it. Nothing was changed.
    #[error("invalid permit count: {reason}")]
    InvalidPermits {
        /// Why it was refused.
        reason: &'static str,
    },
    /// A count-down latch's count is zero or larger than Redis can count (`i64::MAX`).
    /// Nothing was changed.
    #[error("invalid latch count: {reason}")]
    InvalidCount {
        /// Why it was refused.
        reason: &'static str,
    },
    /// A permit id that this semaphore never issued, or whose lease already ended. Nothing was
    /// changed.
    #[error("permit {id:?} of semaphore {name:?} is unknown or expired")]
    UnknownPermit {
        /// The semaphore name.
        name: String,
        /// The permit id.
        id: String,
    },
    /// Some of the permit ids given to an all-or-none release are unknown or their lease
    /// already ended; nothing was released.
    #[error("permits {ids:?} of semaphore {name:?} are unknown or expired; none was released")]
    UnknownPermits {
        /// The semaphore's name.
        name: String,
        /// The ids not held.
        ids: Vec<String>,
    },
    /// A key keylatch needs holds a value of another type (Redis `WRONGTYPE`). Nothing was
    /// changed.
    #[error("key {key:?} holds a value of the wrong type for this primitive")]
    WrongType {
        /// The key.
        key: String,
    },
    /// A lock key exists without an expiry, so it would never be released by itself; keylatch
    /// refuses to wait on it. Nothing was changed.
    #[error("key {key:?} is held without a ttl and would never expire")]
    NoTtl {
        /// The key.
        key: String,
    },
    /// The Redis server could not be reached.
    #[error("cannot connect to {url}")]
    Connect {
        /// The URL (without password) that was tried.
        url: String,
        /// The cause.
        #[source]
        source: StoreError,
    },
    /// The URL could not be parsed.
    #[error("invalid url {url:?}")]
    InvalidUrl {
        /// The URL (without password) that was given.
        url: String,
        /// The cause.
        #[source]
        source: StoreError,
    },
    /// A `redis+sentinel://` URL is malformed. Nothing was sent.
    #[error("invalid sentinel url {url:?}: {reason}")]
    InvalidSentinelUrl {
        /// The URL (without password) that was given.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A `redis+cluster://` URL is malformed. Nothing was sent.
    #[error("invalid cluster url {url:?}: {reason}")]
    InvalidClusterUrl {
        /// The URL (without password) that was given.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Redis Cluster could not serve the command's slot for now (`CLUSTERDOWN`, `TRYAGAIN`
    /// during a slot migration, `MASTERDOWN`), or its redirections did not settle, after
    /// retries with back-off within the response timeout. The command did not run; a wait
    /// tries again within its budget.
    #[error("the cluster cannot serve the slot now; the command did not run")]
    ClusterUnavailable(#[source] StoreError),
    /// A TLS file (CA, certificate or key) could not be read.
    #[error("cannot read the TLS file {path:?} ({field})")]
    TlsFile {
        /// The setting that names it: `tls.ca_file`, `tls.cert_file` or `tls.key_file`.
        field: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The TLS handshake failed because the server's certificate did not verify (signed by
    /// another CA, expired, or issued for another host), or because the server wanted a client
    /// certificate that was not given.
    #[error("TLS verification failed connecting to {url}")]
    TlsVerification {
        /// The URL (without password) that was tried.
        url: String,
        /// The cause.
        #[source]
        source: StoreError,
    },
    /// Authentication failed: wrong password, unknown or disabled user (`WRONGPASS`), or no
    /// credentials where the server requires them (`NOAUTH`).
    #[error("the server refused the credentials")]
    Auth(#[source] StoreError),
    /// The Redis user lacks a permission keylatch needs (`NOPERM`): a command, a key or a
    /// pub/sub channel, as [`what`](Error::NoPermission::what) says. docs/deployment.md gives
    /// the ACL rules keylatch needs.
    #[error("the server denied {what} to this user (NOPERM)")]
    NoPermission {
        /// What was denied: `the command 'evalsha'`, `a key`, `a channel`, … as Redis says it.
        what: String,
        /// The cause.
        #[source]
        source: StoreError,
    },
    /// A command did not get a reply in time. Its effect on the server is unknown; keylatch
    /// undoes any hold or permit it may have granted.
    #[error("the server did not reply within {after:?}")]
    Timeout {
        /// The configured response timeout.
        after: Duration,
    },
    /// The connection to Redis failed while a command was in flight. Its effect on the server
    /// is unknown; keylatch undoes any hold or permit it may have granted.
    #[error("the connection to the server failed")]
    Connection(#[source] StoreError),
    /// No connection could be taken from the pool.
    #[error("no connection available from the pool")]
    Pool(#[source] StoreError),
    /// Redis is out of memory (`maxmemory` reached under the `noeviction` policy) and refused
    /// a command that takes memory, before it ran: nothing was written. Releases and renewals
    /// still run (their scripts declare `allow-oom`).
    #[error("the server is out of memory and refused the command; nothing was written")]
    OutOfMemory(#[source] StoreError),
    /// The server is no longer the primary (`READONLY`: a failover made it a replica) and
    /// refused the command before it ran. keylatch looks the primary up again and sends the
    /// command there; this error is seen only when that did not succeed within a few tries.
    #[error("the server refused the command as a replica (READONLY); nothing was written")]
    ReadOnly(#[source] StoreError),
    /// Any other error reported by Redis.
    #[error("the server reported an error")]
    Store(#[source] StoreError),
    /// A script returned a reply keylatch does not understand (another program wrote to the
    /// key, or a script of another version is loaded).
    #[error("unexpected reply from the server for {what}")]
    UnexpectedReply {
        /// Which call it was.
        what: &'static str,
    },
    /// A value that a codec cannot represent portably (or stored bytes it cannot read back):
    /// nothing was written for it.
    #[error("the {codec} codec cannot represent this value: {reason}")]
    Codec {
        /// The codec (`"long"`, `"json"`, …).
        codec: &'static str,
        /// What was wrong with the value.
        reason: String,
    },
    /// The client has been shut down.
    #[error("the keylatch client is closed")]
    Closed,
    /// The primitive has no such operation, for a reason it names; nothing was sent. For
    /// example `force_unlock` on a semaphore's lock view: permits have no holder to evict.
    #[error("{primitive} does not support {operation}: {reason}")]
    Unsupported {
        /// The primitive (`"semaphore"`, …).
        primitive: &'static str,
        /// The operation asked for.
        operation: &'static str,
        /// Why, and what to use instead.
        reason: &'static str,
    },
    /// A client's shutdown gave up at its timeout with semaphore
    /// releases the server had not confirmed (it could not be reached): they are listed. The
    /// client is closed, so nothing sends them again; an attempt already sent may still arrive
    /// and apply (once), so read the count before giving those permits back from elsewhere.
    /// Otherwise as [`Error::Timeout`] from the shutdown.
    #[error(
        "the shutdown gave up after {after:?} with {} release(s) unconfirmed: {}",
        releases.len(),
        list(releases)
    )]
    ShutdownUnfinished {
        /// The configured shutdown timeout.
        after: Duration,
        /// The releases not confirmed, sorted by name.
        releases: Vec<UnfinishedRelease>,
    },
    /// Replica acknowledgement (`Config::replicas`): fewer replicas
    /// than asked for confirmed the acquisition within
    /// `Config::replicas_timeout`, so a failover could
    /// have lost it. The acquisition was undone; a wait tries again within its budget.
    #[error(
        "only {acknowledged} of {wanted} replica(s) acknowledged the acquisition within \
         {timeout:?}; it was undone"
    )]
    NotReplicated {
        /// How many replicas acknowledged.
        acknowledged: u32,
        /// How many were asked for.
        wanted: u32,
        /// How long the acquisition waited for them.
        timeout: Duration,
    },
    /// A lock over several independent servers (RedLock) could not reach a majority of them:
    /// too many servers failed or did not answer in time, whoever held the lock.
    #[error(
        "no quorum: {acquired} of {servers} servers acquired, {needed} needed; {failed} failed \
         or did not answer"
    )]
    NoQuorum {
        /// Servers that granted the lock in the last attempt.
        acquired: usize,
        /// How many must.
        needed: usize,
        /// Servers in all.
        servers: usize,
        /// Servers that failed or did not answer in the last attempt.
        failed: usize,
    },
}

impl Error {
    /// True when the outcome of the command is unknown: it may or may not have run on the
    /// server (timeouts and connection failures), or may not survive a failover (an
    /// acquisition too few replicas acknowledged): what it may have taken must be undone.
    pub fn is_ambiguous(&self) -> bool {
        matches!(
            self,
            Error::Timeout { .. } | Error::Connection(_) | Error::NotReplicated { .. }
        )
    }

    /// True when trying again soon may succeed: an ambiguous outcome, a server that could not
    /// be reached (restarting, or a primary being replaced), or a node that is a replica now.
    pub fn is_transient(&self) -> bool {
        self.is_ambiguous()
            || matches!(
                self,
                Error::Connect { .. } | Error::ReadOnly(_) | Error::ClusterUnavailable(_)
            )
    }
}

/// A release that had not been applied when a client's shutdown gave
/// up: the server could not be reached in time. Listed by
/// [`Error::ShutdownUnfinished`](crate::Error::ShutdownUnfinished).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct UnfinishedRelease {
    /// The semaphore's name.
    pub name: String,
    /// How many permits the release was to give back (for a permit-expirable semaphore, how
    /// many permit ids; their leases end them at the latest).
    pub permits: u64,
}

impl std::fmt::Display for UnfinishedRelease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} permit(s) of '{}'", self.permits, self.name)
    }
}

/// The releases, for a message: `1 permit(s) of 'a', 2 permit(s) of 'b'`.
pub(crate) fn list(releases: &[UnfinishedRelease]) -> String {
    releases
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// An error of a store's client library (redis-rs, zookeeper-client), kept as the source of
/// an [`Error`]: its `Display` and `Debug` are the library's, and
/// [`downcast_ref`](StoreError::downcast_ref) gives the library's own type back.
#[derive(Clone)]
pub struct StoreError(std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>);

impl StoreError {
    /// Wraps a client library's error.
    pub fn new(err: impl std::error::Error + Send + Sync + 'static) -> StoreError {
        StoreError(std::sync::Arc::new(err))
    }

    /// The library's error, if it is an `E`.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref()
    }
}

impl std::fmt::Debug for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}
