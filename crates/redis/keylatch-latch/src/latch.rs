//! `CountDownLatch`: the handle, its key and channel, its calls and its wait. Imports
//! `scripts` of this crate, `keylatch-core` and `keylatch-redis`.

use std::sync::Arc;
use std::time::Duration;

use keylatch_core::{Attempt, Error, Result};
use keylatch_redis::redis::{self, Value};
use keylatch_redis::{Client, WakeMode, object, wait_for};
use tokio::time::Instant;

use crate::scripts::{COUNT_DOWN, DELETE, TRY_SET_COUNT};

/// The largest count a latch takes: Redis counts in signed 64-bit integers.
pub const MAX_COUNT: u64 = i64::MAX as u64;

/// Redisson's prefix of a latch's channel: `redisson_countdownlatch__channel__{name}`.
const CHANNEL_PREFIX: &str = "redisson_countdownlatch__channel__";

/// A count-down latch shared by every process using the name, compatible with Redisson's
/// `RCountDownLatch`: waiters wait until the count reaches zero; anyone counts it down.
///
/// - **Open at zero, and when missing.** The count is the integer string `name`; a latch that
///   does not exist has count 0, so [`wait`](CountDownLatch::wait) returns at once. Set the
///   count first ([`try_set_count`](CountDownLatch::try_set_count)), then hand the name to the
///   waiters. The last [`count_down`](CountDownLatch::count_down) deletes the key.
/// - **Set once.** `try_set_count` sets the count only when the latch does not exist (a latch
///   that reached zero does not, so it can be set again: Redisson's "reset").
/// - **Waking.** Waiters subscribe to the latch's channel through the client's pub/sub hub and
///   re-read the count on every message, and at least every
///   [`Config::fallback_poll`](keylatch_redis::Config::fallback_poll) (2 s ± 20 % by default),
///   so a lost message (a count changed by a plain command, a dropped pub/sub connection) costs
///   latency, never liveness. A waiter returns only after it read a count of 0.
/// - **Lost replies.** [`count_down`](CountDownLatch::count_down) is not idempotent and is
///   never sent twice (as Redisson's, which it runs without retries): after a lost reply
///   (an error for which [`Error::is_ambiguous`] holds) it may or may not have counted down.
///   Read [`count`](CountDownLatch::count) when that matters.
///
/// - **Telemetry.** A wait is counted as an acquisition of the primitive `latch`
///   (`keylatch_acquisitions_total`, `keylatch_wait_seconds`, the `keylatch.acquire` span):
///   outcome `acquired` when the latch was open at once, `acquired_after_waiting`,
///   `timed_out`. Calls that change the count log a `debug` event (target `keylatch::latch`).
///
/// Layout (Redisson's): string `name` = the count, no TTL unless
/// [`expire`](CountDownLatch::expire) gave it one; channel
/// `redisson_countdownlatch__channel__{name}`, messages `1` (a count was set, or the latch was
/// deleted) and `0` (the count reached zero). On a Redis Cluster the key and the channel share
/// the name's slot; names with hash-tag braces (accepted with
/// [`Config::hash_tagged_names`](keylatch_redis::Config::hash_tagged_names)) are refused
/// ([`Error::InvalidName`]) when their key and channel would fall in different slots, since
/// one script writes both.
///
/// ```no_run
/// # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
/// let ready = client.latch("shards-loaded");
/// ready.try_set_count(3).await?; // only the first caller sets it
/// // ... each of three loaders, when done:
/// ready.count_down().await?;
/// // ... anyone who needs all three:
/// ready.wait().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct CountDownLatch {
    client: Client,
    name: Arc<str>,
    channel: Arc<str>,
}

impl CountDownLatch {
    /// A handle on the latch `name`. Nothing is sent to Redis; a bad name is reported by the
    /// first operation ([`Error::InvalidName`]).
    pub fn new(client: &Client, name: &str) -> CountDownLatch {
        let name = client.key_name(name);
        CountDownLatch {
            client: client.clone(),
            name: Arc::from(&*name),
            channel: Arc::from(format!("{CHANNEL_PREFIX}{{{name}}}")),
        }
    }

    /// The latch's name (the key of its count).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The wake-up channel, `redisson_countdownlatch__channel__{name}`.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The name's checks: the client's name rules, and key and channel in one cluster slot.
    fn validate(&self) -> Result<()> {
        self.client.validate_name(&self.name)?;
        if hash_tag(&self.name) != hash_tag(&self.channel) {
            return Err(Error::InvalidName {
                reason: "a count-down latch's key and channel would hash to different cluster slots (Redisson wraps the whole name in braces for the channel)",
            });
        }
        Ok(())
    }

    /// Sets the count to `count` if the latch does not exist (Redisson's `trySetCount`), and
    /// publishes Redisson's new-count message. Returns whether it did; an existing latch is
    /// left untouched.
    ///
    /// Redisson takes any count, 0 and negative ones included; a count of 0 would make a latch
    /// that is open yet exists, which no `count_down` ever deletes and no `try_set_count` can
    /// set again. keylatch refuses it.
    ///
    /// # Errors
    /// [`Error::InvalidName`]; [`Error::InvalidCount`] for 0 or more than [`MAX_COUNT`]
    /// (nothing sent); [`Error::WrongType`] when `name` holds something that is not an integer;
    /// Redis errors. After an ambiguous error (see [`CountDownLatch`]) the count may have been
    /// set: [`count`](CountDownLatch::count) tells.
    ///
    /// # Cancel safety
    /// Dropping the future after it was sent may or may not set the count; it is never sent
    /// twice.
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        self.validate()?;
        check_count(count)?;
        let call = TRY_SET_COUNT
            .call()
            .key(&*self.name)
            .key(&*self.channel)
            .arg(count);
        let set = match self.client.eval_value(&call).await? {
            Value::Int(1) => true,
            Value::Int(0) => false,
            _ => return Err(unexpected("latch_try_set_count")),
        };
        tracing::debug!(target: "keylatch::latch", latch = %self.name, count, set, "try_set_count");
        Ok(set)
    }

    /// Counts down by one (Redisson's `countDown`) and returns the count left. At zero the key
    /// is deleted and Redisson's zero-count message wakes every waiter, Redisson's and
    /// keylatch's. A latch that does not exist stays so (0 is returned).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors. After an ambiguous error
    /// ([`Error::is_ambiguous`]) the count may or may not have gone down: it is not retried.
    ///
    /// # Cancel safety
    /// Dropping the future after it was sent may or may not count down; it is never sent
    /// twice.
    pub async fn count_down(&self) -> Result<u64> {
        self.validate()?;
        let call = COUNT_DOWN.call().key(&*self.name).key(&*self.channel);
        let left = match self.client.eval_value(&call).await? {
            Value::Int(left) => u64::try_from(left).unwrap_or(0),
            _ => return Err(unexpected("latch_count_down")),
        };
        tracing::debug!(target: "keylatch::latch", latch = %self.name, left, "count_down");
        Ok(left)
    }

    /// The count now: 0 when the latch does not exist (a negative count, which Redisson's
    /// `trySetCount` can write, reads as 0 too).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`] (not an integer), Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn count(&self) -> Result<u64> {
        self.validate()?;
        self.read_count().await
    }

    async fn read_count(&self) -> Result<u64> {
        let value: Option<String> = self
            .client
            .query(redis::cmd("GET").arg(&*self.name), &self.name)
            .await?;
        parse_count(value.as_deref(), &self.name)
    }

    /// Waits until the count is zero, as long as it takes (Redisson's `await`). Returns at
    /// once when it already is, or when the latch does not exist.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], [`Error::Closed`] (the client shut down
    /// meanwhile), [`Error::NoPermission`] (the channel was refused), Redis errors once
    /// transient failures outlast their retries.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads, and a dropped wait leaves no subscription behind.
    pub async fn wait(&self) -> Result<()> {
        self.wait_until(None).await.map(|_| ())
    }

    /// Waits at most `timeout` until the count is zero (Redisson's `await(time, unit)`).
    /// Returns `true` when it is, `false` when `timeout` passed first. A zero `timeout` reads
    /// the count once.
    ///
    /// # Errors
    /// As [`wait`](CountDownLatch::wait).
    ///
    /// # Cancel safety
    /// As [`wait`](CountDownLatch::wait).
    pub async fn wait_for(&self, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now().checked_add(timeout);
        self.wait_until(deadline).await
    }

    async fn wait_until(&self, deadline: Option<Instant>) -> Result<bool> {
        self.validate()?;
        let opened = wait_for(
            &self.client,
            "latch",
            None,
            &self.channel,
            // Every message may open the latch for every waiter: each re-reads the count.
            WakeMode::All,
            deadline,
            || async {
                Ok(match self.read_count().await? {
                    0 => Attempt::Done(()),
                    _ => Attempt::Retry(None),
                })
            },
        )
        .await?;
        Ok(opened.is_some())
    }

    /// Deletes the latch (Redisson's `delete`): its count becomes 0, so keylatch's waiters
    /// return. Publishes Redisson's new-count message, as Redisson does; Redisson's own
    /// waiters keep waiting for a zero-count message after it. Returns whether it existed.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`] (not a string: nothing is deleted), Redis
    /// errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not delete the latch; deleting again is harmless.
    pub async fn delete(&self) -> Result<bool> {
        self.validate()?;
        let call = DELETE.call().key(&*self.name).key(&*self.channel);
        let deleted = match self.client.eval_value(&call).await? {
            Value::Int(1) => true,
            Value::Int(0) => false,
            _ => return Err(unexpected("latch_delete")),
        };
        tracing::debug!(target: "keylatch::latch", latch = %self.name, deleted, "delete");
        Ok(deleted)
    }

    /// Whether the latch exists (a count above zero was set and has not been counted down to
    /// zero).
    ///
    /// # Errors
    /// [`Error::InvalidName`], Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn exists(&self) -> Result<bool> {
        self.validate()?;
        object::exists(&self.client, &self.name).await
    }

    /// Makes the latch expire after `time_to_live` (`PEXPIRE`, Redisson's `expire`): it then
    /// reads as count 0, open. Returns whether the latch exists.
    ///
    /// # Errors
    /// [`Error::InvalidName`]; [`Error::InvalidLease`] for less than 1 ms or more than
    /// [`MAX_LEASE`](keylatch_core::MAX_LEASE); Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not set the expiry; setting it again is harmless.
    pub async fn expire(&self, time_to_live: Duration) -> Result<bool> {
        self.validate()?;
        object::expire(&self.client, &[&self.name], time_to_live).await
    }

    /// Removes the latch's expiry (`PERSIST`, Redisson's `clearExpire`). Returns whether it
    /// had one.
    ///
    /// # Errors
    /// [`Error::InvalidName`], Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not remove the expiry; removing it again is harmless.
    pub async fn clear_expire(&self) -> Result<bool> {
        self.validate()?;
        object::clear_expire(&self.client, &[&self.name]).await
    }
}

/// The part of `key` Redis Cluster hashes: the first `{…}`'s non-empty content, else the key.
fn hash_tag(key: &str) -> &str {
    if let Some(open) = key.find('{') {
        let rest = &key[open + 1..];
        if let Some(close) = rest.find('}')
            && close > 0
        {
            return &rest[..close];
        }
    }
    key
}

fn check_count(count: u64) -> Result<()> {
    if count == 0 {
        return Err(Error::InvalidCount {
            reason: "a latch needs a count of at least 1 (a latch at 0 is open: it does not exist)",
        });
    }
    if count > MAX_COUNT {
        return Err(Error::InvalidCount {
            reason: "more than the largest count (9223372036854775807)",
        });
    }
    Ok(())
}

/// The count a `GET` read: none is 0, a negative count is 0, anything but an integer is
/// refused.
fn parse_count(value: Option<&str>, key: &str) -> Result<u64> {
    match value {
        None => Ok(0),
        Some(text) => match text.parse::<i64>() {
            Ok(count) => Ok(u64::try_from(count).unwrap_or(0)),
            Err(_) => Err(Error::WrongType {
                key: key.to_owned(),
            }),
        },
    }
}

fn unexpected(what: &'static str) -> Error {
    Error::UnexpectedReply { what }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_and_channel_share_a_slot_unless_the_name_has_a_closing_brace() {
        let channel = |name: &str| format!("{CHANNEL_PREFIX}{{{name}}}");
        for name in ["job", "a{b", "{a"] {
            assert_eq!(hash_tag(name), hash_tag(&channel(name)), "{name}");
        }
        for name in ["{a}b", "a}b", "x{y}", "a{}b", "{}"] {
            assert_ne!(hash_tag(name), hash_tag(&channel(name)), "{name}");
        }
        assert_eq!(hash_tag("redisson_countdownlatch__channel__{job}"), "job");
    }

    #[test]
    fn counts_are_checked_and_read() {
        assert!(matches!(check_count(0), Err(Error::InvalidCount { .. })));
        assert!(matches!(
            check_count(MAX_COUNT + 1),
            Err(Error::InvalidCount { .. })
        ));
        assert!(check_count(1).is_ok() && check_count(MAX_COUNT).is_ok());
        assert_eq!(parse_count(None, "k").unwrap(), 0);
        assert_eq!(parse_count(Some("7"), "k").unwrap(), 7);
        assert_eq!(parse_count(Some("-2"), "k").unwrap(), 0);
        assert!(matches!(
            parse_count(Some("x"), "k"),
            Err(Error::WrongType { .. })
        ));
    }
}
