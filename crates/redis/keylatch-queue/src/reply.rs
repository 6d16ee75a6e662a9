//! The queue's counts, reliable takes' options, and reading numbers from script replies. Imports nothing of this crate.

use std::time::Duration;

use keylatch_redis::redis::Value;

/// A queue's counts at one instant of the server's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueCounts {
    /// Elements still delayed (in the delay zset), due or not.
    pub delayed: u64,
    /// Of those, the ones due by now (a take moves them).
    pub due: u64,
    /// Elements ready in the destination list.
    pub ready: u64,
    /// How long ago the oldest due element still delayed became due.
    pub oldest_overdue: Option<Duration>,
    /// Elements taken by [`take_reliably`](crate::DelayedQueue::take_reliably) and not yet
    /// acknowledged.
    pub processing: u64,
    /// Elements whose delivery was not acknowledged in time, waiting for the next one.
    pub retrying: u64,
    /// Elements in the dead-letter list.
    pub dead: u64,
}

impl QueueCounts {
    /// Every element still to be taken: delayed, ready, or waiting for another delivery.
    pub fn total(&self) -> u64 {
        self.delayed + self.ready + self.retrying
    }
}

/// What one [`transfer`](crate::DelayedQueue::transfer) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transfer {
    /// Elements moved to the destination list.
    pub moved: u64,
    /// When the next delayed element is due, by the server's clock.
    pub next_due: Option<std::time::SystemTime>,
    /// How long until then, by the server's clock (what a transfer agent sleeps, whatever
    /// this machine's clock says).
    pub next_in: Option<Duration>,
}

/// The visibility timeout and the most deliveries of reliable takes, set on a queue handle by
/// [`DelayedQueue::with_visibility_timeout`](crate::DelayedQueue::with_visibility_timeout) and [`DelayedQueue::with_max_deliveries`](crate::DelayedQueue::with_max_deliveries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReliableOptions {
    pub(crate) visibility: Duration,
    pub(crate) max_deliveries: u32,
}

impl Default for ReliableOptions {
    /// 30 s, 5 deliveries.
    fn default() -> Self {
        ReliableOptions {
            visibility: Duration::from_secs(30),
            max_deliveries: 5,
        }
    }
}

pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// An integer reply, or a decimal one in a bulk string.
pub(crate) fn as_u64(value: &Value) -> Option<u64> {
    match value {
        Value::Int(n) => u64::try_from(*n).ok(),
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        Value::SimpleString(text) => text.parse().ok(),
        _ => None,
    }
}
