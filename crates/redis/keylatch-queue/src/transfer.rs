//! [`DelayedQueue::transfer`]: one move of due elements, as Redisson's transfer task makes.
//! Imports `queue`, `reply`, `scripts` and `codec` of this crate.

use std::time::{Duration, UNIX_EPOCH};

use keylatch_core::{Error, Result};
use keylatch_redis::redis::Value;

use crate::codec::Codec;
use crate::queue::{DelayedQueue, MOVE_BATCH};
use crate::reply::{Transfer, as_u64};
use crate::scripts::TRANSFER;

impl<C: Codec> DelayedQueue<C> {
    /// This handle with the lean layout for its offers: an element goes into the delay zset
    /// only, not into Redisson's delay list (`redisson_delay_queue:{N}`). Moving a due element
    /// out of the list is an `LREM`, a scan of the whole list; with no list to scan, a move
    /// costs O(log n) however large the backlog (`cargo bench -p keylatch-tests --bench
    /// queue`). Every take, [`transfer`](DelayedQueue::transfer), Redisson's transfer task
    /// and Redisson's consumers of the destination list deliver lean elements as any other;
    /// Redisson's `RDelayedQueue` methods that read the delay list (`poll`, `peek`, `size`,
    /// `readAll`, its iterator) do not see them. Elements offered in Redisson's layout
    /// meanwhile still cost their scan.
    pub fn with_lean_layout(mut self) -> Self {
        self.lean = true;
        self
    }

    /// Moves up to [`MOVE_BATCH`] due elements to the destination list (what Redisson's
    /// transfer task does, with the server's clock), whatever codec wrote them: values move as
    /// bytes. Returns how many moved and when the next delayed element is due.
    ///
    /// # Errors
    /// [`Error::InvalidName`], Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe: the script runs whole or not at all; a dropped call may have moved
    /// elements, which a take delivers as any other.
    pub async fn transfer(&self) -> Result<Transfer> {
        self.validate()?;
        let keys = &self.inner.keys;
        let call = TRANSFER
            .call()
            .key(&keys.destination)
            .key(&keys.timeouts)
            .key(&keys.delayed)
            .key(&keys.unreadable)
            .arg(MOVE_BATCH);
        let bad = || Error::UnexpectedReply {
            what: "queue_transfer",
        };
        let Value::Array(items) = self.inner.client.eval_value(&call).await? else {
            return Err(bad());
        };
        let moved = items.first().and_then(as_u64).ok_or_else(bad)?;
        let at = |i: usize| items.get(i).and_then(as_u64).map(Duration::from_millis);
        Ok(Transfer {
            moved,
            next_due: at(1).map(|ms| UNIX_EPOCH + ms),
            next_in: at(2),
        })
    }
}
