//! How a primitive releases one hold: the trait the guard, the undo and the client's shutdown
//! call.

use std::fmt;

use async_trait::async_trait;

use crate::error::Result;
use crate::owner::OwnerId;

/// How a primitive releases one hold. Implemented by each primitive for its guards.
#[async_trait]
pub trait HoldRelease: Send + Sync + fmt::Debug + 'static {
    /// Releases one hold of `owner`.
    ///
    /// # Errors
    /// [`Error::NotHeld`](crate::Error::NotHeld) when `owner` holds nothing; Redis errors.
    async fn release(&self, owner: OwnerId) -> Result<()>;

    /// Releases the hold of `owner` when it is the last this client has on it (one guard,
    /// count 1). A primitive may send this one together with other callers' calls
    /// (`Config::coalesce` on Redis): the undo that may race it
    /// ([`release_if_count`](HoldRelease::release_if_count) with a count of 1) and the release
    /// can then only ever free this one hold, whichever runs first. By default, as
    /// [`release`](HoldRelease::release).
    ///
    /// # Errors
    /// As [`release`](HoldRelease::release).
    async fn release_last(&self, owner: OwnerId) -> Result<()> {
        self.release(owner).await
    }

    /// Releases one hold of `owner` only if its hold count on the server is `expected`: the
    /// undo of a request whose outcome is unknown (a reply lost, a future dropped in flight).
    /// Whether or not that request ran, the server ends up as if it had not.
    ///
    /// # Errors
    /// Redis errors.
    async fn release_if_count(&self, owner: OwnerId, expected: u64) -> Result<()>;
}
