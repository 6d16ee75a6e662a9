//! Where and how keylatch connects: the endpoint a URL names (one server, or a service behind
//! Sentinel), TLS settings and credentials. The one place that handles secrets: they go from
//! the configuration into redis-rs's connection settings and nowhere else.

use deadpool_redis::redis::{
    self, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo,
    sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType},
};

use crate::connection::config::Config;
use keylatch_core::{Error, Result, StoreError};
use secrecy::ExposeSecret;

use keylatch_core::redact_url;

/// The default port of a Sentinel.
const SENTINEL_PORT: u16 = 26379;
/// The default port of a Redis server.
const REDIS_PORT: u16 = 6379;

/// What a URL names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// One server: `redis://`, `rediss://`, `redis+unix://`, `unix://`.
    Single,
    /// A primary found through Sentinel: `redis+sentinel://` or `rediss+sentinel://`.
    Sentinel(SentinelUrl),
    /// A Redis Cluster, from seed nodes: `redis+cluster://` or `rediss+cluster://`.
    Cluster(ClusterUrl),
}

/// A parsed `redis[s]+cluster://[user:password@]host:port[,host:port…]` URL.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ClusterUrl {
    pub(crate) tls: bool,
    pub(crate) nodes: Vec<(String, u16)>,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
}

impl std::fmt::Debug for ClusterUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterUrl")
            .field("tls", &self.tls)
            .field("nodes", &self.nodes)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

/// A parsed `redis[s]+sentinel://[user:password@]host:port[,host:port…]/service[/db]` URL.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SentinelUrl {
    pub(crate) tls: bool,
    pub(crate) sentinels: Vec<(String, u16)>,
    pub(crate) service: String,
    pub(crate) db: i64,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
}

impl std::fmt::Debug for SentinelUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelUrl")
            .field("tls", &self.tls)
            .field("sentinels", &self.sentinels)
            .field("service", &self.service)
            .field("db", &self.db)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

impl Endpoint {
    /// Parses the configured URL's shape (a single server's URL is checked by redis-rs).
    pub(crate) fn parse(url: &str) -> Result<Endpoint> {
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        let scheme = scheme.to_ascii_lowercase();
        let (tls, cluster) = match scheme.as_str() {
            "redis+sentinel" => (false, false),
            "rediss+sentinel" => (true, false),
            "redis+cluster" => (false, true),
            "rediss+cluster" => (true, true),
            _ => return Ok(Endpoint::Single),
        };
        let invalid = |reason: &'static str| {
            if cluster {
                Error::InvalidClusterUrl {
                    url: redact_url(url),
                    reason,
                }
            } else {
                Error::InvalidSentinelUrl {
                    url: redact_url(url),
                    reason,
                }
            }
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let (username, password) = match userinfo {
            None => (None, None),
            Some(info) => {
                let (user, pass) = info.split_once(':').unwrap_or((info, ""));
                // Percent-decoded as redis-rs decodes a `redis://` URL's user-info.
                let decode = |s: &str| {
                    percent_encoding::percent_decode_str(s)
                        .decode_utf8()
                        .map(|s| s.into_owned())
                        .map_err(|_| invalid("the user-info is not UTF-8 once percent-decoded"))
                };
                let user = Some(decode(user)?).filter(|u| !u.is_empty());
                let pass = Some(decode(pass)?).filter(|p| !p.is_empty());
                (user, pass)
            }
        };
        let default_port = if cluster { REDIS_PORT } else { SENTINEL_PORT };
        let mut addresses = Vec::new();
        for host in hosts.split(',').map(str::trim) {
            if host.is_empty() {
                return Err(invalid("an empty node address"));
            }
            let (name, port) = match host.rsplit_once(':') {
                Some((name, port)) if !name.ends_with(':') || name.starts_with('[') => (
                    name,
                    port.parse::<u16>()
                        .ok()
                        .filter(|p| *p != 0)
                        .ok_or_else(|| invalid("a port is not a number from 1 to 65535"))?,
                ),
                _ => (host, default_port),
            };
            let name = name.trim_start_matches('[').trim_end_matches(']');
            if name.is_empty() {
                return Err(invalid("an address has no host"));
            }
            addresses.push((name.to_owned(), port));
        }
        let path = path.split(['?', '#']).next().unwrap_or("");
        let mut parts = path.split('/').filter(|p| !p.is_empty());
        if cluster {
            if parts.next().is_some() {
                return Err(invalid(
                    "a cluster URL has no path (a cluster has only database 0)",
                ));
            }
            return Ok(Endpoint::Cluster(ClusterUrl {
                tls,
                nodes: addresses,
                username,
                password,
            }));
        }
        let service = parts
            .next()
            .ok_or_else(|| invalid("the service name is missing (…/<service-name>)"))?
            .to_owned();
        let db = match parts.next() {
            None => 0,
            Some(db) => db
                .parse::<i64>()
                .ok()
                .filter(|db| *db >= 0)
                .ok_or_else(|| invalid("the database number is not a number"))?,
        };
        if parts.next().is_some() {
            return Err(invalid("the path is …/<service-name>[/<db>]"));
        }
        Ok(Endpoint::Sentinel(SentinelUrl {
            tls,
            sentinels: addresses,
            service,
            db,
            username,
            password,
        }))
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_urls_parse() {
        let Endpoint::Sentinel(url) =
            Endpoint::parse("redis+sentinel://app:s%40cret@10.0.0.1:26380,10.0.0.2/jobs/3")
                .unwrap()
        else {
            panic!("not a sentinel url")
        };
        assert!(!url.tls);
        assert_eq!(
            url.sentinels,
            vec![
                ("10.0.0.1".to_owned(), 26380),
                ("10.0.0.2".to_owned(), SENTINEL_PORT)
            ]
        );
        assert_eq!(url.service, "jobs");
        assert_eq!(url.db, 3);
        assert_eq!(url.username.as_deref(), Some("app"));
        assert_eq!(url.password.as_deref(), Some("s@cret"));
        assert!(!format!("{url:?}").contains("cret"));
        let Endpoint::Sentinel(url) =
            Endpoint::parse("rediss+sentinel://[::1]:5000/keylatch").unwrap()
        else {
            panic!("not a sentinel url")
        };
        assert!(url.tls);
        assert_eq!(url.sentinels, vec![("::1".to_owned(), 5000)]);
        assert_eq!(Endpoint::parse("redis://h:1").unwrap(), Endpoint::Single);
    }

    #[test]
    fn bad_sentinel_urls_are_refused_without_their_password() {
        for url in [
            "redis+sentinel://u:hunter2@h:1",
            "redis+sentinel://u:hunter2@h:1/",
            "redis+sentinel://u:hunter2@h:x/svc",
            "redis+sentinel://u:hunter2@h:1,,h:2/svc",
            "redis+sentinel://u:hunter2@h:1/svc/db",
            "redis+sentinel://u:hunter2@h:1/svc/1/2",
        ] {
            let err = Endpoint::parse(url).unwrap_err();
            assert!(
                matches!(err, Error::InvalidSentinelUrl { .. }),
                "{url}: {err:?}"
            );
            assert!(!err.to_string().contains("hunter2"), "{err}");
            assert!(!format!("{err:?}").contains("hunter2"), "{err:?}");
        }
    }
}
