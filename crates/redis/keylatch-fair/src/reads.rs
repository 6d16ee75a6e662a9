//! Reads of a fair lock's state that take nothing: who holds it ([`FairLock::is_held_by`])
//! and the last fencing token issued ([`FairLock::token`]).
//!
//! May import `keylatch-core`, `keylatch-redis`, `lock.rs` and `keys.rs`.

use keylatch_core::{Error, OwnerId, Result};
use keylatch_redis::redis;

use crate::lock::FairLock;

impl FairLock {
    /// Whether `owner` holds the lock: any owner id, this client's or another's (a guard's
    /// [`owner_id`](keylatch_core::LockGuard::owner_id), from any process). A queued waiter
    /// does not hold it.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn is_held_by(&self, owner: OwnerId) -> Result<bool> {
        self.client.validate_name(&self.keys.name)?;
        let exists: i64 = self
            .client
            .query(
                redis::cmd("HEXISTS")
                    .arg(self.name())
                    .arg(owner.wire_form().as_str()),
                self.name(),
            )
            .await?;
        Ok(exists == 1)
    }

    /// The last fencing token issued for this name (Redisson's `RFencedLock.getToken`; the
    /// counter is the reentrant lock's, `redisson_lock_token:{name}`), without acquiring;
    /// `None` when none was ever issued. A token read after a guard's is never below it.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`] (the counter key holds something else),
    /// Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn token(&self) -> Result<Option<u64>> {
        self.client.validate_name(&self.keys.name)?;
        let key = self.keys.token.as_str();
        let value: Option<String> = self.client.query(redis::cmd("GET").arg(key), key).await?;
        match value {
            None => Ok(None),
            Some(text) => text.parse().map(Some).map_err(|_| Error::WrongType {
                key: key.to_string(),
            }),
        }
    }
}
