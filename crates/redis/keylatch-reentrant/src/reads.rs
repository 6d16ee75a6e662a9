//! Reads of a reentrant lock's state that take nothing: who holds it ([`ReentrantLock::is_held_by`])
//! and the last fencing token issued ([`ReentrantLock::token`]).
//!
//! May import `keylatch-core`, `keylatch-redis` and `lock.rs`.

use keylatch_core::{Error, OwnerId, Result};
use keylatch_redis::redis;

use crate::lock::ReentrantLock;

impl ReentrantLock {
    /// Whether `owner` holds the lock: any owner id, this client's or another's (a guard's
    /// [`owner_id`](keylatch_core::LockGuard::owner_id), from any process).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn is_held_by(&self, owner: OwnerId) -> Result<bool> {
        self.client.validate_name(&self.name)?;
        held_by(&self.client, &self.name, owner).await
    }

    /// The last fencing token issued for this name (Redisson's `RFencedLock.getToken`), without
    /// acquiring; `None` when none was ever issued. A token read after a guard's is never
    /// below that guard's token.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`] (the counter key holds something else),
    /// Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn token(&self) -> Result<Option<u64>> {
        self.client.validate_name(&self.name)?;
        last_token(&self.client, &self.release.token_key).await
    }
}

/// Whether the hash `name` has the field `owner`.
pub(crate) async fn held_by(
    client: &keylatch_redis::Client,
    name: &str,
    owner: OwnerId,
) -> Result<bool> {
    let exists: i64 = client
        .query(
            redis::cmd("HEXISTS")
                .arg(name)
                .arg(owner.wire_form().as_str()),
            name,
        )
        .await?;
    Ok(exists == 1)
}

/// The value of the fencing counter `key`, `None` when absent.
async fn last_token(client: &keylatch_redis::Client, key: &str) -> Result<Option<u64>> {
    let value: Option<String> = client.query(redis::cmd("GET").arg(key), key).await?;
    match value {
        None => Ok(None),
        Some(text) => text.parse().map(Some).map_err(|_| Error::WrongType {
            key: key.to_string(),
        }),
    }
}
