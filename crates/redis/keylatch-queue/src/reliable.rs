//! The reliable mode of [`DelayedQueue`]: takes that deliver at least once. A reliable take
//! moves its element into keylatch's processing hash, with a visibility deadline; the consumer
//! acknowledges the [`Delivery`] when done. A delivery not acknowledged by its deadline (the
//! consumer died, hung or lost the reply) goes back for another delivery, counted; after the
//! most deliveries it goes to the dead-letter list. Imports `queue`, `reply`, `scripts` and
//! `codec` of this crate.

use std::time::Duration;

use keylatch_core::{Attempt, Error, Result};
use keylatch_redis::redis::Value;
use keylatch_redis::{WakeMode, wait_for};
use tokio::time::Instant;

use crate::codec::Codec;
use crate::queue::{DelayedQueue, MOVE_BATCH};
use crate::reply::{as_u64, millis};

use crate::scripts::{ACK, TAKE_RELIABLY};

/// An element taken by [`DelayedQueue::take_reliably`]: acknowledge it with
/// [`DelayedQueue::ack`] once processed, before its visibility timeout passes, or it is
/// delivered again.
#[derive(Debug)]
#[must_use = "a delivery not acknowledged is delivered again after the visibility timeout"]
pub struct Delivery<T> {
    value: T,
    count: u32,
    field: String,
}

impl<T> Delivery<T> {
    /// The element's value.
    pub fn value(&self) -> &T {
        &self.value
    }

    /// How many times the element has been delivered, this delivery included (1 the first
    /// time).
    pub fn delivery_count(&self) -> u32 {
        self.count
    }

    /// This delivery's id: `<consumer>:<delivery>`, its field in the processing hash.
    pub fn id(&self) -> &str {
        &self.field
    }
}

impl<C: Codec> DelayedQueue<C> {
    /// This handle with reliable takes' visibility timeout set: a delivery not acknowledged
    /// within it goes back to the queue (30 s by default).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a timeout of zero or over [`MAX_DELAY`](crate::MAX_DELAY).
    pub fn with_visibility_timeout(mut self, timeout: Duration) -> Result<Self> {
        if timeout.is_zero() || timeout > crate::MAX_DELAY {
            return Err(Error::InvalidConfig {
                field: "visibility_timeout",
                reason: "must be more than 0 and at most MAX_DELAY",
            });
        }
        self.reliable.visibility = timeout;
        Ok(self)
    }

    /// This handle with reliable takes' most deliveries set: an element delivered that many
    /// times without an acknowledgement goes to the dead-letter list (5 by default).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for 0.
    pub fn with_max_deliveries(mut self, max: u32) -> Result<Self> {
        if max == 0 {
            return Err(Error::InvalidConfig {
                field: "max_deliveries",
                reason: "must be at least 1",
            });
        }
        self.reliable.max_deliveries = max;
        Ok(self)
    }

    /// Takes the next element reliably, waiting as long as it takes for one: it stays in
    /// keylatch's processing hash until [`ack`](DelayedQueue::ack)ed. Elements given back
    /// after a visibility timeout come before the destination list's.
    ///
    /// # Errors
    /// As [`poll`](DelayedQueue::poll); [`Error::Codec`] when the element's bytes are not the
    /// codec's (the element stays in processing and comes back, until it is dead-lettered).
    ///
    /// # Cancel safety
    /// Cancel safe and at least once: a take dropped in flight may have taken an element,
    /// which comes back after the visibility timeout.
    pub async fn take_reliably(&self) -> Result<Delivery<C::Value>> {
        match self.wait_reliably(None).await? {
            Some(delivery) => Ok(delivery),
            None => Err(Error::UnexpectedReply {
                what: "queue_take_reliably",
            }),
        }
    }

    /// As [`take_reliably`](DelayedQueue::take_reliably), waiting at most `timeout` (zero:
    /// only what is there now). `None` when nothing came in time.
    ///
    /// # Errors
    /// As [`take_reliably`](DelayedQueue::take_reliably).
    ///
    /// # Cancel safety
    /// As [`take_reliably`](DelayedQueue::take_reliably).
    pub async fn poll_reliably_for(&self, timeout: Duration) -> Result<Option<Delivery<C::Value>>> {
        self.wait_reliably(Some(Instant::now() + timeout)).await
    }

    async fn wait_reliably(&self, deadline: Option<Instant>) -> Result<Option<Delivery<C::Value>>> {
        self.validate()?;
        let consumer = uuid::Uuid::new_v4().simple().to_string();
        wait_for(
            &self.inner.client,
            "delayed_queue",
            None,
            &self.inner.keys.channel,
            WakeMode::All,
            deadline,
            || self.attempt_reliably(&consumer),
        )
        .await
    }

    async fn attempt_reliably(&self, consumer: &str) -> Result<Attempt<Delivery<C::Value>>> {
        let keys = &self.inner.keys;
        let field = format!("{consumer}:{}", uuid::Uuid::new_v4().simple());
        let call = TAKE_RELIABLY
            .call()
            .key(&keys.destination)
            .key(&keys.timeouts)
            .key(&keys.delayed)
            .key(&keys.unreadable)
            .key(&keys.processing)
            .key(&keys.deadlines)
            .key(&keys.retry)
            .key(&keys.dead)
            .arg(millis(self.reliable.visibility))
            .arg(self.reliable.max_deliveries)
            .arg(MOVE_BATCH)
            .arg(&field);
        let bad = || Error::UnexpectedReply {
            what: "queue_take_reliably",
        };
        let Value::Array(items) = self.inner.client.eval_value(&call).await? else {
            return Err(bad());
        };
        match (items.first().and_then(as_u64), items.get(1), items.get(2)) {
            (Some(1), Some(count), Some(Value::BulkString(bytes))) => {
                let count = as_u64(count).ok_or_else(bad)?;
                Ok(Attempt::Done(Delivery {
                    value: C::decode(bytes.clone())?,
                    count: u32::try_from(count).unwrap_or(u32::MAX),
                    field,
                }))
            }
            (Some(2), Some(due_in), _) => Ok(Attempt::Retry(
                as_u64(due_in).map(|ms| Duration::from_millis(ms.max(1))),
            )),
            (Some(3), _, _) => Ok(Attempt::Retry(None)),
            _ => Err(bad()),
        }
    }

    /// Acknowledges `delivery`: the element is done and leaves the queue. Returns `false` when
    /// the delivery's visibility timeout had passed and it was given back (the element is, or
    /// will be, delivered again: processing must be idempotent).
    ///
    /// # Errors
    /// [`Error::InvalidName`], Redis errors. After an ambiguous error, ack again.
    ///
    /// # Cancel safety
    /// Cancel safe: acknowledging twice is harmless.
    pub async fn ack(&self, delivery: &Delivery<C::Value>) -> Result<bool> {
        self.validate()?;
        let keys = &self.inner.keys;
        let call = ACK
            .call()
            .key(&keys.processing)
            .key(&keys.deadlines)
            .arg(&delivery.field);
        match self.inner.client.eval_value(&call).await? {
            Value::Int(n) => Ok(n > 0),
            _ => Err(Error::UnexpectedReply { what: "queue_ack" }),
        }
    }

    /// The dead-letter list's values, oldest first (at most `limit`), not removed.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::Codec`] for bytes the codec cannot read, Redis errors.
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<C::Value>> {
        self.validate()?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let keys = &self.inner.keys;
        let mut cmd = keylatch_redis::redis::cmd("LRANGE");
        cmd.arg(&keys.dead)
            .arg(0)
            .arg(i64::try_from(limit - 1).unwrap_or(i64::MAX));
        let values: Vec<Vec<u8>> = self.inner.client.query(&cmd, &keys.dead).await?;
        values.into_iter().map(C::decode).collect()
    }
}
