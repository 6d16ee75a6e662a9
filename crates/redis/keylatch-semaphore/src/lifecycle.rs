//! The semaphores' object lifecycle, as Redisson's `RObject` and `RExpirable` give it: whether
//! one exists, deleting it, its time to live; and the plain semaphore's `release_if_exists`.
//!
//! May import: the semaphores (`semaphore.rs`, `expirable.rs`), `counts.rs`, the Redis layer's
//! object functions.

use std::time::Duration;

use keylatch_core::Result;
use keylatch_redis::object;
use keylatch_redis::redis::Value;

use crate::counts::{MAX_PERMITS, check_permits, refused};
use crate::expirable::PermitExpirableSemaphore;
use crate::scripts::ADD;
use crate::semaphore::Semaphore;
use crate::semaphore_shared::unexpected;

impl Semaphore {
    /// Gives back `permits` permits only if the semaphore exists (Redisson's
    /// `releaseIfExists`): `false`, and nothing written, when its count is gone (deleted, or
    /// expired after [`try_set_permits_with_ttl`](Semaphore::try_set_permits_with_ttl)), so a
    /// late release does not bring a deleted semaphore back with the permits it returns.
    /// [`release`](Semaphore::release) and a permit guard's release would.
    ///
    /// Retried like [`release`](Semaphore::release) after a lost reply, and applied at most
    /// once; a retry finds the count again if someone set it meanwhile.
    ///
    /// # Errors
    /// As [`release`](Semaphore::release).
    ///
    /// # Cancel safety
    /// As [`release`](Semaphore::release).
    ///
    /// ```no_run
    /// # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
    /// let slots = client.semaphore("slots");
    /// if !slots.release_if_exists(1).await? {
    ///     println!("the semaphore was deleted meanwhile; nothing to give back");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release_if_exists(&self, permits: u32) -> Result<bool> {
        self.shared.client.validate_name(self.name())?;
        check_permits(u64::from(permits))?;
        let requests = &self.shared.requests;
        let call = ADD
            .call()
            .key(self.name())
            .key(self.channel())
            .arg(i64::from(permits))
            .arg(requests.release_window_ms())
            .arg(MAX_PERMITS)
            .arg("1");
        match requests.release_marked(call, u64::from(permits)).await? {
            Value::Int(1) => Ok(true),
            Value::Int(0) => Ok(false),
            Value::Int(code @ (-1 | -2)) => Err(refused(code)),
            _ => Err(unexpected("semaphore_add")),
        }
    }

    /// Whether the semaphore exists: its count is set (possibly to 0).
    ///
    /// # Errors
    /// [`Error::InvalidName`](keylatch_core::Error::InvalidName), Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn exists(&self) -> Result<bool> {
        self.shared.client.validate_name(self.name())?;
        object::exists(&self.shared.client, self.name()).await
    }

    /// Deletes the semaphore (its count); `true` when it existed. Waiters keep waiting until
    /// someone sets the count again; permits out are given back on top of nothing when
    /// released (use [`release_if_exists`](Semaphore::release_if_exists) to not).
    ///
    /// # Errors
    /// [`Error::InvalidName`](keylatch_core::Error::InvalidName), Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have deleted it; deleting again is harmless.
    pub async fn delete(&self) -> Result<bool> {
        self.shared.client.validate_name(self.name())?;
        object::delete(&self.shared.client, &[self.name()]).await
    }

    /// Makes the count expire after `time_to_live`; `false` when the semaphore does not exist.
    ///
    /// # Errors
    /// [`Error::InvalidName`](keylatch_core::Error::InvalidName),
    /// [`Error::InvalidLease`](keylatch_core::Error::InvalidLease) for under 1 ms or over
    /// [`MAX_LEASE`](keylatch_core::MAX_LEASE), Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have set it; setting it again is harmless.
    pub async fn expire(&self, time_to_live: Duration) -> Result<bool> {
        self.shared.client.validate_name(self.name())?;
        object::expire(&self.shared.client, &[self.name()], time_to_live).await
    }

    /// Removes the count's time to live; `true` when it had one.
    ///
    /// # Errors
    /// [`Error::InvalidName`](keylatch_core::Error::InvalidName), Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have cleared it; clearing again is harmless.
    pub async fn clear_expire(&self) -> Result<bool> {
        self.shared.client.validate_name(self.name())?;
        object::clear_expire(&self.shared.client, &[self.name()]).await
    }
}

impl PermitExpirableSemaphore {
    /// Whether the semaphore exists: its available count is set (possibly to 0).
    ///
    /// # Errors
    /// [`Error::InvalidName`](keylatch_core::Error::InvalidName), Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn exists(&self) -> Result<bool> {
        self.shared.client.validate_name(self.name())?;
        object::exists(&self.shared.client, self.name()).await
    }

    /// Deletes the semaphore: its available count and its permits' leases (Redisson deletes
    /// the same two keys); `true` when either existed. Permits out are then unknown: their
    /// guards' releases report [`Error::UnknownPermit`](keylatch_core::Error::UnknownPermit)
    /// and give nothing back.
    ///
    /// # Errors
    /// [`Error::InvalidName`](keylatch_core::Error::InvalidName), Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have deleted it; deleting again is harmless.
    pub async fn delete(&self) -> Result<bool> {
        self.shared.client.validate_name(self.name())?;
        object::delete(
            &self.shared.client,
            &[self.name(), self.timeout_key(), self.total_key()],
        )
        .await
    }

    /// Makes the available count and the permits' leases expire after `time_to_live`;
    /// `false` when the semaphore does not exist.
    ///
    /// # Errors
    /// [`Error::InvalidName`](keylatch_core::Error::InvalidName),
    /// [`Error::InvalidLease`](keylatch_core::Error::InvalidLease) for under 1 ms or over
    /// [`MAX_LEASE`](keylatch_core::MAX_LEASE), Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have set it; setting it again is harmless.
    pub async fn expire(&self, time_to_live: Duration) -> Result<bool> {
        self.shared.client.validate_name(self.name())?;
        object::expire(
            &self.shared.client,
            &[self.name(), self.timeout_key()],
            time_to_live,
        )
        .await
    }

    /// Removes the time to live of the available count and the permits' leases; `true` when
    /// either had one.
    ///
    /// # Errors
    /// [`Error::InvalidName`](keylatch_core::Error::InvalidName), Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have cleared it; clearing again is harmless.
    pub async fn clear_expire(&self) -> Result<bool> {
        self.shared.client.validate_name(self.name())?;
        object::clear_expire(&self.shared.client, &[self.name(), self.timeout_key()]).await
    }
}
