//! `zk://` and `zk+tls://` URLs: hosts, an optional chroot and optional digest credentials,
//! parsed into a [`ZkUrl`] whose credentials never show in `Debug` or in errors.
//!
//! May import: keylatch-core only (no other file of this crate).

use std::fmt;

use keylatch_core::secrecy::{ExposeSecret, SecretString};
use keylatch_core::{Error, Result, StoreError, redact_url};

/// Why a `zk://` URL was refused (the source of [`Error::InvalidUrl`]).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UrlError(&'static str);

impl UrlError {
    pub(crate) fn chroot() -> UrlError {
        UrlError("the chroot is not a valid path")
    }

    #[cfg(feature = "tls")]
    pub(crate) fn server_name() -> UrlError {
        UrlError("a host name is not a valid TLS server name")
    }
}

/// A parsed `zk://[user:password@]host:port[,host:port…][/chroot]` (or `zk+tls://…`): the
/// one parser of ZooKeeper URLs, used by [`ZkClient`](crate::ZkClient) and by the `keylatch`
/// command alike.
///
/// ```
/// use keylatch_zookeeper::ZkUrl;
///
/// let url = ZkUrl::parse("zk+tls://app:S3cret@zk1:2281,zk2:2281/locks").unwrap();
/// assert!(url.is_tls() && url.has_credentials());
/// assert_eq!((url.hosts(), url.chroot()), ("zk1:2281,zk2:2281", Some("/locks")));
/// assert!(!format!("{url:?}").contains("S3cret"));
/// ```
#[derive(Clone)]
pub struct ZkUrl {
    /// `zk+tls://`: every host is a TLS port (ZooKeeper's `secureClientPort`).
    pub(crate) tls: bool,
    /// `host:port,host:port`, as zookeeper-client's connect string takes it.
    pub(crate) hosts: String,
    /// The chroot (`/app`), or `None`.
    pub(crate) chroot: Option<String>,
    /// `user:password` for the digest scheme.
    pub(crate) digest: Option<SecretString>,
    /// The URL with its password masked, for messages.
    pub(crate) redacted: String,
}

impl fmt::Debug for ZkUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkUrl")
            .field("url", &self.redacted)
            .finish_non_exhaustive()
    }
}

impl ZkUrl {
    /// Parses a `zk://` or `zk+tls://` URL (the scheme in any case).
    ///
    /// # Errors
    /// [`Error::InvalidUrl`] (the URL in it has its password masked).
    pub fn parse(url: &str) -> Result<ZkUrl> {
        parse(url)
    }

    /// Whether the URL is `zk+tls://` (every host a TLS port).
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The hosts, `host:port,host:port`.
    pub fn hosts(&self) -> &str {
        &self.hosts
    }

    /// The chroot (`/app`), or `None`.
    pub fn chroot(&self) -> Option<&str> {
        self.chroot.as_deref()
    }

    /// Whether the URL carries digest credentials (nodes are then created with the creator's
    /// ACL).
    pub fn has_credentials(&self) -> bool {
        self.digest.is_some()
    }

    /// The URL with its password masked, for messages.
    pub fn redacted(&self) -> &str {
        &self.redacted
    }

    /// The digest credentials (`user:password`), for the connector only.
    pub(crate) fn digest_bytes(&self) -> Option<&[u8]> {
        self.digest.as_ref().map(|s| s.expose_secret().as_bytes())
    }
}

/// Whether `url` names a ZooKeeper ensemble: its scheme is `zk://` or `zk+tls://` (in any
/// case). It says nothing of the rest; [`ZkUrl::parse`] does.
pub fn is_zookeeper_url(url: &str) -> bool {
    ["zk://", "zk+tls://"].iter().any(|scheme| {
        url.get(..scheme.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(scheme))
    })
}

fn invalid(url: &str, reason: &'static str) -> Error {
    Error::InvalidUrl {
        url: redact_url(url),
        source: StoreError::new(UrlError(reason)),
    }
}

/// Parses a `zk://` or `zk+tls://` URL (the scheme in any case).
///
/// # Errors
/// [`Error::InvalidUrl`] (the URL in it has its password masked).
pub(crate) fn parse(url: &str) -> Result<ZkUrl> {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let tls = if scheme.eq_ignore_ascii_case("zk") {
        false
    } else if scheme.eq_ignore_ascii_case("zk+tls") {
        true
    } else {
        return Err(invalid(url, "the scheme must be zk:// or zk+tls://"));
    };
    let (authority, chroot) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    let digest = match userinfo {
        None => None,
        Some(info) => {
            let Some((user, password)) = info.split_once(':') else {
                return Err(invalid(url, "credentials must be user:password"));
            };
            if user.is_empty() || password.is_empty() {
                return Err(invalid(url, "credentials must be user:password"));
            }
            Some(SecretString::from(info.to_owned()))
        }
    };
    if hosts.is_empty() {
        return Err(invalid(url, "no host"));
    }
    for host in hosts.split(',') {
        let Some((name, port)) = host.rsplit_once(':') else {
            return Err(invalid(url, "every host needs a port (host:port)"));
        };
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '@') {
            return Err(invalid(url, "a host name is empty or malformed"));
        }
        if port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(invalid(url, "a port is not a number from 1 to 65535"));
        }
    }
    let chroot = match chroot {
        "" | "/" => None,
        path => {
            crate::path::check_path(path)
                .map_err(|_| invalid(url, "the chroot is not a valid path"))?;
            Some(path.to_owned())
        }
    };
    Ok(ZkUrl {
        tls,
        hosts: hosts.to_owned(),
        chroot,
        digest,
        redacted: redact_url(url),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_parsed_and_secrets_kept_out_of_messages() {
        let url = parse("zk://app:S3cret@h1:2181,h2:2182/locks/app").unwrap();
        assert_eq!(url.hosts, "h1:2181,h2:2182");
        assert_eq!(url.chroot.as_deref(), Some("/locks/app"));
        assert_eq!(url.digest_bytes(), Some(&b"app:S3cret"[..]));
        assert!(!format!("{url:?}").contains("S3cret"));

        let plain = parse("zk://127.0.0.1:2181").unwrap();
        assert!(plain.digest.is_none() && plain.chroot.is_none() && !plain.tls);
        let secure = parse("ZK+TLS://app:S3cret@localhost:2281/app").unwrap();
        assert!(secure.tls && secure.hosts == "localhost:2281");
        assert!(!format!("{secure:?}").contains("S3cret"));

        for bad in [
            "redis://h:1",
            "zks://h:1",
            "zk+tls:/h:1",
            "zk+tls://",
            "zk://",
            "zk://h",
            "zk://h:x",
            "zk://h:0",
            "zk://app:S3cret@h",
            "zk://app@h:1",
            "zk://h:1/a//b",
            "zk://h:1/a/",
        ] {
            let err = parse(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidUrl { .. }), "{bad}");
            assert!(!format!("{err} {err:?}").contains("S3cret"), "{bad}");
        }
    }
}
