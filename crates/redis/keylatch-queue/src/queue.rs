//! `DelayedQueue`: the handle, its calls and its wait. Imports `codec`, `keys`, `claim`,
//! `reply` and `scripts` of this crate, `keylatch-core` and `keylatch-redis`.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keylatch_core::{Attempt, Error, Result};
use keylatch_redis::redis::Value;
use keylatch_redis::{Client, WakeMode, wait_for};
use tokio::time::Instant;

use crate::claim::ClaimUndo;
use crate::codec::{Bytes, Codec};
use crate::keys::Keys;
use crate::reply::{QueueCounts, ReliableOptions, as_u64, millis};
use crate::scripts::{CONTAINS, COUNTS, OFFER, PEEK, POLL, REMOVE};

/// The most due elements one call moves to the destination list (Redisson's transfer moves
/// 100 per call too); a take that finds more due moves the rest on its next calls.
pub const MOVE_BATCH: u32 = 100;

/// The longest delay an offer takes: about 292 million years in milliseconds would overflow
/// Redis's scores long before; keylatch keeps due times below 2^53 ms, where a score is exact.
pub const MAX_DELAY: Duration = Duration::from_millis((1 << 53) - 1);

/// How many claims of seen takes a call deletes at most (the rest expire by themselves).
const SEEN_PER_CALL: usize = 16;

/// A delayed queue in the layout of Redisson's `RDelayedQueue` bound to the blocking queue of
/// the same name: producers [`offer`](DelayedQueue::offer) values with a delay, consumers
/// [`take`](DelayedQueue::take) each value once its delay has passed, in due order.
///
/// - **No transfer task.** A take moves what is due to the destination list and pops from it
///   in one script, with the server's clock (`TIME`): elements are delivered on time whether
///   or not any transfer task (Redisson's, or `keylatch queue transfer`) is alive.
/// - **Redisson reads it, and it reads Redisson.** An offer has the effects of Redisson's
///   (`ZADD` to `redisson_delay_queue_timeout:{N}`, `RPUSH` to `redisson_delay_queue:{N}`, the
///   due time published on `redisson_delay_queue_channel:{N}` when it is the new head), with
///   Redisson's element packing; a take reads Redisson's current packing and the one before
///   3.21.1. Elements that a Redisson transfer task moved to the destination list `N` are taken
///   too. Values go through a [`Codec`] that writes what Redisson's codec of the same name
///   writes.
/// - **Due times.** [`offer`](DelayedQueue::offer) counts the delay from the server's clock;
///   [`offer_at`](DelayedQueue::offer_at) takes an instant from this machine's clock (the
///   server compares it with its own: a clock ahead of the server's delivers late by the
///   difference, one behind delivers early). Redisson's own offers use the offering JVM's
///   clock.
/// - **Cancel safe, nothing lost while the client lives.** A take whose reply is lost or
///   whose future is dropped in flight is undone: the element goes back to the head of the
///   queue (a claim key holds a copy for the request window, `Config::settle_window`). A
///   value whose stored bytes the codec cannot read is not lost either: it goes to
///   `keylatch_queue:{N}:unreadable` and the take reports [`Error::Codec`].
///
/// ```no_run
/// # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
/// use std::time::Duration;
/// use keylatch::queue::Utf8;
///
/// let reminders = client.delayed_queue::<Utf8>("reminders")?;
/// reminders.offer(&"call back order 42".to_owned(), Duration::from_secs(30)).await?;
/// // ... in a consumer, about 30 s later:
/// let due = reminders.take().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DelayedQueue<C: Codec = Bytes> {
    pub(crate) inner: Arc<Inner>,
    pub(crate) reliable: ReliableOptions,
    /// Offers leave the delay list out ([`with_lean_layout`](DelayedQueue::with_lean_layout)).
    pub(crate) lean: bool,
    codec: PhantomData<fn() -> C>,
}

impl<C: Codec> Clone for DelayedQueue<C> {
    fn clone(&self) -> Self {
        DelayedQueue {
            inner: self.inner.clone(),
            reliable: self.reliable,
            lean: self.lean,
            codec: PhantomData,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) client: Client,
    name: String,
    pub(crate) keys: Keys,
    /// Claims of takes whose replies were seen: deleted by the next take.
    seen: Mutex<Vec<String>>,
}

impl<C: Codec> DelayedQueue<C> {
    /// A handle on the queue `name`. Nothing is sent; a bad name is reported by the first
    /// call ([`Error::InvalidName`]).
    pub fn new(client: &Client, name: &str) -> DelayedQueue<C> {
        let name = client.key_name(name).into_owned();
        DelayedQueue {
            inner: Arc::new(Inner {
                client: client.clone(),
                keys: Keys::new(&name),
                name,
                seen: Mutex::new(Vec::new()),
            }),
            reliable: ReliableOptions::default(),
            lean: false,
            codec: PhantomData,
        }
    }

    /// The queue's name: the key of its destination list.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The channel on which new heads' due times are published.
    pub fn channel(&self) -> &str {
        &self.inner.keys.channel
    }

    /// The same queue read and written through another codec.
    pub fn with_codec<D: Codec>(&self) -> DelayedQueue<D> {
        DelayedQueue {
            inner: self.inner.clone(),
            reliable: self.reliable,
            lean: self.lean,
            codec: PhantomData,
        }
    }

    /// Offers `value`, due `delay` from now by the server's clock. Returns the due time (by
    /// the server's clock).
    ///
    /// # Errors
    /// [`Error::InvalidName`]; [`Error::InvalidConfig`] for a delay over [`MAX_DELAY`];
    /// [`Error::Codec`] for a value the codec refuses (nothing sent); Redis errors. It is never
    /// sent twice: after an ambiguous error (`Error::is_ambiguous`) it may or may not be queued.
    pub async fn offer(&self, value: &C::Value, delay: Duration) -> Result<SystemTime> {
        if delay > MAX_DELAY {
            return Err(Error::InvalidConfig {
                field: "delay",
                reason: "longer than MAX_DELAY",
            });
        }
        self.offer_raw(value, millis(delay), "d").await
    }

    /// Offers `value`, due at `when` by this machine's clock (see [`DelayedQueue`] on skew);
    /// an instant already past is due at once.
    ///
    /// # Errors
    /// As [`offer`](DelayedQueue::offer).
    pub async fn offer_at(&self, value: &C::Value, when: SystemTime) -> Result<SystemTime> {
        let since_epoch = when.duration_since(UNIX_EPOCH).unwrap_or_default();
        if since_epoch > MAX_DELAY {
            return Err(Error::InvalidConfig {
                field: "when",
                reason: "too far in the future",
            });
        }
        self.offer_raw(value, millis(since_epoch), "a").await
    }

    async fn offer_raw(&self, value: &C::Value, at: u64, mode: &str) -> Result<SystemTime> {
        self.validate()?;
        let encoded = C::encode(value)?;
        let id = uuid::Uuid::new_v4();
        let keys = &self.inner.keys;
        let call = OFFER
            .call()
            .key(&keys.destination)
            .key(&keys.timeouts)
            .key(&keys.delayed)
            .key(&keys.channel)
            .arg(at)
            .arg(&id.as_bytes()[..8])
            .arg(encoded)
            .arg(mode)
            .arg(if self.lean { "lean" } else { "full" });
        let due = self.inner.client.eval_value(&call).await?;
        let due = as_u64(&due).ok_or(Error::UnexpectedReply {
            what: "queue_offer",
        })?;
        Ok(UNIX_EPOCH + Duration::from_millis(due))
    }

    /// Takes the next due element if there is one now.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::Codec`] when the element's bytes are not the codec's
    /// (the element is kept in `keylatch_queue:{N}:unreadable`), Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe: a take dropped while its reply is in flight puts its element back.
    pub async fn poll(&self) -> Result<Option<C::Value>> {
        self.validate()?;
        match self.attempt().await? {
            Attempt::Done(value) => Ok(Some(value)),
            Attempt::Retry(_) => Ok(None),
        }
    }

    /// Takes the next element, waiting at most `timeout` for one to be due. `None` when none
    /// was due in time.
    ///
    /// # Errors
    /// As [`poll`](DelayedQueue::poll).
    ///
    /// # Cancel safety
    /// As [`poll`](DelayedQueue::poll).
    pub async fn poll_for(&self, timeout: Duration) -> Result<Option<C::Value>> {
        self.wait(Some(Instant::now() + timeout)).await
    }

    /// Takes the next element, waiting as long as it takes for one to be due. A waiting take
    /// wakes when an earlier due time is offered (the channel), when the head is due, and at
    /// least every `Config::fallback_poll` (for elements another process's transfer moved).
    ///
    /// # Errors
    /// As [`poll`](DelayedQueue::poll); [`Error::Closed`] when the client shuts down.
    ///
    /// # Cancel safety
    /// As [`poll`](DelayedQueue::poll).
    pub async fn take(&self) -> Result<C::Value> {
        match self.wait(None).await? {
            Some(value) => Ok(value),
            None => Err(Error::UnexpectedReply { what: "queue_take" }),
        }
    }

    async fn wait(&self, deadline: Option<Instant>) -> Result<Option<C::Value>> {
        self.validate()?;
        wait_for(
            &self.inner.client,
            "delayed_queue",
            None,
            &self.inner.keys.channel,
            WakeMode::All,
            deadline,
            || self.attempt(),
        )
        .await
    }

    /// One take: moves what is due and pops the head, with its claim armed for the undo.
    async fn attempt(&self) -> Result<Attempt<C::Value>> {
        let client = &self.inner.client;
        let keys = &self.inner.keys;
        let ttl = millis(client.settle_window());
        let claim = keys.claim();
        let seen = self.take_seen();
        let mut call = POLL
            .call()
            .key(&keys.destination)
            .key(&keys.timeouts)
            .key(&keys.delayed)
            .key(&keys.unreadable)
            .key(&claim);
        for key in &seen {
            call = call.key(key.as_str());
        }
        let call = call.arg(ttl).arg(MOVE_BATCH);
        let undo = ClaimUndo::arm(client, &keys.destination, &claim, ttl);
        let reply = match client.eval_value(&call).await {
            Ok(reply) => reply,
            Err(err) => {
                // Not seen: the claims stay to be deleted, and the undo runs in the
                // background if the take may have run.
                self.give_back_seen(seen);
                if !err.is_ambiguous() {
                    undo.disarm();
                }
                return Err(err);
            }
        };
        undo.disarm();
        let Value::Array(items) = reply else {
            return Err(Error::UnexpectedReply { what: "queue_poll" });
        };
        match (items.first().and_then(as_u64), items.get(1)) {
            (Some(1), Some(Value::BulkString(bytes))) => {
                self.inner
                    .seen
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(claim);
                match C::decode(bytes.clone()) {
                    Ok(value) => Ok(Attempt::Done(value)),
                    Err(err) => {
                        self.keep_unreadable(bytes.clone()).await;
                        Err(err)
                    }
                }
            }
            (Some(2), Some(due_in)) => Ok(Attempt::Retry(
                as_u64(due_in).map(|ms| Duration::from_millis(ms.max(1))),
            )),
            (Some(3 | 0), _) => Ok(Attempt::Retry(None)),
            _ => Err(Error::UnexpectedReply { what: "queue_poll" }),
        }
    }

    /// Keeps a taken element the codec could not read, so that it is not lost.
    async fn keep_unreadable(&self, bytes: Vec<u8>) {
        let mut conn = match self.inner.client.connection().await {
            Ok(conn) => conn,
            Err(err) => {
                tracing::error!(target: "keylatch::queue", queue = %self.inner.name, error = %err, "an unreadable element could not be kept");
                return;
            }
        };
        let kept: std::result::Result<i64, _> = keylatch_redis::redis::cmd("RPUSH")
            .arg(&self.inner.keys.unreadable)
            .arg(bytes)
            .query_async(&mut conn)
            .await;
        if let Err(err) = kept {
            tracing::error!(target: "keylatch::queue", queue = %self.inner.name, error = %err, "an unreadable element could not be kept");
        }
    }

    fn take_seen(&self) -> Vec<String> {
        let mut seen = self.inner.seen.lock().unwrap_or_else(|e| e.into_inner());
        let n = seen.len().min(SEEN_PER_CALL);
        seen.drain(..n).collect()
    }

    fn give_back_seen(&self, claims: Vec<String>) {
        if claims.is_empty() {
            return;
        }
        let mut seen = self.inner.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.extend(claims);
        // Bounded: claims expire by themselves after the request window.
        let excess = seen.len().saturating_sub(SEEN_PER_CALL * 4);
        seen.drain(..excess);
    }

    /// The element the next take would return (ready, or due by now), not taken.
    ///
    /// # Errors
    /// As [`poll`](DelayedQueue::poll).
    pub async fn peek(&self) -> Result<Option<C::Value>> {
        self.validate()?;
        let keys = &self.inner.keys;
        let call = PEEK.call().key(&keys.destination).key(&keys.timeouts);
        match self.inner.client.eval_value(&call).await? {
            Value::Nil => Ok(None),
            Value::BulkString(bytes) => C::decode(bytes).map(Some),
            _ => Err(Error::UnexpectedReply { what: "queue_peek" }),
        }
    }

    /// The queue's counts (delayed, due, ready, the oldest overdue element's age).
    ///
    /// # Errors
    /// [`Error::InvalidName`], Redis errors.
    pub async fn counts(&self) -> Result<QueueCounts> {
        self.validate()?;
        let keys = &self.inner.keys;
        let call = COUNTS
            .call()
            .key(&keys.destination)
            .key(&keys.timeouts)
            .key(&keys.processing)
            .key(&keys.retry)
            .key(&keys.dead);
        let reply = self.inner.client.eval_value(&call).await?;
        let bad = || Error::UnexpectedReply {
            what: "queue_counts",
        };
        let Value::Array(items) = reply else {
            return Err(bad());
        };
        let at = |i: usize| items.get(i).and_then(as_u64);
        let now = at(4).ok_or_else(bad)?;
        Ok(QueueCounts {
            delayed: at(0).ok_or_else(bad)?,
            due: at(1).ok_or_else(bad)?,
            ready: at(2).ok_or_else(bad)?,
            oldest_overdue: at(3).map(|due| Duration::from_millis(now.saturating_sub(due))),
            processing: at(5).ok_or_else(bad)?,
            retrying: at(6).ok_or_else(bad)?,
            dead: at(7).ok_or_else(bad)?,
        })
    }

    /// How many elements the queue holds, delayed or ready.
    ///
    /// # Errors
    /// As [`counts`](DelayedQueue::counts).
    pub async fn len(&self) -> Result<u64> {
        Ok(self.counts().await?.total())
    }

    /// Whether the queue holds no element.
    ///
    /// # Errors
    /// As [`counts`](DelayedQueue::counts).
    pub async fn is_empty(&self) -> Result<bool> {
        Ok(self.len().await? == 0)
    }

    /// Removes one element equal to `value`: the first delayed one in offer order, else the
    /// first ready one. Returns whether one was removed. It scans the delayed list (as
    /// Redisson's `remove` does): O(n) in the backlog.
    ///
    /// # Errors
    /// As [`offer`](DelayedQueue::offer).
    pub async fn remove(&self, value: &C::Value) -> Result<bool> {
        self.by_value(&REMOVE, value, "queue_remove").await
    }

    /// Whether an element equal to `value` is delayed or ready. O(n) in the backlog.
    ///
    /// # Errors
    /// As [`offer`](DelayedQueue::offer).
    pub async fn contains(&self, value: &C::Value) -> Result<bool> {
        self.by_value(&CONTAINS, value, "queue_contains").await
    }

    async fn by_value(
        &self,
        script: &'static keylatch_redis::LuaScript,
        value: &C::Value,
        what: &'static str,
    ) -> Result<bool> {
        self.validate()?;
        let keys = &self.inner.keys;
        let call = script
            .call()
            .key(&keys.destination)
            .key(&keys.timeouts)
            .key(&keys.delayed)
            .arg(C::encode(value)?);
        match self.inner.client.eval_value(&call).await? {
            Value::Int(n) => Ok(n > 0),
            _ => Err(Error::UnexpectedReply { what }),
        }
    }

    /// Deletes every element, delayed and ready (the queue's four keys' data; claims of takes
    /// in flight expire by themselves).
    ///
    /// # Errors
    /// [`Error::InvalidName`], Redis errors.
    pub async fn clear(&self) -> Result<()> {
        self.validate()?;
        let keys = &self.inner.keys;
        keylatch_redis::object::delete(
            &self.inner.client,
            &[
                &keys.destination,
                &keys.timeouts,
                &keys.delayed,
                &keys.retry,
            ],
        )
        .await
        .map(|_| ())
    }

    /// Deletes the queue and keylatch's keys beside it (the unreadable list included).
    ///
    /// # Errors
    /// As [`clear`](DelayedQueue::clear).
    pub async fn destroy(&self) -> Result<()> {
        self.clear().await?;
        let keys = &self.inner.keys;
        let own: [&str; 4] = [
            &keys.unreadable,
            &keys.processing,
            &keys.deadlines,
            &keys.dead,
        ];
        keylatch_redis::object::delete(&self.inner.client, &own)
            .await
            .map(|_| ())
    }

    pub(crate) fn validate(&self) -> Result<()> {
        self.inner.client.validate_name(&self.inner.name)
    }
}
