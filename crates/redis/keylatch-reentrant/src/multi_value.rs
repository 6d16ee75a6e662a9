//! `MultiValueLock`: several values of one group locked all-or-nothing in one script call on
//! one hash key (Redisson's `RedissonFasterMultiLock` layout). Imports `keylatch-core`,
//! `keylatch-redis` and this crate's `multi_value_release` and `multi_value_hash`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::{
    AcquireOptions, Attempt, DistributedLock, Error, HoldKey, LockGuard, Owner, OwnerId, Renewal,
    Result, UndoGuard, validate_lease,
};
use keylatch_redis::redis::Value;
use keylatch_redis::{Client, WakeMode, prefixed};
use tokio::time::Instant;

use crate::multi_value_hash::field_of;
use crate::multi_value_release::{
    MV_ACQUIRE, MV_FORCE_UNLOCK, MV_IS_LOCKED, MV_RENEW, MultiValueRelease,
};

/// The most values one multi-value lock may take (each is an argument of one script call).
pub const MAX_VALUES: usize = 1000;

/// Several values of one group, locked all-or-nothing in one script call (Redisson's
/// `getMultiLock(group, values)`, `RedissonFasterMultiLock`).
///
/// - **All or nothing**: one script takes every value or none; two holders of overlapping
///   value sets exclude each other on the values they share, and since every acquisition is
///   one call on one key, overlapping sets can never deadlock (no one holds part of a set
///   while waiting for the rest).
/// - **Reentrancy**: per [`Owner`], per value (`with_owner`). An owner should take one value
///   set per group: the undo of a lost request compares the count on every value with the
///   owner's guards on the whole group, so with several sets such a request's values may stay
///   held until the owner's holds on the group end.
/// - **Leases**: without a lease the hold is in watchdog mode (renewed every third of the
///   client's watchdog timeout while the guard lives: each value's `expire_time` field and the
///   key's expiry); with a lease it ends after the lease.
/// - **Waiting**: woken through `redisson_lock__channel:{group}` (every waiter re-checks,
///   since a release frees only some values), and by the holder's lease end at the latest.
///
/// Layout: hash `group`, fields `<value>` → owner, `<value>:<owner>:expire_time` → the
/// server's clock in ms when the value's lease ends, `<value>:<owner>:lock_count` → hold
/// count. A value's field is Redisson's name for it: the HighwayHash-128 of its UTF-8 bytes
/// in base64 ([`fields`](MultiValueLock::fields)), as a Redisson client configured with
/// `StringCodec` names it (see `docs/data-layout.md`).
///
/// ```no_run
/// # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
/// let lock = client.multi_value_lock("class_100", ["Jack_001", "Mary_002"]);
/// let guard = lock.lock().await?;
/// // no one else holds Jack_001 or Mary_002 of class_100
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MultiValueLock {
    client: Client,
    group: Arc<str>,
    owner: Option<Owner>,
    /// Why the values were refused, reported by the first operation.
    invalid: Option<&'static str>,
    values: Arc<[String]>,
    release: Arc<MultiValueRelease>,
}

/// Why a value set is refused, if it is.
fn check_values(values: &[String]) -> Option<&'static str> {
    if values.is_empty() {
        return Some("a multi-value lock needs at least one value");
    }
    if values.len() > MAX_VALUES {
        return Some("a multi-value lock takes at most 1000 values");
    }
    if values.iter().any(String::is_empty) {
        return Some("a multi-value lock's value is empty");
    }
    let mut seen = HashSet::with_capacity(values.len());
    if !values.iter().all(|value| seen.insert(value.as_str())) {
        return Some("a multi-value lock's values must be distinct");
    }
    None
}

impl MultiValueLock {
    /// A handle on `values` of the group `group`. Nothing is sent to Redis; bad values (none,
    /// more than [`MAX_VALUES`], an empty one, duplicates) and a bad group name
    /// are reported by the first operation ([`Error::InvalidName`]).
    pub fn new<I, S>(client: &Client, group: &str, values: I) -> MultiValueLock
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let group: Arc<str> = Arc::from(client.key_name(group));
        let values: Vec<String> = values.into_iter().map(Into::into).collect();
        let fields: Vec<String> = values.iter().map(|value| field_of(value)).collect();
        MultiValueLock {
            client: client.clone(),
            invalid: check_values(&values),
            values: values.into(),
            release: Arc::new(MultiValueRelease {
                client: client.clone(),
                channel: prefixed("redisson_lock__channel", &group),
                group: group.clone(),
                fields: fields.into(),
            }),
            group,
            owner: None,
        }
    }

    /// A handle whose acquisitions are all for `owner`: they re-enter each other's holds.
    #[must_use]
    pub fn with_owner(&self, owner: Owner) -> Self {
        MultiValueLock {
            owner: Some(owner),
            ..self.clone()
        }
    }

    /// The group (the hash key).
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The values, in the order given.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// The hash fields the values are kept under, in the same order: Redisson's names for
    /// them (`Hash.hash128toBase64` of the value's UTF-8 bytes, as with `StringCodec`).
    pub fn fields(&self) -> &[String] {
        &self.release.fields
    }

    /// The wake-up channel, `redisson_lock__channel:{group}`.
    pub fn channel(&self) -> &str {
        &self.release.channel
    }

    fn validate(&self) -> Result<()> {
        self.client.validate_name(&self.group)?;
        match self.invalid {
            Some(reason) => Err(Error::InvalidName { reason }),
            None => Ok(()),
        }
    }

    keylatch_core::acquire_shorthands! {
        lock: "Waits as long as it takes; watchdog mode.",
        lock_with_lease: "Waits as long as it takes; the hold ends after `lease`.",
        try_lock: "Tries once; watchdog mode. `None` when another owner holds any of the values.",
        try_lock_for: "Waits at most `wait`; `lease` of `None` means watchdog mode.",
    }

    /// Acquires with `options`; `None` when the wait bound passed first.
    ///
    /// # Errors
    /// [`Error::InvalidName`] (bad group or values), [`Error::WrongType`], Redis errors;
    /// [`Error::InvalidLease`] for a lease out of range.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind; a request already sent is undone.
    pub async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        self.validate()?;
        let (lease, renewal) = match options.lease() {
            Some(lease) => {
                validate_lease(lease)?;
                (lease, Renewal::Lease)
            }
            None => (self.client.config().watchdog_timeout, MV_RENEW.renewal()),
        };
        let owner = self.client.owner_id(Owner::or_unique(self.owner));
        let hold_key = HoldKey::new(&self.group, owner);
        keylatch_redis::wait_for(
            &self.client,
            "multi_value",
            Some(owner),
            self.channel(),
            WakeMode::All,
            options.deadline(),
            || self.attempt(owner, &hold_key, lease, renewal),
        )
        .await
    }

    /// One acquire attempt (one script call), undone if its reply is lost.
    async fn attempt(
        &self,
        owner: OwnerId,
        hold_key: &HoldKey,
        lease: Duration,
        renewal: Renewal,
    ) -> Result<Attempt<LockGuard>> {
        let field = hold_key.field();
        let watchdog = self.client.watchdog();
        watchdog.settled(&self.group, field).await;
        let expected = watchdog.local_count(&self.group, field) as u64 + 1;
        let undo = UndoGuard::arm_for_key(
            self.client.background(),
            self.release.clone(),
            owner,
            expected,
            hold_key,
        );
        let mut call = MV_ACQUIRE
            .call()
            .key(&*self.group)
            .arg(keylatch_core::lease_millis(lease))
            .arg(field);
        for value in self.release.fields.iter() {
            call = call.arg(value.as_str());
        }
        let sent_at = Instant::now();
        let (reply, undo) = Box::pin(self.client.eval_undoable(call, undo)).await;
        let reply = match reply {
            Ok(reply) => {
                undo.disarm();
                reply
            }
            Err(err) if err.is_ambiguous() => {
                let _ = undo.run_now().await;
                return Err(err);
            }
            Err(err) => {
                undo.disarm();
                return Err(err);
            }
        };
        match reply {
            Value::Nil => {}
            Value::Int(wait) => {
                let wait = u64::try_from(wait).unwrap_or(0);
                return Ok(Attempt::Retry(Some(Duration::from_millis(wait))));
            }
            _ => {
                return Err(Error::UnexpectedReply {
                    what: "multi_value_acquire",
                });
            }
        }
        let hold = watchdog.register(hold_key.clone(), lease, renewal, sent_at);
        Ok(Attempt::Done(LockGuard::new(
            self.client.background().clone(),
            self.group.clone(),
            owner,
            self.release.clone(),
            hold,
            None,
        )))
    }

    /// Releases the values whoever holds them and wakes the waiters. Returns whether any was
    /// held. Guards of the old holders then get [`Error::NotHeld`] from `unlock`.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.validate()?;
        let mut call = MV_FORCE_UNLOCK
            .call()
            .key(&*self.group)
            .key(self.channel())
            .arg(crate::scripts::UNLOCK_MESSAGE);
        for value in self.release.fields.iter() {
            call = call.arg(value.as_str());
        }
        let removed: i64 = self.client.eval(&call).await?;
        Ok(removed > 0)
    }

    /// Whether anyone holds any of the values (its lease not ended).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    pub async fn is_locked(&self) -> Result<bool> {
        self.validate()?;
        let mut call = MV_IS_LOCKED.call().key(&*self.group);
        for value in self.release.fields.iter() {
            call = call.arg(value.as_str());
        }
        let held: i64 = self.client.eval(&call).await?;
        Ok(held == 1)
    }
}

#[async_trait]
impl DistributedLock for MultiValueLock {
    fn name(&self) -> &str {
        &self.group
    }

    async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        MultiValueLock::acquire(self, options).await
    }

    fn release_channel(&self) -> Option<(&(dyn std::any::Any + Send + Sync), &str)> {
        Some((&self.client, self.channel()))
    }

    async fn is_locked(&self) -> Result<bool> {
        MultiValueLock::is_locked(self).await
    }

    async fn force_unlock(&self) -> Result<bool> {
        MultiValueLock::force_unlock(self).await
    }
}

#[cfg(test)]
mod tests {
    use super::check_values;

    fn values(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| (*item).to_owned()).collect()
    }

    #[test]
    fn bad_value_sets_are_refused() {
        assert!(check_values(&values(&[])).is_some());
        assert!(check_values(&values(&["a", "a"])).is_some());
        assert!(check_values(&values(&["a", ""])).is_some());
        let many: Vec<String> = (0..=super::MAX_VALUES).map(|i| i.to_string()).collect();
        assert!(check_values(&many).is_some());
        assert!(check_values(&many[1..]).is_none());
        assert!(check_values(&values(&["a", "b"])).is_none());
    }
}
