//! Hand-over by owner id (Redisson's `unlockAsync(threadId)`, redis-semaphore's
//! `acquiredExternally`): a process that was given an owner id adopts that owner's hold with a
//! guard of its own ([`ReentrantLock::adopt`]), or releases it without a guard
//! ([`ReentrantLock::unlock_as`]).
//!
//! May import `keylatch-core`, `keylatch-redis`, `lock.rs` and `scripts.rs`.

use keylatch_core::hold::Extension;
use keylatch_core::{HoldKey, HoldRelease, LockGuard, OwnerId, Result};
use keylatch_redis::extend_hash_hold;
use tokio::time::Instant;

use crate::lock::ReentrantLock;

impl ReentrantLock {
    /// Takes over the hold of `owner` (an owner id from any process, such as a scheduler that
    /// acquired the lock for this one): returns a guard that renews it with this client's
    /// watchdog, reports its loss and releases it, as if this client had acquired it; `None`
    /// when `owner` does not hold the lock. The hold's lease is set to this client's watchdog
    /// timeout at once.
    ///
    /// The guard releases one hold of `owner` (the hold count the acquirer left goes down by
    /// one). So that one holder remains, the side handing over stops caring for the hold
    /// first: it calls [`LockGuard::forget`] (no release, no more renewals) and passes the
    /// owner id along, with the fencing token if the lock is fenced: the adopting guard's
    /// [`fencing_token`](LockGuard::fencing_token) is `None`, since the token belongs to the
    /// acquisition, not to the hold.
    ///
    /// # Errors
    /// [`Error::InvalidName`](keylatch_core::Error::InvalidName),
    /// [`Error::WrongType`](keylatch_core::Error::WrongType), Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future may leave the lease set again and nothing registered: the hold
    /// then ends with that lease, unless adopted again.
    ///
    /// ```no_run
    /// # async fn demo(client: keylatch::Client, owner: keylatch::OwnerId) -> keylatch::Result<()> {
    /// // `owner` came from the process that acquired the lock and called `guard.forget()`.
    /// let lock = client.lock("nightly-report");
    /// match lock.adopt(owner).await? {
    ///     Some(guard) => {
    ///         // … the work, renewed by this process's watchdog …
    ///         guard.unlock().await?;
    ///     }
    ///     None => println!("the hold was gone before it could be taken over"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn adopt(&self, owner: OwnerId) -> Result<Option<LockGuard>> {
        self.client.validate_name(&self.name)?;
        let lease = self.client.config().watchdog_timeout;
        let sent_at = Instant::now();
        // The lease set again only if the hold is still `owner`'s: what an extension does.
        let held = extend_hash_hold(&self.client, &self.name, owner, Extension::To(lease)).await?;
        if held.is_none() {
            return Ok(None);
        }
        let hold_key = HoldKey::new(&self.name, owner);
        let hold = self.client.watchdog().register(
            hold_key,
            lease,
            keylatch_redis::hash_hold_renewal(&self.client),
            sent_at,
        );
        Ok(Some(self.guard(owner, hold, None)))
    }

    /// Releases one hold of `owner` without its guard (Redisson's `unlockAsync(threadId)`):
    /// for a process that was given the owner id, or an owner whose guard was forgotten. A
    /// guard of `owner` still alive elsewhere then finds the hold gone (its `unlock` reports
    /// [`Error::NotHeld`](keylatch_core::Error::NotHeld), its watchdog reports the loss).
    ///
    /// # Errors
    /// [`Error::NotHeld`](keylatch_core::Error::NotHeld) when `owner` does not hold the lock
    /// (nothing changed);
    /// [`Error::InvalidName`](keylatch_core::Error::InvalidName),
    /// [`Error::WrongType`](keylatch_core::Error::WrongType), Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have released the hold.
    pub async fn unlock_as(&self, owner: OwnerId) -> Result<()> {
        self.client.validate_name(&self.name)?;
        self.release.release(owner).await
    }
}
