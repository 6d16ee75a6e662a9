//! Reading a [`Config`] from the environment: [`Config::from_env`] and [`url_from_env`].
//!
//! May import: the parent `config` module, `tls`, `keylatch-core`.

use secrecy::SecretString;

use super::{Config, DEFAULT_URL, ReplicaMode, parse_duration};
use crate::connection::tls::TlsConfig;
use keylatch_core::SecretUrl;

impl Config {
    /// The defaults, with the URL from `KEYLATCH_URL`, else `KEYLATCH_REDIS_URL`, else
    /// `REDIS_URL`, else [`DEFAULT_URL`].
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
            ("KEYLATCH_REPLICAS_AOF", &mut config.replicas_aof),
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
        if let Some(text) = var("KEYLATCH_REPLICAS_MODE") {
            match text.trim().to_ascii_lowercase().replace('_', "-").as_str() {
                "count" => config.replicas_mode = ReplicaMode::Count,
                "all-connected" | "all" => config.replicas_mode = ReplicaMode::AllConnected,
                _ => {
                    config.env_problem =
                        Some(("KEYLATCH_REPLICAS_MODE", "not count or all-connected"));
                }
            }
        }
        if let Some(text) = var("KEYLATCH_KEY_PREFIX") {
            config.key_prefix = text;
        }
        if let Some(text) = var("KEYLATCH_WATCHDOG_BATCH_SIZE") {
            match text.trim().parse() {
                Ok(n) => config.watchdog_batch_size = n,
                Err(_) => {
                    config.env_problem =
                        Some(("KEYLATCH_WATCHDOG_BATCH_SIZE", "not a whole number"));
                }
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
}

/// The URL from `KEYLATCH_URL`, else `KEYLATCH_REDIS_URL`, else `REDIS_URL`, else
/// [`DEFAULT_URL`].
pub fn url_from_env() -> String {
    ["KEYLATCH_URL", "KEYLATCH_REDIS_URL", "REDIS_URL"]
        .iter()
        .filter_map(|var| std::env::var(var).ok())
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_URL.to_owned())
}
