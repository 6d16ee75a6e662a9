//! Hand-over by owner id on the fair lock (Redisson's `RedissonFairLock.unlockAsync(threadId)`):
//! a process that was given an owner id adopts that owner's hold with a guard of its own
//! ([`FairLock::adopt`]), or releases it without a guard ([`FairLock::unlock_as`]). Both
//! release through the fair release, so the queue keeps its order.
//!
//! May import `keylatch-core`, `keylatch-redis` and `lock.rs`.

use keylatch_core::hold::Extension;
use keylatch_core::{HoldKey, HoldRelease, LockGuard, OwnerId, Result};
use keylatch_redis::{RENEW_HASH_HOLDS, extend_hash_hold};
use tokio::time::Instant;

use crate::lock::FairLock;

impl FairLock {
    /// Takes over the hold of `owner` (an owner id from any process, such as a scheduler that
    /// acquired the lock for this one): returns a guard that renews it with this client's
    /// watchdog, reports its loss and releases it, as if this client had acquired it; `None`
    /// when `owner` does not hold the lock (nothing is written then). The hold's lease is set
    /// to this client's watchdog timeout at once. The queue is not touched: the guard's release
    /// hands the lock to the head of the queue, as any fair release does.
    ///
    /// The guard releases one hold of `owner` (the hold count the acquirer left goes down by
    /// one). So that one holder remains, the side handing over stops caring for the hold
    /// first: it calls [`LockGuard::forget`] (no release, no more renewals) and passes the
    /// owner id along, with the fencing token if the lock is fenced: the adopting guard's
    /// [`fencing_token`](LockGuard::fencing_token) is `None`, since the token belongs to the
    /// acquisition, not to the hold. The same holds for a
    /// [`non_reentrant`](FairLock::non_reentrant) handle.
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
    /// let lock = client.fair_lock("invoice-export");
    /// match lock.adopt(owner).await? {
    ///     Some(guard) => {
    ///         // … the work, renewed by this process's watchdog …
    ///         guard.unlock().await?; // the first waiter in the queue is next
    ///     }
    ///     None => println!("the hold was gone before it could be taken over"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn adopt(&self, owner: OwnerId) -> Result<Option<LockGuard>> {
        self.client.validate_name(&self.keys.name)?;
        let lease = self.client.config().watchdog_timeout;
        let sent_at = Instant::now();
        // The lease set again only if the hold is still `owner`'s: what an extension does.
        let held =
            extend_hash_hold(&self.client, &self.keys.name, owner, Extension::To(lease)).await?;
        if held.is_none() {
            return Ok(None);
        }
        // The fair lock's watchdog renewal (`FairRelease::watchdog_renewal`): the hash's.
        let hold = self.client.watchdog().register(
            HoldKey::new(&self.keys.name, owner),
            lease,
            RENEW_HASH_HOLDS.renewal(),
            sent_at,
        );
        Ok(Some(self.hold_guard(owner, hold, None)))
    }

    /// Releases one hold of `owner` without its guard (Redisson's
    /// `RedissonFairLock.unlockAsync(threadId)`): for a process that was given the owner id, or
    /// an owner whose guard was forgotten. The release is the fair lock's: when it frees the
    /// lock, the head of the queue gets it (or is woken). A guard of `owner` still alive
    /// elsewhere then finds the hold gone (its `unlock` reports
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
        self.client.validate_name(&self.keys.name)?;
        self.release.release(owner).await
    }
}
