//! How a primitive releases one hold: the trait the guard, the undo and the client's shutdown
//! call; and the releases under way that the shutdown reports when it cannot finish them.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::error::{Result, UnfinishedRelease};
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

/// The releases under way of one client, for its shutdown to report what it could not finish.
#[derive(Debug, Default)]
pub(crate) struct PendingReleases {
    next: AtomicU64,
    entries: Mutex<HashMap<u64, (Arc<str>, u64)>>,
}

impl PendingReleases {
    pub(crate) fn track(self: &Arc<Self>, name: &Arc<str>, permits: u64) -> ReleaseTicket {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, (name.clone(), permits));
        ReleaseTicket {
            registry: self.clone(),
            id,
        }
    }

    /// The releases under way now, sorted.
    pub(crate) fn snapshot(&self) -> Vec<UnfinishedRelease> {
        let mut releases: Vec<UnfinishedRelease> = self
            .lock()
            .values()
            .map(|(name, permits)| UnfinishedRelease {
                name: name.to_string(),
                permits: *permits,
            })
            .collect();
        releases.sort();
        releases
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (Arc<str>, u64)>> {
        // A panic elsewhere cannot leave the map half-updated (each change is one call).
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A release under way, listed by the client's shutdown until this is dropped (see
/// [`Background::track_release`](crate::Background::track_release)).
#[doc(hidden)]
#[derive(Debug)]
pub struct ReleaseTicket {
    registry: Arc<PendingReleases>,
    id: u64,
}

impl Drop for ReleaseTicket {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::list;

    #[test]
    fn releases_are_listed_until_their_ticket_drops() {
        let pending = Arc::new(PendingReleases::default());
        let b: Arc<str> = Arc::from("b");
        let a: Arc<str> = Arc::from("a");
        let first = pending.track(&b, 2);
        let second = pending.track(&a, 1);
        let third = pending.track(&a, 3);
        let listed = pending.snapshot();
        assert_eq!(
            list(&listed),
            "1 permit(s) of 'a', 3 permit(s) of 'a', 2 permit(s) of 'b'"
        );
        drop(second);
        drop(first);
        assert_eq!(list(&pending.snapshot()), "3 permit(s) of 'a'");
        drop(third);
        assert!(pending.snapshot().is_empty());
    }
}
