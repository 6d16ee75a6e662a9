//! Secrets kept out of messages: a Redis URL as it may be shown in an error, a log line or
//! `Debug` output.

/// Query parameters that carry a password (compared without case).
const SECRET_PARAMS: [&str; 2] = ["password", "pass"];

/// `url` with every password masked as `***`: the userinfo's password (`redis://user:pw@h`),
/// and `?password=` / `?pass=` query parameters, for every scheme (`redis`, `rediss`,
/// `redis+unix`, `unix`, …). A URL that does not parse is shown as its scheme and `***` when
/// it has anything a secret could hide in (`@` or `?`): when in doubt, mask.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("***"));
            }
            let secret = |key: &str| SECRET_PARAMS.iter().any(|p| key.eq_ignore_ascii_case(p));
            if parsed.query_pairs().any(|(k, _)| secret(&k)) {
                let pairs: Vec<(String, String)> = parsed
                    .query_pairs()
                    .map(|(k, v)| {
                        let v = if secret(&k) {
                            "***".to_owned()
                        } else {
                            v.into_owned()
                        };
                        (k.into_owned(), v)
                    })
                    .collect();
                parsed.query_pairs_mut().clear().extend_pairs(pairs);
            }
            parsed.to_string()
        }
        Err(_) => {
            let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
            if rest.contains(['@', '?']) || scheme.is_empty() && url.contains(['@', '?']) {
                format!("{scheme}://***")
            } else {
                url.to_owned()
            }
        }
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
        ] {
            let redacted = redact_url(url);
            assert_eq!(redacted, shown, "{url}");
            assert!(!redacted.contains("hunter2"));
        }
        // Malformed: masked after the scheme.
        for url in [
            "redis://user:hunter2@db:notaport",
            "redis://user:hunter2@[::1",
            "not a url user:hunter2@db",
            "redis://db:port?password=hunter2",
        ] {
            let redacted = redact_url(url);
            assert!(!redacted.contains("hunter2"), "{url} -> {redacted}");
        }
        assert_eq!(redact_url("redis://db:notaport"), "redis://db:notaport");
    }
}
