//! Changing a held lease through its guard: [`LockGuard::extend`], [`LockGuard::set_lease`]
//! and [`LockGuard::watchdog`], through the primitive's [`HoldExtend`](crate::hold::HoldExtend).
//!
//! May import: `guard.rs`, `extend.rs`, `key.rs`, `reason.rs`, `renew.rs`.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::Result;
use crate::hold::extend::Extension;
use crate::hold::guard::LockGuard;
use crate::hold::reason::LossReason;
use crate::hold::renew::Renewal;

impl LockGuard {
    /// Adds `by` to what is left of the hold's lease on the server (a fixed lease; a hold in
    /// watchdog mode gets the watchdog's lease back at its next renewal), in one call that
    /// first checks the hold is still this owner's. The guard's
    /// [`valid_until`](LockGuard::valid_until) moves with it.
    ///
    /// # Errors
    /// [`NotHeld`](crate::Error::NotHeld) when the hold is gone (the guard then reports lost,
    /// [`LossReason::Gone`]); [`InvalidLease`](crate::Error::InvalidLease);
    /// [`Unsupported`](crate::Error::Unsupported) when the primitive cannot extend; store
    /// errors.
    ///
    /// # Cancel safety
    /// Dropped in flight, the extension may or may not have happened; the guard's local
    /// deadline is then left as it was (which never outlasts the server's).
    pub async fn extend(&self, by: Duration) -> Result<()> {
        self.change(Extension::By(by)).await.map(|_| ())
    }

    /// Sets what is left of the hold's lease on the server to `lease`, shorter or longer, and
    /// leaves watchdog mode: the hold then ends when that lease does, unless extended again.
    /// (Another guard of the same owner's hold in watchdog mode keeps it renewed.)
    ///
    /// # Errors
    /// As [`extend`](LockGuard::extend).
    ///
    /// # Cancel safety
    /// As [`extend`](LockGuard::extend); dropped in flight, the guard may have left watchdog
    /// mode already.
    pub async fn set_lease(&mut self, lease: Duration) -> Result<()> {
        // Out of watchdog mode first, so no renewal sent after this call undoes it.
        let until = self.valid_until().unwrap_or_else(Instant::now);
        if let Some(inner) = self.inner.as_mut() {
            inner.hold.set_renewal(Renewal::Lease, lease, until);
        }
        let until = self.change(Extension::To(lease)).await?;
        if let Some(inner) = self.inner.as_mut() {
            inner.hold.set_renewal(Renewal::Lease, lease, until);
        }
        Ok(())
    }

    /// Switches the hold to watchdog mode: its lease is set to the watchdog's (checking it is
    /// still this owner's), and the watchdog renews it from then on, as if acquired without
    /// a lease. [`set_lease`](LockGuard::set_lease) switches back.
    ///
    /// # Errors
    /// As [`extend`](LockGuard::extend); [`Unsupported`](crate::Error::Unsupported) when the
    /// primitive has no watchdog.
    ///
    /// # Cancel safety
    /// Dropped in flight, the guard stays in the mode it had.
    pub async fn watchdog(&mut self) -> Result<()> {
        let Some(inner) = self.inner.as_ref() else {
            return Err(self.not_held());
        };
        let Some((renewal, lease)) = inner.extend.as_ref().and_then(|e| e.watchdog_renewal())
        else {
            return Err(crate::Error::Unsupported {
                primitive: "this primitive",
                operation: "watchdog",
                reason: "it has no watchdog renewal",
            });
        };
        let until = self.change(Extension::To(lease)).await?;
        if let Some(inner) = self.inner.as_mut() {
            inner.hold.set_renewal(renewal, lease, until);
        }
        Ok(())
    }

    /// Sends `how` and moves the local deadline to what the server answered, counted from
    /// when the call was sent; a hold found gone is marked lost.
    async fn change(&self, how: Extension) -> Result<Instant> {
        let Some(inner) = self.inner.as_ref() else {
            return Err(self.not_held());
        };
        let Some(extend) = inner.extend.as_ref() else {
            return Err(crate::Error::Unsupported {
                primitive: "this primitive",
                operation: "extend",
                reason: "its holds' leases cannot be changed",
            });
        };
        if self.is_lost() {
            return Err(self.not_held());
        }
        let sent_at = Instant::now();
        match extend.extend(self.owner, how).await? {
            Some(left) => {
                let until = sent_at + left;
                inner.hold.hold_key().confirmed_until(sent_at, until);
                Ok(until)
            }
            None => {
                inner.hold.hold_key().mark_lost(LossReason::Gone);
                Err(self.not_held())
            }
        }
    }
}
