//! The settings every store shares: how long a client waits for a release, retries one whose
//! reply was lost, and lets its shutdown take ([`HoldSettings`]). A store's configuration
//! holds them beside its own settings and hands them to [`Background::new`](crate::Background::new).
//!
//! May import: the crate's error module.

use std::time::Duration;

use crate::error::{Error, Result};

/// The longest any of these settings may be: 30 days, as a lease.
const MAX: Duration = Duration::from_secs(30 * 24 * 3600);

/// How a client of any store ends its holds.
///
/// ```
/// use std::time::Duration;
/// let settings = keylatch_core::HoldSettings::default()
///     .with_release_timeout(Duration::from_secs(2));
/// assert!(settings.validate().is_ok());
/// assert!(settings.with_shutdown_timeout(Duration::ZERO).validate().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HoldSettings {
    release_timeout: Duration,
    settle_window: Duration,
    shutdown_timeout: Duration,
}

impl Default for HoldSettings {
    /// A release waits 5 s, one whose reply was lost is retried for 30 s, a shutdown takes at
    /// most 10 s.
    fn default() -> Self {
        HoldSettings {
            release_timeout: Duration::from_secs(5),
            settle_window: Duration::from_secs(30),
            shutdown_timeout: Duration::from_secs(10),
        }
    }
}

impl HoldSettings {
    /// How long an `unlock` waits for the store; after it, the call returns
    /// [`Error::Timeout`] and the release goes on in the background.
    pub fn release_timeout(&self) -> Duration {
        self.release_timeout
    }

    /// How long a release or an undo whose reply was lost is retried.
    pub fn settle_window(&self) -> Duration {
        self.settle_window
    }

    /// How long a client's shutdown waits for its releases.
    pub fn shutdown_timeout(&self) -> Duration {
        self.shutdown_timeout
    }

    /// With another release timeout.
    #[must_use]
    pub fn with_release_timeout(mut self, timeout: Duration) -> Self {
        self.release_timeout = timeout;
        self
    }

    /// With another settle window.
    #[must_use]
    pub fn with_settle_window(mut self, window: Duration) -> Self {
        self.settle_window = window;
        self
    }

    /// With another shutdown timeout.
    #[must_use]
    pub fn with_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Checks the settings: the timeouts positive, all at most 30 days.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the setting.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason| Err(Error::InvalidConfig { field, reason });
        if self.release_timeout.is_zero() || self.release_timeout > MAX {
            return bad("release_timeout", "must be positive and at most 30 days");
        }
        if self.settle_window > MAX {
            return bad("settle_window", "must be at most 30 days");
        }
        if self.shutdown_timeout.is_zero() || self.shutdown_timeout > MAX {
            return bad("shutdown_timeout", "must be positive and at most 30 days");
        }
        Ok(())
    }
}
