//! `QueuedWaiter`: one entry of a fair lock's queue, for inspection.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keylatch_core::{Error, Result};
use keylatch_redis::redis::Value;

/// One waiter in a fair lock's queue, as [`FairLock::queue`](crate::FairLock::queue) reads it.
///
/// The deadline is the server's clock: a live waiter keeps moving it forward (its client
/// refreshes it every third of the waiter timeout); once it passes, the waiter counts as dead
/// and the next script run on the lock evicts it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueuedWaiter {
    /// The waiter id: the owner id it waits for, `<client-uuid>:<owner-number>` (a Redisson
    /// waiter shows its `<client-uuid>:<thread-id>`).
    pub id: String,
    /// When the waiter is evicted unless it is refreshed first, on the server's clock (for a
    /// Redisson waiter: its score in Redisson's zset, which Redisson judges at the head by its
    /// own clock).
    pub deadline: SystemTime,
    /// How long until then, from the server's clock when the queue was read; zero for a
    /// waiter already past its deadline (dead, not evicted yet).
    pub expires_in: Duration,
}

/// Parses the reply of `queue.lua`: `{now, id, deadline, id, deadline, …}`.
pub(crate) fn parse_queue(reply: Value) -> Result<Vec<QueuedWaiter>> {
    let unexpected = || Error::UnexpectedReply { what: "fair_queue" };
    let Value::Array(items) = reply else {
        return Err(unexpected());
    };
    let mut items = items.into_iter();
    let now = match items.next() {
        Some(Value::Int(now)) => u64::try_from(now).map_err(|_| unexpected())?,
        _ => return Err(unexpected()),
    };
    let mut waiters = Vec::with_capacity(items.len() / 2);
    while let Some(id) = items.next() {
        let id = text(id).ok_or_else(unexpected)?;
        let deadline = items.next().and_then(text).ok_or_else(unexpected)?;
        // A deadline is a whole number of ms; '-1' means none (treated as already passed).
        let deadline = deadline
            .parse::<f64>()
            .ok()
            .filter(|d| *d >= 0.0)
            .map_or(now, |d| d as u64);
        waiters.push(QueuedWaiter {
            id,
            deadline: UNIX_EPOCH + Duration::from_millis(deadline),
            expires_in: Duration::from_millis(deadline.saturating_sub(now)),
        });
    }
    Ok(waiters)
}

fn text(value: Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes).ok(),
        Value::SimpleString(s) => Some(s),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn parses_ids_and_deadlines_in_order() {
        let reply = Value::Array(vec![
            Value::Int(10_000),
            bulk("a:1"),
            bulk("15000"),
            bulk("b:2"),
            bulk("-1"),
        ]);
        let waiters = parse_queue(reply).unwrap();
        assert_eq!(waiters.len(), 2);
        assert_eq!(waiters[0].id, "a:1");
        assert_eq!(waiters[0].expires_in, Duration::from_secs(5));
        assert_eq!(waiters[0].deadline, UNIX_EPOCH + Duration::from_secs(15));
        assert_eq!(waiters[1].id, "b:2");
        assert_eq!(waiters[1].expires_in, Duration::ZERO);
        assert!(parse_queue(Value::Nil).is_err());
        assert!(parse_queue(Value::Array(vec![Value::Int(1), bulk("odd")])).is_err());
    }
}
