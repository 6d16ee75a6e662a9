//! Checking a [`Config`]: [`Config::validate`], one typed error naming the first bad field.
//!
//! May import: the parent `config` module, `keylatch-core`.

use std::time::Duration;

use super::{Config, ReplicaMode};
use keylatch_core::{Error, Result};

impl Config {
    /// Checks every field.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first bad field.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason| Err(Error::InvalidConfig { field, reason });
        if self.url.expose_secret().trim().is_empty() {
            return bad("url", "the url is empty");
        }
        if self.watchdog_timeout < Duration::from_millis(30) {
            return bad("watchdog_timeout", "must be at least 30ms");
        }
        if keylatch_core::names::validate_lease(self.watchdog_timeout).is_err() {
            return bad("watchdog_timeout", "must be at most 30 days");
        }
        if self.connections == 0 || self.connections > 64 {
            return bad("connections", "must be between 1 and 64");
        }
        let max = keylatch_core::MAX_LEASE;
        if self.connect_timeout.is_zero() || self.connect_timeout > max {
            return bad("connect_timeout", "must be positive and at most 30 days");
        }
        if self.response_timeout.is_zero() || self.response_timeout > max {
            return bad("response_timeout", "must be positive and at most 30 days");
        }
        if self.fallback_poll < Duration::from_millis(10) || self.fallback_poll > max {
            return bad("fallback_poll", "must be between 10ms and 30 days");
        }
        self.hold_settings().validate()?;
        if self.subscription_linger > Duration::from_secs(60) {
            return bad("subscription_linger", "must be at most 60s");
        }
        if let Some((field, reason)) = self.env_problem {
            return bad(field, reason);
        }
        if self.pubsub_patterns > 64 {
            return bad("pubsub_patterns", "must be at most 64");
        }
        if self.replicas > 64 {
            return bad("replicas", "must be at most 64");
        }
        if self.replicas_timeout < Duration::from_millis(1) {
            return bad("replicas_timeout", "must be at least 1ms");
        }
        if self.replicas_mode == ReplicaMode::AllConnected && self.replicas > 0 {
            return bad(
                "replicas",
                "must be 0 with replicas_mode all-connected (the primary says how many)",
            );
        }
        if self.key_prefix.len() > 64 {
            return bad("key_prefix", "must be at most 64 bytes");
        }
        if self
            .key_prefix
            .chars()
            .any(|c| c == '{' || c == '}' || c.is_control())
        {
            return bad(
                "key_prefix",
                "must not contain `{`, `}` (a cluster hash tag) or a control character",
            );
        }
        if self.watchdog_batch_size == 0 || self.watchdog_batch_size > 1000 {
            return bad("watchdog_batch_size", "must be between 1 and 1000");
        }
        if self.acknowledgement().is_some() && self.replicas_timeout >= self.response_timeout {
            return bad(
                "replicas_timeout",
                "must be less than response_timeout (the acquisition's reply waits for it)",
            );
        }
        Ok(())
    }
}
