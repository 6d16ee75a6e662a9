//! How keylatch connects to what a URL names (see [`Endpoint`](super::endpoint::Endpoint)):
//! TLS settings and credentials for one server, a Sentinel set or a cluster's nodes. The one
//! place that handles secrets: they go from the configuration into redis-rs's connection
//! settings and nowhere else.

use deadpool_redis::redis::{
    self, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo,
    sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType},
};

use crate::connection::config::Config;
pub(crate) use crate::connection::endpoint::{ClusterUrl, Endpoint, SentinelUrl};
use keylatch_core::{Error, Result, StoreError};
use secrecy::ExposeSecret;

/// Installs rustls's process-wide crypto provider (ring) if none is installed yet: redis-rs's
/// TLS connections need one.
fn install_crypto_provider() {
    #[cfg(feature = "tls")]
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may have installed one meanwhile: either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// Whether a single server's URL asks for TLS (`rediss://`, `valkeys://`, any case).
fn is_tls_url(url: &str) -> bool {
    let scheme = url.trim_start().split("://").next().unwrap_or("");
    scheme.eq_ignore_ascii_case("rediss") || scheme.eq_ignore_ascii_case("valkeys")
}

/// A TLS endpoint needs the `tls` feature: without it, a typed error that says so, before
/// anything is sent.
fn tls_support(url_is_tls: bool) -> Result<()> {
    if url_is_tls && !cfg!(feature = "tls") {
        return Err(Error::InvalidConfig {
            field: "url",
            reason: "TLS (rediss://) needs keylatch's `tls` feature, which this build leaves out",
        });
    }
    Ok(())
}

/// The connection settings keylatch sends with every connection: the library's name, and the
/// configured credentials over the URL's.
fn redis_settings(
    mut settings: RedisConnectionInfo,
    username: Option<&str>,
    password: Option<&str>,
) -> RedisConnectionInfo {
    if let Some(username) = username {
        settings = settings.set_username(username);
    }
    if let Some(password) = password {
        settings = settings.set_password(password);
    }
    settings.set_lib_name("keylatch", env!("CARGO_PKG_VERSION"))
}

/// A redis-rs client for one server, with the configured TLS settings and credentials.
pub(crate) fn single_client(config: &Config) -> Result<redis::Client> {
    let shown = config.url.redacted();
    let invalid = |source| Error::InvalidUrl {
        url: shown.clone(),
        source: StoreError::new(source),
    };
    tls_support(is_tls_url(config.url.expose_secret()))?;
    let info: ConnectionInfo = config
        .url
        .expose_secret()
        .into_connection_info()
        .map_err(invalid)?;
    let settings = redis_settings(
        info.redis_settings().clone(),
        config.username.as_deref(),
        config.password.as_ref().map(ExposeSecret::expose_secret),
    );
    let mut addr = info.addr().clone();
    let is_tls = matches!(addr, ConnectionAddr::TcpTls { .. });
    if !is_tls && (config.tls.has_files() || config.tls.insecure) {
        return Err(Error::InvalidConfig {
            field: "tls",
            reason: "TLS settings need a rediss:// URL",
        });
    }
    if is_tls {
        install_crypto_provider();
        if let ConnectionAddr::TcpTls { insecure, .. } = &mut addr {
            *insecure |= config.tls.insecure;
            if *insecure {
                warn_insecure(&shown);
            }
        }
    }
    let info = info.set_addr(addr).set_redis_settings(settings);
    #[cfg(feature = "tls")]
    if is_tls && let Some(certificates) = config.tls.certificates()? {
        return redis::Client::build_with_tls(info, certificates).map_err(invalid);
    }
    redis::Client::open(info).map_err(invalid)
}

/// Says loudly that a connection trusts any certificate.
fn warn_insecure(shown: &str) {
    tracing::warn!(target: "keylatch::connection",
        url = %shown,
        "TLS certificate verification is OFF: anyone on the network path can impersonate the \
         server; use a CA file instead"
    );
}

/// A redis-rs Sentinel client that finds `url.service`'s primary, with TLS and credentials
/// for both the sentinels and the data nodes.
pub(crate) fn sentinel_client(config: &Config, url: &SentinelUrl) -> Result<SentinelClient> {
    let shown = config.url.redacted();
    let invalid = |source| Error::InvalidUrl {
        url: shown.clone(),
        source: StoreError::new(source),
    };
    if !url.tls && (config.tls.has_files() || config.tls.insecure) {
        return Err(Error::InvalidConfig {
            field: "tls",
            reason: "TLS settings need a rediss+sentinel:// URL",
        });
    }
    tls_support(url.tls)?;
    let tls_mode = url.tls.then_some(if config.tls.insecure {
        warn_insecure(&shown);
        redis::TlsMode::Insecure
    } else {
        redis::TlsMode::Secure
    });
    let addrs = url.sentinels.iter().map(|(host, port)| match tls_mode {
        None => ConnectionAddr::Tcp(host.clone(), *port),
        Some(mode) => ConnectionAddr::TcpTls {
            host: host.clone(),
            port: *port,
            insecure: mode == redis::TlsMode::Insecure,
            tls_params: None,
        },
    });
    let mut builder = SentinelClientBuilder::new(addrs, &url.service, SentinelServerType::Master)
        .map_err(invalid)?
        .set_client_to_redis_db(url.db);
    let username = config.username.as_deref().or(url.username.as_deref());
    let password = config
        .password
        .as_ref()
        .map(ExposeSecret::expose_secret)
        .or(url.password.as_deref());
    if let Some(username) = username {
        builder = builder.set_client_to_redis_username(username);
    }
    if let Some(password) = password {
        builder = builder.set_client_to_redis_password(password);
    }
    if let Some(username) = config.sentinel_username.as_deref() {
        builder = builder.set_client_to_sentinel_username(username);
    }
    if let Some(password) = config
        .sentinel_password
        .as_ref()
        .map(ExposeSecret::expose_secret)
    {
        builder = builder.set_client_to_sentinel_password(password);
    }
    #[cfg(feature = "tls")]
    if let Some(mode) = tls_mode {
        install_crypto_provider();
        builder = builder
            .set_client_to_redis_tls_mode(mode)
            .set_client_to_sentinel_tls_mode(mode);
        if let Some(certificates) = config.tls.certificates()? {
            builder = builder
                .set_client_to_redis_certificates(certificates.clone())
                .set_client_to_sentinel_certificates(certificates);
        }
    }
    builder.build().map_err(invalid)
}

/// What it takes to build redis-rs cluster clients: seed nodes, credentials, TLS and timeouts.
/// The command path and the pub/sub hub each build their own client from it.
pub(crate) struct ClusterSettings {
    seeds: Vec<ConnectionInfo>,
    username: Option<String>,
    password: Option<String>,
    tls: Option<redis::TlsMode>,
    #[cfg(feature = "tls")]
    certificates: Option<redis::TlsCertificates>,
    connect_timeout: std::time::Duration,
    response_timeout: std::time::Duration,
}

impl std::fmt::Debug for ClusterSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSettings")
            .field("seeds", &self.seeds.len())
            .field("username", &self.username)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl ClusterSettings {
    /// The settings for `url`'s seed nodes.
    pub(crate) fn from_url(config: &Config, url: &ClusterUrl) -> Result<ClusterSettings> {
        let shown = config.url.redacted();
        if !url.tls && (config.tls.has_files() || config.tls.insecure) {
            return Err(Error::InvalidConfig {
                field: "tls",
                reason: "TLS settings need a rediss+cluster:// URL",
            });
        }
        tls_support(url.tls)?;
        let tls = url.tls.then(|| {
            if config.tls.insecure {
                warn_insecure(&shown);
                redis::TlsMode::Insecure
            } else {
                redis::TlsMode::Secure
            }
        });
        let username = config.username.clone().or_else(|| url.username.clone());
        let password = config
            .password
            .as_ref()
            .map(|p| p.expose_secret().to_owned())
            .or_else(|| url.password.clone());
        let settings = redis_settings(
            RedisConnectionInfo::default(),
            username.as_deref(),
            password.as_deref(),
        );
        let seeds = url
            .nodes
            .iter()
            .map(|(host, port)| {
                let addr = match tls {
                    None => ConnectionAddr::Tcp(host.clone(), *port),
                    Some(mode) => ConnectionAddr::TcpTls {
                        host: host.clone(),
                        port: *port,
                        insecure: mode == redis::TlsMode::Insecure,
                        tls_params: None,
                    },
                };
                addr.into_connection_info()
                    .map(|info| info.set_redis_settings(settings.clone()))
            })
            .collect::<redis::RedisResult<Vec<_>>>()
            .map_err(|source| Error::InvalidUrl {
                url: shown.clone(),
                source: StoreError::new(source),
            })?;
        ClusterSettings::new(config, seeds, username, password, tls)
    }

    /// The settings for a cluster found behind a single server's URL (its node is the seed).
    pub(crate) fn from_node(config: &Config) -> Result<ClusterSettings> {
        let shown = config.url.redacted();
        tls_support(is_tls_url(config.url.expose_secret()))?;
        let info: ConnectionInfo =
            config
                .url
                .expose_secret()
                .into_connection_info()
                .map_err(|source| Error::InvalidUrl {
                    url: shown.clone(),
                    source: StoreError::new(source),
                })?;
        let username = config
            .username
            .clone()
            .or_else(|| info.redis_settings().username().map(str::to_owned));
        let password = config
            .password
            .as_ref()
            .map(|p| p.expose_secret().to_owned())
            .or_else(|| info.redis_settings().password().map(str::to_owned));
        let mut addr = info.addr().clone();
        let tls = match &mut addr {
            ConnectionAddr::TcpTls { insecure, .. } => {
                *insecure |= config.tls.insecure;
                Some(if *insecure {
                    redis::TlsMode::Insecure
                } else {
                    redis::TlsMode::Secure
                })
            }
            _ => None,
        };
        let settings = redis_settings(
            info.redis_settings().clone(),
            username.as_deref(),
            password.as_deref(),
        );
        let info = info.set_addr(addr).set_redis_settings(settings);
        ClusterSettings::new(config, vec![info], username, password, tls)
    }

    fn new(
        config: &Config,
        seeds: Vec<ConnectionInfo>,
        username: Option<String>,
        password: Option<String>,
        tls: Option<redis::TlsMode>,
    ) -> Result<ClusterSettings> {
        if tls.is_some() {
            install_crypto_provider();
        }
        Ok(ClusterSettings {
            seeds,
            username,
            password,
            tls,
            #[cfg(feature = "tls")]
            certificates: if tls.is_some() {
                config.tls.certificates()?
            } else {
                None
            },
            connect_timeout: config.connect_timeout,
            response_timeout: config.response_timeout,
        })
    }

    /// A redis-rs cluster client. For commands (`push` is `None`), with its automatic
    /// retries off: a script must never run twice because a retry layer could not tell whether
    /// it ran, so keylatch handles the cluster's redirections itself. For pub/sub, speaking
    /// RESP3 and delivering pushes to `push`, with the default retries (subscribing is
    /// idempotent).
    pub(crate) fn client(
        &self,
        push: Option<tokio::sync::mpsc::UnboundedSender<redis::PushInfo>>,
    ) -> redis::RedisResult<redis::cluster::ClusterClient> {
        let mut builder = redis::cluster::ClusterClientBuilder::new(self.seeds.clone())
            .connection_timeout(self.connect_timeout)
            .response_timeout(self.response_timeout);
        if let Some(username) = &self.username {
            builder = builder.username(username);
        }
        if let Some(password) = &self.password {
            builder = builder.password(password);
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = self.tls {
            builder = builder.tls(tls);
            if let Some(certificates) = &self.certificates {
                builder = builder.certs(certificates.clone());
            }
        }
        builder = match push {
            None => builder.retries(0),
            Some(push) => builder
                .use_protocol(redis::ProtocolVersion::RESP3)
                .push_sender(push),
        };
        builder.build()
    }
}

/// Whether `err` (or a cause of it) is a failed TLS certificate verification.
pub(crate) fn is_tls_verification(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(err);
    while let Some(err) = current {
        #[cfg(feature = "tls")]
        if let Some(rustls) = err.downcast_ref::<rustls::Error>() {
            return matches!(
                rustls,
                rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented
            );
        }
        let text = err.to_string();
        if text.contains("invalid peer certificate") || text.contains("UnknownIssuer") {
            return true;
        }
        current = err.source();
    }
    false
}
