//! Secrets kept out of messages: a connection URL as it may be shown in an error, a log line
//! or `Debug` output, and [`SecretUrl`], the type a configuration keeps its URL in.

use secrecy::{ExposeSecret, SecretString};

/// A query parameter whose name or value has this in it (in any case) carries a password, as
/// `?password=` and `?pass=` do: its value is masked.
const SECRET_PARAM: &str = "pass";

/// The schemes keylatch reads (compared without case). Text before the first `:` that is not
/// one of them is not taken for a scheme when a URL does not parse: it may be a password.
const SCHEMES: [&str; 15] = [
    "redis",
    "rediss",
    "valkey",
    "valkeys",
    "redis+unix",
    "unix",
    "redis+sentinel",
    "rediss+sentinel",
    "redis+cluster",
    "rediss+cluster",
    "zk",
    "zk+tls",
    "zookeeper",
    "postgres",
    "postgresql",
];

/// The mask shown in place of a secret.
const MASK: &str = "***";

/// `url` with every secret masked as `***`, for errors, log lines and `Debug` output.
///
/// - A well-formed URL keeps its shape: the user-info's password (`redis://user:pw@h` →
///   `redis://user:***@h`) and the values of query parameters that speak of a password
///   (`?password=`, `?pass=`) are masked, for every scheme (`redis`, `rediss`, `redis+unix`,
///   `unix`, …).
/// - Anything else (a typo, a missing `//`, a sentinel or cluster URL's host list) is shown
///   with everything between its scheme (or its start) and its last `@` masked, and its query
///   or fragment masked whole; without an `@`, a host part whose `:` is not followed by a port number
///   (`default:S3cret`) is masked too. When in doubt, mask.
///
/// ```
/// use keylatch::redact_url;
///
/// assert_eq!(redact_url("redis://app:S3cret@db:6379/0"), "redis://app:***@db:6379/0");
/// assert_eq!(redact_url("redis:/:S3cret@db:6390"), "redis:/***@db:6390");
/// assert_eq!(redact_url("default:S3cret@db:6390"), "***@db:6390");
/// assert_eq!(redact_url("default:S3cret"), "***");
/// assert_eq!(
///     redact_url("postgres://app:S3cret@db:5432/jobs"),
///     "postgres://app:***@db:5432/jobs",
/// );
/// assert_eq!(redact_url("postgres://app@db/jobs"), "postgres://app@db/jobs");
/// assert_eq!(
///     redact_url("redis+sentinel://:S3cret@s1:26379,s2:26379/mymaster"),
///     "redis+sentinel://***@s1:26379,s2:26379/mymaster",
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    well_formed(url).unwrap_or_else(|| malformed(url))
}

/// A URL that `url` parses with an authority (`scheme://…`) and no `@` (nor a `:` in its
/// query) past it: shown with its password, secret query values and fragment masked.
fn well_formed(text: &str) -> Option<String> {
    let mut parsed = url::Url::parse(text).ok()?;
    let after_scheme = &text[parsed.scheme().len() + 1..];
    if parsed.cannot_be_a_base()
        || !after_scheme.starts_with("//")
        || parsed.path().contains(['@', ':'])
        || parsed.query().is_some_and(|q| q.contains(['@', ':']))
        || !known_scheme(parsed.scheme())
    {
        return None;
    }
    if parsed.password().is_some() {
        parsed.set_password(Some(MASK)).ok()?;
    }
    if parsed.fragment().is_some() {
        // Nothing reads a fragment: whatever is there was not meant to be.
        parsed.set_fragment(Some(MASK));
    }
    let secret = |text: &str| text.to_ascii_lowercase().contains(SECRET_PARAM);
    if parsed.query_pairs().any(|(k, v)| secret(&k) || secret(&v)) {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(k, v)| {
                let v = if secret(&k) || secret(&v) {
                    MASK.to_owned()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    Some(parsed.to_string())
}

fn known_scheme(scheme: &str) -> bool {
    SCHEMES.iter().any(|s| scheme.eq_ignore_ascii_case(s))
}

/// Anything [`well_formed`] does not take.
fn malformed(text: &str) -> String {
    // The scheme and the slashes after it, when the text starts with a scheme keylatch knows.
    // `zk:S3cret` is a user and a password, not a scheme: a scheme is followed by `/`.
    let prefix_len = match text.split_once(':') {
        Some((scheme, rest)) if known_scheme(scheme) && rest.starts_with('/') => {
            scheme.len() + 1 + (rest.len() - rest.trim_start_matches('/').len())
        }
        _ => 0,
    };
    let (prefix, rest) = text.split_at(prefix_len);
    // A query or a fragment is masked whole.
    let (rest, query) = match rest.find(['?', '#']) {
        Some(at) => (
            &rest[..at],
            if rest[at..].starts_with('?') {
                "?***"
            } else {
                "#***"
            },
        ),
        None => (rest, ""),
    };
    match rest.rfind('@') {
        Some(at) => {
            let tail = &rest[at + 1..];
            let tail = if safe_authority(tail) { tail } else { MASK };
            format!("{prefix}{MASK}@{tail}{query}")
        }
        None if safe_authority(rest) => format!("{prefix}{rest}{query}"),
        None => format!("{prefix}{MASK}"),
    }
}

/// Whether `text` is a list of hosts, each with at most a numeric port, then at most a path
/// without a `:`: nothing in it could be a password.
fn safe_authority(text: &str) -> bool {
    let (authority, path) = text.split_once('/').unwrap_or((text, ""));
    !path.contains(':')
        && authority.split(',').all(|host| {
            let host = host.trim();
            let port = match host.strip_prefix('[') {
                // `[v6]` or `[v6]:port`
                Some(v6) => match v6.split_once(']') {
                    Some((_, "")) => Some(""),
                    Some((_, after)) => after.strip_prefix(':'),
                    None => None,
                },
                None => Some(host.split_once(':').map_or("", |(_, port)| port)),
            };
            port.is_some_and(|p| p.chars().all(|c| c.is_ascii_digit()))
        })
}

/// A connection URL that may carry credentials (`redis://user:password@host:6379`).
///
/// `Debug` and `Display` show it with every password masked ([`redact_url`]); with the
/// `serde` feature it is read from a string and written in that masked form, so an "effective
/// configuration" written at start-up carries no password. Only
/// [`expose_secret`](SecretUrl::expose_secret) gives the URL whole.
///
/// ```
/// use keylatch::SecretUrl;
///
/// let url = SecretUrl::from("redis://app:S3cret@db:6379");
/// assert_eq!(url.to_string(), "redis://app:***@db:6379");
/// assert_eq!(format!("{url:?}"), "SecretUrl(\"redis://app:***@db:6379\")");
/// assert_eq!(url.expose_secret(), "redis://app:S3cret@db:6379");
/// ```
#[derive(Clone)]
pub struct SecretUrl(SecretString);

impl SecretUrl {
    /// Wraps a URL.
    pub fn new(url: impl Into<String>) -> SecretUrl {
        SecretUrl(SecretString::from(url.into()))
    }

    /// The URL whole, credentials included: for connecting, never for messages.
    pub fn expose_secret(&self) -> &str {
        self.0.expose_secret()
    }

    /// The URL with every secret masked (what `Display` shows).
    pub fn redacted(&self) -> String {
        redact_url(self.expose_secret())
    }
}

impl From<String> for SecretUrl {
    fn from(url: String) -> SecretUrl {
        SecretUrl::new(url)
    }
}

impl From<&str> for SecretUrl {
    fn from(url: &str) -> SecretUrl {
        SecretUrl::new(url)
    }
}

impl PartialEq for SecretUrl {
    fn eq(&self, other: &SecretUrl) -> bool {
        self.expose_secret() == other.expose_secret()
    }
}

impl Eq for SecretUrl {}

impl std::fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SecretUrl").field(&self.redacted()).finish()
    }
}

impl std::fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for SecretUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.redacted())
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for SecretUrl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SecretUrl, D::Error> {
        String::deserialize(d).map(SecretUrl::new)
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn no_password_survives() {
        for (url, shown) in [
            (
                "redis://user:hunter2@db:6379/0",
                "redis://user:***@db:6379/0",
            ),
            ("redis://:hunter2@db", "redis://:***@db"),
            ("rediss://user:hunter2@db:6380", "rediss://user:***@db:6380"),
            (
                "redis://db?password=hunter2&protocol=resp3",
                "redis://db?password=***&protocol=resp3",
            ),
            ("redis://db?PASS=hunter2", "redis://db?PASS=***"),
            (
                "redis+unix:///run/redis.sock?pass=hunter2",
                "redis+unix:///run/redis.sock?pass=***",
            ),
            (
                "unix:///run/redis.sock?password=hunter2&db=1",
                "unix:///run/redis.sock?password=***&db=1",
            ),
            ("redis://db:6379", "redis://db:6379"),
            // Not well-formed: masked from the scheme (or the start) to the last `@`.
            (
                "redis:/:hunter2@127.0.0.1:6390",
                "redis:/***@127.0.0.1:6390",
            ),
            ("default:hunter2@127.0.0.1:6390", "***@127.0.0.1:6390"),
            ("REDIS://u:hunter2@db:notaport", "REDIS://***@***"),
            (
                "redis+cluster://u:hun@ter2@n1:7000,n2:7001",
                "redis+cluster://***@n1:7000,n2:7001",
            ),
            (
                "redis+sentinel://s1:26379,[::1]:26380/svc",
                "redis+sentinel://s1:26379,[::1]:26380/svc",
            ),
            ("redis://db:port?password=hunter2", "redis://***"),
            // No `@`, and a `:` not followed by a port: masked.
            ("default:hunter2", "***"),
            // A known scheme's name in the user's place is not a scheme.
            ("zk:hunter2", "***"),
            (
                "zk+tls://app:hunter2@z1:2281,z2:2281/app",
                "zk+tls://***@z1:2281,z2:2281/app",
            ),
            ("redis:hunter2@db", "***@db"),
            ("redis://default:hunter2", "redis://***"),
            ("redis://db:notaport", "redis://***"),
            ("not a url user:hunter2@db", "***@db"),
        ] {
            let redacted = redact_url(url);
            assert_eq!(redacted, shown, "{url}");
            assert!(!redacted.contains("hunter2"));
        }
    }
}
