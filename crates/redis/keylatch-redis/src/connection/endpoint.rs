//! What a URL names: one server, a service behind Sentinel, or a Redis Cluster's seed nodes
//! ([`Endpoint::parse`]), with the credentials percent-decoded and masked in `Debug`.
//!
//! May import: the core's errors and URL redaction. Nothing else of the crate.

use keylatch_core::{Error, Result, redact_url};

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
