//! How a primitive changes a hold's lease: [`HoldExtend`], the sibling of
//! [`HoldRelease`](crate::HoldRelease) that a guard calls for
//! [`extend`](crate::LockGuard::extend), [`set_lease`](crate::LockGuard::set_lease) and
//! [`watchdog`](crate::LockGuard::watchdog), and [`Extension`].
//!
//! May import: the crate's error and owner modules, and `renew.rs`.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;
use crate::hold::renew::Renewal;
use crate::owner::OwnerId;

/// How [`HoldExtend::extend`] changes a hold's lease on the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Extension {
    /// Adds this much to what is left of the lease.
    By(Duration),
    /// Sets what is left of the lease to this.
    To(Duration),
}

impl Extension {
    /// The duration given.
    pub fn duration(self) -> Duration {
        match self {
            Extension::By(d) | Extension::To(d) => d,
        }
    }
}

/// How a primitive changes the lease of one hold. Implemented by the primitives that can, and
/// given to their guards with [`LockGuard::extendable`](crate::LockGuard::extendable); a guard
/// without it answers [`Error::Unsupported`](crate::Error::Unsupported).
#[async_trait]
pub trait HoldExtend: Send + Sync + fmt::Debug + 'static {
    /// Changes the lease of `owner`'s hold on the server, in one call that first checks that
    /// `owner` still holds it. Returns what is left of the lease afterwards, or `None` when
    /// `owner` no longer holds it (nothing is changed then).
    ///
    /// # Errors
    /// [`Error::InvalidLease`](crate::Error::InvalidLease); store errors.
    async fn extend(&self, owner: OwnerId, how: Extension) -> Result<Option<Duration>>;

    /// How the watchdog renews this primitive's holds, and with what lease: what
    /// [`LockGuard::watchdog`](crate::LockGuard::watchdog) switches a hold to. `None` when
    /// the primitive has no watchdog.
    fn watchdog_renewal(&self) -> Option<(Renewal, Duration)>;
}
