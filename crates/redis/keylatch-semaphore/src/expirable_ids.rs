//! What any process that knows a permit's id can do with it: release it (one, or many at
//! once), read or change its lease.
//!
//! May import: `expirable.rs` (the semaphore and the id check), the shared parts, the scripts.

use std::time::Duration;

use keylatch_core::{Error, Result, lease_millis, validate_lease};
use keylatch_redis::redis::Value;

use tokio::time::Instant;

use crate::counts::MAX_PERMITS_PER_CALL;
use crate::expirable::{PermitExpirableSemaphore, is_permit_id};
use crate::retry::{release_once, run_idempotent};
use crate::scripts::{EXP_LEASE, EXP_RELEASE_ALL, EXP_UPDATE};
use crate::semaphore_shared::unexpected;

impl PermitExpirableSemaphore {
    /// Gives back the permit `id`, whoever holds it. A [`Permit`](crate::Permit) guard of this client for
    /// that id then reports [`Error::UnknownPermit`] from its own release.
    ///
    /// # Errors
    /// [`Error::UnknownPermit`] when the id is unknown or its lease already ended (nothing
    /// changed); [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// As [`try_release`](PermitExpirableSemaphore::try_release).
    pub async fn release(&self, id: &str) -> Result<()> {
        if self.try_release(id).await? {
            Ok(())
        } else {
            Err(self.unknown(id))
        }
    }

    /// Gives back the permit `id`, whoever holds it; returns `false` when the id is unknown or
    /// its lease already ended (nothing changed). A lost reply, a failed connection or an
    /// unreachable server is retried until the server answers, while the client lives; a
    /// permit released by a lost attempt is reported as released. The call waits at most
    /// [`Config::release_timeout`](keylatch_redis::Config::release_timeout), then returns
    /// [`Error::Timeout`] and the release goes on in the background
    /// ([`Client::shutdown`](keylatch_redis::Client::shutdown) reports it if still unconfirmed).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], [`Error::Timeout`] (it goes on in the
    /// background), [`Error::Closed`], Redis errors.
    ///
    /// # Cancel safety
    /// Once polled, the release happens even if the future is dropped (it is finished in the
    /// background); releasing an id twice releases it once.
    pub async fn try_release(&self, id: &str) -> Result<bool> {
        self.shared.client.validate_name(self.name())?;
        if !is_permit_id(id) {
            return Ok(false);
        }
        let call = self.shared.release_call(&[id]);
        match release_once(&self.shared.client, call, &self.shared.name, 1, None).await? {
            (Value::Int(1), _) => Ok(true),
            // An earlier attempt whose reply was lost may have released it.
            (Value::Int(0), attempts) => Ok(attempts > 1),
            _ => Err(unexpected("expirable_semaphore_release")),
        }
    }

    /// Gives back every permit of `ids` in one call, whoever holds them, all or none
    /// (Redisson's `release(ids)`): when any id is unknown or its lease already ended, nothing
    /// is released and the error names those ids.
    ///
    /// Retried as [`try_release`](PermitExpirableSemaphore::try_release). After a lost reply,
    /// a retry that finds every id gone takes them for released by the lost attempt.
    ///
    /// # Errors
    /// [`Error::UnknownPermits`] naming the ids that are not permit ids, or, when all are,
    /// those the semaphore does not hold (nothing released); [`Error::InvalidName`],
    /// [`Error::InvalidPermits`] for more than [`MAX_PERMITS_PER_CALL`] ids,
    /// [`Error::WrongType`], [`Error::Timeout`] (it goes on in the background),
    /// [`Error::Closed`], Redis errors.
    ///
    /// # Cancel safety
    /// As [`try_release`](PermitExpirableSemaphore::try_release): once polled, the release
    /// happens (all or none) even if the future is dropped.
    ///
    /// ```no_run
    /// # async fn demo(client: keylatch::Client, ids: Vec<String>) -> keylatch::Result<()> {
    /// let workers = client.permit_expirable_semaphore("workers");
    /// let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    /// match workers.release_many(&ids).await {
    ///     Ok(()) => println!("released {} permits", ids.len()),
    ///     Err(keylatch::Error::UnknownPermits { ids, .. }) => println!("not held: {ids:?}"),
    ///     Err(err) => return Err(err),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release_many(&self, ids: &[&str]) -> Result<()> {
        self.shared.client.validate_name(self.name())?;
        if ids.len() > MAX_PERMITS_PER_CALL as usize {
            return Err(Error::InvalidPermits {
                reason: "at most 1000 permits per call",
            });
        }
        if ids.is_empty() {
            return Ok(());
        }
        let malformed: Vec<&str> = ids.iter().copied().filter(|id| !is_permit_id(id)).collect();
        if !malformed.is_empty() {
            return Err(self.unknown_ids(malformed));
        }
        let mut call = EXP_RELEASE_ALL
            .call()
            .key(self.name())
            .key(self.timeout_key())
            .key(self.channel());
        for id in ids {
            call = call.arg(*id);
        }
        let permits = ids.len() as u64;
        let (reply, attempts) =
            release_once(&self.shared.client, call, &self.shared.name, permits, None).await?;
        let Value::Array(items) = reply else {
            return Err(unexpected("expirable_semaphore_release_all"));
        };
        let mut items = items.into_iter();
        match items.next() {
            Some(Value::Int(_)) if items.len() == 0 => Ok(()),
            Some(Value::Int(0)) => {
                let unknown: Vec<&str> = items
                    .filter_map(|item| match item {
                        Value::Int(at) => usize::try_from(at).ok()?.checked_sub(1),
                        _ => None,
                    })
                    .filter_map(|at| ids.get(at).copied())
                    .collect();
                if attempts > 1 && unknown.len() == ids.len() {
                    // A lost attempt released them all.
                    Ok(())
                } else {
                    Err(self.unknown_ids(unknown))
                }
            }
            _ => Err(unexpected("expirable_semaphore_release_all")),
        }
    }

    /// Gives back the permits of `ids` that are held, in one call, whoever holds them, and
    /// returns how many that was; ids that are unknown or whose lease already ended are
    /// skipped. [`release_many`](PermitExpirableSemaphore::release_many) releases all or none.
    ///
    /// Retried as [`try_release`](PermitExpirableSemaphore::try_release).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::InvalidPermits`] for more than
    /// [`MAX_PERMITS_PER_CALL`] ids, [`Error::WrongType`], [`Error::Timeout`] (it goes on in
    /// the background), [`Error::Closed`], Redis errors.
    ///
    /// # Cancel safety
    /// As [`try_release`](PermitExpirableSemaphore::try_release): once polled, the release
    /// happens even if the future is dropped. After a lost reply the count may miss ids the
    /// lost attempt released.
    pub async fn try_release_many(&self, ids: &[&str]) -> Result<u64> {
        self.shared.client.validate_name(self.name())?;
        if ids.len() > MAX_PERMITS_PER_CALL as usize {
            return Err(Error::InvalidPermits {
                reason: "at most 1000 permits per call",
            });
        }
        let ids: Vec<&str> = ids.iter().copied().filter(|id| is_permit_id(id)).collect();
        if ids.is_empty() {
            return Ok(0);
        }
        let call = self.shared.release_call(&ids);
        let permits = ids.len() as u64;
        match release_once(&self.shared.client, call, &self.shared.name, permits, None).await? {
            (Value::Int(released), _) => Ok(u64::try_from(released).unwrap_or(0)),
            _ => Err(unexpected("expirable_semaphore_release")),
        }
    }

    /// The time left on the lease of the permit `id` (server clock); `None` when the id is
    /// unknown or its lease already ended (Redisson's `getLeaseTime`).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read; the reclaim it may do is atomic and needed anyway).
    pub async fn remaining_lease(&self, id: &str) -> Result<Option<Duration>> {
        self.shared.client.validate_name(self.name())?;
        if !is_permit_id(id) {
            return Ok(None);
        }
        let call = EXP_LEASE
            .call()
            .key(self.name())
            .key(self.timeout_key())
            .key(self.channel())
            .arg(id);
        match self.shared.client.eval_value(&call).await? {
            Value::Int(ms) if ms >= 0 => {
                Ok(Some(Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
            }
            Value::Int(_) => Ok(None),
            _ => Err(unexpected("expirable_semaphore_lease")),
        }
    }

    /// Sets the lease of the permit `id` anew: it ends `lease` from now (server clock). A
    /// watchdog-mode permit's next renewal sets it back to the watchdog timeout, and a
    /// [`Permit`](crate::Permit) guard's [`valid_until`](crate::Permit::valid_until) does not follow a change made
    /// by id: do not shorten the lease of a permit whose guard relies on it. The guard's own
    /// [`Permit::extend`](crate::Permit::extend), [`set_lease`](crate::Permit::set_lease) and
    /// [`watchdog`](crate::Permit::watchdog) change it and keep the guard in step.
    ///
    /// # Errors
    /// [`Error::UnknownPermit`] when the id is unknown or its lease already ended;
    /// [`Error::InvalidName`], [`Error::InvalidLease`], [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have changed the lease; nothing else is affected.
    pub async fn update_lease(&self, id: &str, lease: Duration) -> Result<()> {
        self.shared.client.validate_name(self.name())?;
        validate_lease(lease)?;
        if !is_permit_id(id) {
            return Err(self.unknown(id));
        }
        // Setting a lease from now is idempotent enough to retry.
        match run_idempotent(
            &self.shared.client,
            &self.update_call(id, lease),
            Instant::now(),
        )
        .await?
        {
            (Value::Int(left), _) if left >= 0 => Ok(()),
            (Value::Int(-1), _) => Err(self.unknown(id)),
            _ => Err(unexpected("expirable_semaphore_update_lease")),
        }
    }

    /// The call that sets the lease of the permit `id` to `lease` from now (the lease left,
    /// in ms), or finds it unknown (`-1`).
    pub(crate) fn update_call(&self, id: &str, lease: Duration) -> keylatch_redis::ScriptCall {
        EXP_UPDATE
            .call()
            .key(self.name())
            .key(self.timeout_key())
            .key(self.channel())
            .arg(id)
            .arg(lease_millis(lease))
    }

    /// A call of `script` with the four keys every expirable script takes first.
    pub(crate) fn keys(
        &self,
        script: &'static keylatch_redis::LuaScript,
    ) -> keylatch_redis::ScriptCall {
        script
            .call()
            .key(self.name())
            .key(self.timeout_key())
            .key(self.channel())
            .key(self.total_key())
    }

    fn unknown_ids(&self, ids: Vec<&str>) -> Error {
        Error::UnknownPermits {
            name: self.name().to_owned(),
            ids: ids.into_iter().map(str::to_owned).collect(),
        }
    }

    pub(crate) fn unknown(&self, id: &str) -> Error {
        Error::UnknownPermit {
            name: self.name().to_owned(),
            id: id.to_owned(),
        }
    }
}
