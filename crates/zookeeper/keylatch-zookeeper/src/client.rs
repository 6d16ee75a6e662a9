//! [`ZkClient`]: one ZooKeeper session and the locks made on it, and its [`ZkConfig`].
//!
//! May import: keylatch-core, zookeeper-client, `session`, `watch`, `url`, `path`, `tls`, and
//! the recipes (`mutex`, `semaphore`, `rwlock`), which never import this file.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use keylatch_core::secrecy::SecretString;
use keylatch_core::{Background, Error, HoldSettings, Result, StoreError, WatchdogRegistry};
use tokio::sync::oneshot;
use tokio::time::Instant;
use uuid::Uuid;
use zookeeper_client as zk;

use crate::acl::AclPolicy;
use crate::mutex::ZkMutex;
use crate::path::{check_path, lock_path};
use crate::rwlock::ZkReadWriteLock;
use crate::semaphore::ZkSemaphore;
use crate::session::Shared;
use crate::tls::TlsPaths;
use crate::url::ZkUrl;
use crate::watch::{DisconnectLoss, Reopen};

/// The settings of a [`ZkClient`].
///
/// ```
/// use std::time::Duration;
/// use keylatch_zookeeper::{DisconnectLoss, ZkConfig};
///
/// let config = ZkConfig::default()
///     .with_session_timeout(Duration::from_secs(6))
///     .with_base_path("/apps/orders/locks")
///     .with_disconnect_loss(DisconnectLoss::OnlyOnExpiry);
/// assert_eq!(config.base_path(), "/apps/orders/locks");
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct ZkConfig {
    session_timeout: Duration,
    connection_timeout: Duration,
    base_path: String,
    disconnect_loss: DisconnectLoss,
    /// The ACL policy, over the URL's `acl=` (else [`AclPolicy::Open`]).
    acl_policy: Option<AclPolicy>,
    /// The digest user, over the URL's.
    user: Option<String>,
    /// The digest password, over the URL's (redacted in `Debug`).
    password: Option<SecretString>,
    /// The TLS files of a `zk+tls://` URL (paths only).
    tls: TlsPaths,
    /// What every store shares: the release and shutdown timeouts, the settle window.
    hold: HoldSettings,
}

impl Default for ZkConfig {
    fn default() -> ZkConfig {
        ZkConfig {
            session_timeout: Duration::from_secs(10),
            connection_timeout: Duration::from_secs(5),
            base_path: "/keylatch".to_owned(),
            disconnect_loss: DisconnectLoss::default(),
            acl_policy: None,
            user: None,
            password: None,
            tls: TlsPaths::default(),
            hold: HoldSettings::default().with_settle_window(Duration::from_secs(10)),
        }
    }
}

impl ZkConfig {
    /// The session timeout asked for (the server bounds it: 2 to 20 ticks by default). Every
    /// node of the session is deleted by the server once it expires. Default 10 s.
    pub fn with_session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long one connection attempt to a server may take. Default 5 s.
    pub fn with_connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// Where lock names that do not start with `/` go. Default `/keylatch`.
    pub fn with_base_path(mut self, path: impl Into<String>) -> Self {
        self.base_path = path.into();
        self
    }

    /// When the holds of a disconnected client are taken as lost. Default
    /// [`DisconnectLoss::OnDisconnect`]: as soon as the connection is lost, before the
    /// ensemble could expire the session and hand the lock on (see [`DisconnectLoss`] for
    /// the bound). The other policies let a hold survive a reconnection; a policy that may
    /// signal loss after the session could expire is logged as unsafe at connect.
    pub fn with_disconnect_loss(mut self, policy: DisconnectLoss) -> Self {
        self.disconnect_loss = policy;
        self
    }

    /// The ACL of every node keylatch creates (lock directories, lock nodes, a missing
    /// chroot), over the URL's `acl=` parameter. Default [`AclPolicy::Open`], Curator's
    /// default, so clients with other credentials share the locks.
    pub fn with_acl_policy(mut self, policy: AclPolicy) -> Self {
        self.acl_policy = Some(policy);
        self
    }

    /// The digest user name, over the URL's (`zk://user@host:port`). Digest credentials need
    /// both a user and a password.
    pub fn with_user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// The digest password, over the URL's. Sent to the server as `user:password` when the
    /// session starts: in clear text unless the URL is `zk+tls://`. Never shown in `Debug`,
    /// errors or logs.
    pub fn with_password(mut self, password: SecretString) -> Self {
        self.password = Some(password);
        self
    }

    /// For `zk+tls://` (required there): a PEM file of the CA certificates the servers'
    /// certificates are verified against (the CA of ZooKeeper's `ssl.keyStore`). The server is
    /// also checked to be the host the URL names.
    pub fn with_tls_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.ca_file = Some(path.into());
        self
    }

    /// For `zk+tls://` servers that require a client certificate (`ssl.clientAuth=need`): a
    /// PEM certificate signed by a CA of the server's `ssl.trustStore`, and its PEM private
    /// key. Read at connect; the key never shows in `Debug` or in errors.
    pub fn with_tls_client_cert(
        mut self,
        cert_file: impl Into<PathBuf>,
        key_file: impl Into<PathBuf>,
    ) -> Self {
        self.tls.client_cert = Some((cert_file.into(), key_file.into()));
        self
    }

    /// The longest an `unlock().await` waits for the server. Default 5 s.
    pub fn with_release_timeout(mut self, timeout: Duration) -> Self {
        self.hold = self.hold.with_release_timeout(timeout);
        self
    }

    /// The longest [`ZkClient::shutdown`] waits for releases. Default 10 s.
    pub fn with_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.hold = self.hold.with_shutdown_timeout(timeout);
        self
    }

    /// The base path.
    pub fn base_path(&self) -> &str {
        &self.base_path
    }

    fn validate(&self) -> Result<()> {
        let invalid = |field, reason| Err(Error::InvalidConfig { field, reason });
        if check_path(&self.base_path).is_err() {
            return invalid("base_path", "not a valid znode path");
        }
        if self.session_timeout < Duration::from_millis(100) {
            return invalid("session_timeout", "must be at least 100ms");
        }
        if self.connection_timeout.is_zero() {
            return invalid("connection_timeout", "must not be zero");
        }
        self.hold.validate()?;
        if let DisconnectLoss::After(bound) = self.disconnect_loss
            && bound.is_zero()
        {
            return invalid("disconnect_loss", "the bound must not be zero");
        }
        Ok(())
    }
}

/// A ZooKeeper session and the locks made on it. Cheap to clone (clones share the session).
///
/// The session's nodes are the client's holds: when the session ends (expires, is closed),
/// the server deletes them, and every guard's [`lost`](keylatch_core::LockGuard::lost)
/// completes. After an expiry the client opens a new session by itself (as Curator does after
/// LOST; [`session_id`](ZkClient::session_id) changes): acquisitions made once it is open work
/// as before, while those in between fail with a store error.
#[derive(Clone)]
pub struct ZkClient {
    pub(crate) shared: Arc<Shared>,
    config: Arc<ZkConfig>,
    redacted: Arc<str>,
}

impl fmt::Debug for ZkClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkClient")
            .field("url", &self.redacted)
            .field("id", &self.shared.id)
            .field("base_path", &self.config.base_path)
            .finish_non_exhaustive()
    }
}

impl ZkClient {
    /// Connects with the default [`ZkConfig`]; see [`connect_with`](ZkClient::connect_with).
    ///
    /// # Errors
    /// As [`connect_with`](ZkClient::connect_with).
    pub async fn connect(url: &str) -> Result<ZkClient> {
        ZkClient::connect_with(url, ZkConfig::default()).await
    }

    /// Connects to `zk://[user[:password]@]host:port[,host:port…][/chroot][?acl=…]`: a
    /// session on one of the hosts, digest credentials when given (`user:password` from the
    /// URL, or [`with_user`](ZkConfig::with_user) / [`with_password`](ZkConfig::with_password)
    /// over it), the chroot created when missing. Nodes are created with the
    /// [`AclPolicy`] of the configuration, else of the URL's `acl=open|creator|read`, else
    /// open to anyone (Curator's default). `zk+tls://…` (the `tls` feature) connects to
    /// ZooKeeper's `secureClientPort` on every host, verified against
    /// [`with_tls_ca_file`](ZkConfig::with_tls_ca_file).
    ///
    /// # Errors
    /// [`Error::InvalidUrl`], [`Error::InvalidConfig`] (nothing sent: also for a password
    /// without a user name or the reverse, a creator-only policy without credentials, for
    /// `zk+tls://`
    /// without a CA or without the `tls` feature, and for TLS files with `zk://`),
    /// [`Error::TlsFile`] for a TLS file that cannot be read; [`Error::Connect`] when no
    /// session could be established (within the session timeout: with `zk+tls://` to a
    /// plaintext port its source says so); [`Error::TlsVerification`] when a server's
    /// certificate (or the client's) is refused; [`Error::Auth`] when the credentials are
    /// refused. The password and the private key never appear in an error.
    ///
    /// # Cancel safety
    /// Cancel safe: a session being established is closed when the future is dropped.
    pub async fn connect_with(url: &str, config: ZkConfig) -> Result<ZkClient> {
        config.validate()?;
        let url = ZkUrl::parse(url)?;
        let reopen = reopen_for(&url, &config)?;
        let acls = reopen.acls;
        let mut client = match reopen.connect().await {
            Ok(client) => client,
            Err(err) => return Err(connect_failure(err, &reopen, &url, &config).await),
        };
        if let Some(chroot) = &url.chroot {
            let options = zk::CreateMode::Persistent.with_acls(acls);
            client
                .mkdir(chroot, &options)
                .await
                .map_err(|err| store_err(err, &client))?;
            client = client
                .chroot(chroot.as_str())
                .map_err(|_| Error::InvalidUrl {
                    url: url.redacted.clone(),
                    source: StoreError::new(crate::url::UrlError::chroot()),
                })?;
        }
        let states = client.state_watcher();
        let registry = WatchdogRegistry::new();
        let background = Background::new(registry, config.hold);
        let (stop, stopped) = oneshot::channel();
        let base = config.base_path.clone();
        let lose_on_disconnect = config.disconnect_loss == DisconnectLoss::OnDisconnect;
        let shared = Arc::new(Shared::new(
            client,
            background,
            base,
            acls,
            lose_on_disconnect,
            stop,
        ));
        crate::watch::warn_if_unsafe(
            config.disconnect_loss,
            shared.session_timeout,
            config.connection_timeout,
        );
        crate::watch::spawn(
            Arc::downgrade(&shared),
            states,
            config.disconnect_loss,
            shared.session_timeout,
            reopen,
            stopped,
        );
        Ok(ZkClient {
            shared,
            config: Arc::new(config),
            redacted: Arc::from(url.redacted.as_str()),
        })
    }

    /// A raw zookeeper-client session on `url`, beside any `ZkClient`'s: the same URL parser
    /// ([`ZkUrl::parse`]), credentials, TLS files (`zk+tls://`) and chroot (created when
    /// missing) as [`connect_with`](ZkClient::connect_with), and none of the recipes, for
    /// tools that send requests of their own (the `keylatch` command's benchmark floor and its
    /// removal of scratch nodes).
    ///
    /// # Errors
    /// As [`connect_with`](ZkClient::connect_with).
    ///
    /// # Cancel safety
    /// Cancel safe: a session being established is closed when the future is dropped.
    pub async fn connect_raw(url: &ZkUrl, config: ZkConfig) -> Result<zk::Client> {
        config.validate()?;
        let reopen = reopen_for(url, &config)?;
        let client = match reopen.connect().await {
            Ok(client) => client,
            Err(err) => return Err(connect_failure(err, &reopen, url, &config).await),
        };
        let Some(chroot) = &url.chroot else {
            return Ok(client);
        };
        client
            .mkdir(chroot, &zk::CreateMode::Persistent.with_acls(reopen.acls))
            .await
            .map_err(|err| store_err(err, &client))?;
        client
            .chroot(chroot.as_str())
            .map_err(|_| Error::InvalidUrl {
                url: url.redacted.clone(),
                source: StoreError::new(crate::url::UrlError::chroot()),
            })
    }

    /// The reentrant mutex `name`: the path itself when `name` starts with `/`, else
    /// `<base path>/<name>`.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for an empty or too long name, or one that is no valid znode
    /// path.
    pub fn lock(&self, name: &str) -> Result<ZkMutex> {
        let path = lock_path(&self.shared.base, name)?;
        Ok(ZkMutex::new(self.shared.clone(), name, path))
    }

    /// The semaphore `name` (named as [`lock`](ZkClient::lock)'s), with at most `max_leases`
    /// permits held at once.
    ///
    /// # Errors
    /// [`Error::InvalidName`]; [`Error::InvalidPermits`] for a maximum of zero.
    pub fn semaphore(&self, name: &str, max_leases: u32) -> Result<ZkSemaphore> {
        let path = lock_path(&self.shared.base, name)?;
        ZkSemaphore::new(self.shared.clone(), name, path, max_leases)
    }

    /// The read-write lock `name` (named as [`lock`](ZkClient::lock)'s).
    ///
    /// # Errors
    /// [`Error::InvalidName`].
    pub fn read_write_lock(&self, name: &str) -> Result<ZkReadWriteLock> {
        let path = lock_path(&self.shared.base, name)?;
        Ok(ZkReadWriteLock::new(self.shared.clone(), name, path))
    }

    /// This client's UUID: the first half of its owner ids.
    pub fn id(&self) -> Uuid {
        self.shared.id
    }

    /// The current session's id, while the client is open (a new one after an expiry).
    pub fn session_id(&self) -> Option<i64> {
        self.shared.client().ok().map(|c| c.session_id().0)
    }

    /// The session timeout the server granted.
    pub fn session_timeout(&self) -> Duration {
        self.shared.session_timeout
    }

    /// The background-work handle (hold registry, background deletes).
    pub fn background(&self) -> &Background {
        &self.shared.background
    }

    /// Waits until every background delete (of a released guard, or of a dropped
    /// acquisition's node) has finished.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_idle(&self) {
        self.shared.background.wait_idle().await;
    }

    /// Ends the client: refuses new acquisitions, ends waits, releases every hold (deleting
    /// its node; guards report lost), and closes the session, which frees any node left.
    ///
    /// # Errors
    /// [`Error::Timeout`] when something was still unfinished after the shutdown timeout
    /// (the session is closed all the same).
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped shutdown may leave the session open until the client drops.
    pub async fn shutdown(&self) -> Result<()> {
        let limit = self.config.hold.shutdown_timeout();
        let deadline = Instant::now() + limit;
        let result = self.shared.background.shutdown(deadline, limit).await;
        if let Some(client) = self.shared.take_client() {
            let mut states = client.state_watcher();
            // The last handle: dropping it closes the session.
            drop(client);
            let closed = async {
                loop {
                    if matches!(
                        states.changed().await,
                        zk::SessionState::Closed
                            | zk::SessionState::Expired
                            | zk::SessionState::AuthFailed
                    ) {
                        return;
                    }
                }
            };
            if tokio::time::timeout_at(deadline, closed).await.is_err() {
                tracing::debug!(target: "keylatch::zookeeper", "shutdown: the session was not seen closed in time");
            }
        }
        result
    }
}

/// How sessions on `url` are opened: its hosts, credentials, chroot and TLS files (read and
/// checked here), with `config`'s timeouts.
fn reopen_for(url: &ZkUrl, config: &ZkConfig) -> Result<Reopen> {
    let invalid = |field, reason| Error::InvalidConfig { field, reason };
    let user = config.user.as_deref().or(url.user.as_deref());
    let password = config.password.as_ref().or(url.password.as_ref());
    let digest = crate::url::digest(user, password).map_err(|why| invalid("password", why))?;
    let policy = config.acl_policy.or(url.acl).unwrap_or_default();
    if policy.needs_credentials() && digest.is_none() {
        return Err(invalid(
            "acl_policy",
            "a creator-only ACL needs digest credentials (zk://user:password@…)",
        ));
    }
    let tls = crate::tls::load(&config.tls, url.tls, &url.hosts, &url.redacted)?.map(Arc::new);
    Ok(Reopen {
        hosts: url.hosts.clone(),
        session_timeout: config.session_timeout,
        connection_timeout: config.connection_timeout,
        digest,
        chroot: url.chroot.clone(),
        acls: policy.acls(),
        tls,
    })
}

/// The error of a failed connect: refused credentials, a TLS handshake that says why, or the
/// client's own error.
async fn connect_failure(err: zk::Error, reopen: &Reopen, url: &ZkUrl, config: &ZkConfig) -> Error {
    if let Some(tls) = tls_failure(reopen, &url.redacted, config).await {
        return tls;
    }
    match err {
        zk::Error::AuthFailed | zk::Error::NoAuth => Error::Auth(StoreError::new(err)),
        err => Error::Connect {
            url: url.redacted.clone(),
            source: StoreError::new(err),
        },
    }
}

/// Why a `zk+tls://` connect failed, when a handshake of our own can tell.
async fn tls_failure(reopen: &crate::watch::Reopen, url: &str, config: &ZkConfig) -> Option<Error> {
    #[cfg(feature = "tls")]
    if let Some(tls) = &reopen.tls {
        let (hosts, url) = (reopen.hosts.clone(), url.to_owned());
        return crate::tls::diagnose(tls.clone(), hosts, config.connection_timeout, url).await;
    }
    let _ = (reopen, url, config);
    None
}

fn store_err(err: zk::Error, client: &zk::Client) -> Error {
    crate::session::store_error(err, client.session_timeout())
}
