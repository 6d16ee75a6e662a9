//! `Permit`: one permit of a permit-expirable semaphore, held by this process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::hold::{Extension, HoldExtend};
use keylatch_core::{
    Error, HoldKey, HoldRelease, LockGuard, OwnerId, Renewal, Result, lease_millis, validate_lease,
};
use keylatch_redis::redis::Value;
use tokio::time::Instant;

use crate::expirable_shared::Shared;
use crate::retry::run_until_applied;
use crate::scripts::{EXP_RENEW, EXP_UPDATE};
use crate::semaphore_shared::unexpected;

/// One permit of a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore), held by
/// this process: its id, its lease, and the release.
///
/// - [`release`](Permit::release) gives it back and reports errors
///   ([`Error::UnknownPermit`] when its lease had already ended, or someone released it by
///   id); dropping it gives it back in the background.
/// - In watchdog mode the client's watchdog renews its lease while the `Permit` lives;
///   [`lost`](Permit::lost) completes when a renewal finds it gone or none succeeded in time,
///   or when a fixed lease runs out.
/// - [`extend`](Permit::extend) adds to its lease, [`set_lease`](Permit::set_lease) sets what
///   is left of it (and leaves watchdog mode), [`watchdog`](Permit::watchdog) switches a
///   fixed lease to watchdog mode (Redisson's `updateLeaseTime`, checked against the guard).
/// - [`forget`](Permit::forget) stops tracking it and returns its id: the permit stays taken
///   until its current lease ends or someone releases the id.
#[must_use = "dropping a Permit gives it back (in the background); keep it while you use it, or `forget()` it to leave it to its lease"]
#[derive(Debug)]
pub struct Permit {
    id: Arc<str>,
    guard: LockGuard,
    release: Arc<PermitRelease>,
}

impl Permit {
    pub(crate) fn new(
        shared: &Arc<Shared>,
        id: String,
        owner: OwnerId,
        lease: Duration,
        renewal: Renewal,
        sent_at: Instant,
    ) -> Permit {
        let id: Arc<str> = id.into();
        let client = &shared.client;
        let hold = client.watchdog().register(
            HoldKey::new(&shared.timeout_key, &id),
            lease,
            renewal,
            sent_at,
        );
        let release = Arc::new(PermitRelease {
            shared: shared.clone(),
            id: id.clone(),
            forgotten: AtomicBool::new(false),
        });
        let guard = LockGuard::new(
            client.background().clone(),
            shared.name.clone(),
            owner,
            release.clone(),
            hold,
            None,
        )
        .extendable(release.clone());
        Permit { id, guard, release }
    }

    /// The permit id (32 hex digits, as Redisson's).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The semaphore's name.
    pub fn semaphore_name(&self) -> &str {
        self.guard.name()
    }

    /// The local instant until which the permit is known held, or `None` once it is lost.
    pub fn valid_until(&self) -> Option<Instant> {
        self.guard.valid_until()
    }

    /// Whether the permit is lost (see [`lost`](Permit::lost)).
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// Why the permit is lost, or `None` while it is held (see
    /// [`LockGuard::loss_reason`](keylatch_core::LockGuard::loss_reason)).
    pub fn loss_reason(&self) -> Option<keylatch_core::LossReason> {
        self.guard.loss_reason()
    }

    /// Completes when the permit is lost: a renewal found it gone, none succeeded before the
    /// lease's local deadline, or a fixed lease ran out. The future owns what it needs.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.guard.lost()
    }

    /// Adds `by` to what is left of the permit's lease on the server (a fixed lease; a permit
    /// in watchdog mode gets the watchdog's lease back at its next renewal), in one call that
    /// first checks the permit is still held. [`valid_until`](Permit::valid_until) moves with
    /// it.
    ///
    /// # Errors
    /// [`Error::UnknownPermit`] when the permit is no longer held (its lease ended, or it was
    /// released by id): it then reports lost, [`LossReason::Gone`](keylatch_core::LossReason::Gone);
    /// [`Error::InvalidLease`]; [`Error::WrongType`]; Redis errors.
    ///
    /// # Cancel safety
    /// Dropped in flight, the extension may or may not have happened; the local deadline is
    /// then left as it was (which never outlasts the server's).
    pub async fn extend(&self, by: Duration) -> Result<()> {
        let result = self.guard.extend(by).await;
        self.unknown_if_not_held(result)
    }

    /// Sets what is left of the permit's lease on the server to `lease`, from now (server
    /// clock), shorter or longer, and leaves watchdog mode: the permit then comes back to the
    /// semaphore when that lease ends, unless extended again.
    ///
    /// # Errors
    /// As [`extend`](Permit::extend).
    ///
    /// # Cancel safety
    /// As [`extend`](Permit::extend); dropped in flight, the permit may have left watchdog mode
    /// already.
    pub async fn set_lease(&mut self, lease: Duration) -> Result<()> {
        let result = self.guard.set_lease(lease).await;
        self.unknown_if_not_held(result)
    }

    /// Switches the permit to watchdog mode: its lease is set to the client's watchdog timeout
    /// (checking it is still held), and the watchdog renews it from then on, as if acquired
    /// without a lease. [`set_lease`](Permit::set_lease) switches back.
    ///
    /// # Errors
    /// As [`extend`](Permit::extend).
    ///
    /// # Cancel safety
    /// Dropped in flight, the permit stays in the mode it had.
    pub async fn watchdog(&mut self) -> Result<()> {
        let result = self.guard.watchdog().await;
        self.unknown_if_not_held(result)
    }

    fn unknown_if_not_held(&self, result: Result<()>) -> Result<()> {
        result.map_err(|err| match err {
            Error::NotHeld { name } => Error::UnknownPermit {
                name,
                id: self.id.to_string(),
            },
            other => other,
        })
    }

    /// Gives the permit back and wakes the waiters.
    ///
    /// # Errors
    /// [`Error::UnknownPermit`] when it was no longer held (its lease ended, or it was released
    /// by id) — nothing is changed then; Redis errors.
    ///
    /// # Cancel safety
    /// The watchdog stops renewing at once. If the reply is lost, or the future is dropped
    /// before it, the release is sent again (releasing an id is idempotent), so it happens
    /// exactly once.
    pub async fn release(self) -> Result<()> {
        let Permit { id, guard, release } = self;
        guard.unlock().await.map_err(|err| match err {
            Error::NotHeld { name } => Error::UnknownPermit {
                name,
                id: id.to_string(),
            },
            other => other,
        })?;
        drop(release);
        Ok(())
    }

    /// Stops tracking the permit (no renewal, no release on drop) and returns its id. The
    /// permit stays taken until its current lease ends (for a watchdog-mode permit: at most the
    /// watchdog timeout) or until someone releases the id, from any process.
    pub fn forget(self) -> String {
        self.release.forgotten.store(true, Ordering::Release);
        self.id.to_string()
    }

    /// The permit as a plain [`LockGuard`] (for the shared lock trait).
    pub fn into_guard(self) -> LockGuard {
        self.guard
    }
}

/// Releases one permit id.
#[derive(Debug)]
pub(crate) struct PermitRelease {
    shared: Arc<Shared>,
    id: Arc<str>,
    forgotten: AtomicBool,
}

#[async_trait]
impl HoldRelease for PermitRelease {
    async fn release(&self, _owner: OwnerId) -> Result<()> {
        if self.forgotten.load(Ordering::Acquire) {
            return Ok(());
        }
        // Retried until the server answers, as a release after a lost reply (the guard's
        // unlock bounds the wait, then the background goes on).
        let client = &self.shared.client;
        let _ticket = client.track_release(&self.shared.name, 1);
        let call = self.shared.release_call(&[&*self.id]);
        match run_until_applied(client, &call).await? {
            (Value::Int(1), _) => Ok(()),
            // An earlier attempt whose reply was lost may have released it.
            (Value::Int(0), attempts) if attempts > 1 => Ok(()),
            (Value::Int(0), _) => Err(Error::NotHeld {
                name: self.shared.name.to_string(),
            }),
            _ => Err(unexpected("expirable_semaphore_release")),
        }
    }

    async fn release_if_count(&self, _owner: OwnerId, _expected: u64) -> Result<()> {
        // After a lost reply: releasing an id again is idempotent (an id is never handed out
        // twice), so it is retried until the server answers, while the client lives.
        let client = &self.shared.client;
        let _ticket = client.track_release(&self.shared.name, 1);
        let call = self.shared.release_call(&[&*self.id]);
        run_until_applied(client, &call).await?;
        Ok(())
    }
}

#[async_trait]
impl HoldExtend for PermitRelease {
    /// One script call on the permit's expiry in `{name}:timeout` (server clock): `By` adds to
    /// what is left, `To` sets it from now.
    async fn extend(&self, _owner: OwnerId, how: Extension) -> Result<Option<Duration>> {
        validate_lease(how.duration())?;
        let shared = &self.shared;
        let call = EXP_UPDATE
            .call()
            .key(&*shared.name)
            .key(&*shared.timeout_key)
            .key(&*shared.channel)
            .arg(&*self.id)
            .arg(lease_millis(how.duration()))
            .arg(if matches!(how, Extension::By(_)) {
                "1"
            } else {
                "0"
            });
        match shared.client.eval::<i64>(&call).await? {
            left if left >= 0 => Ok(Some(Duration::from_millis(left.unsigned_abs()))),
            _ => Ok(None),
        }
    }

    fn watchdog_renewal(&self) -> Option<(Renewal, Duration)> {
        Some((
            EXP_RENEW.renewal(),
            self.shared.client.config().watchdog_timeout,
        ))
    }
}
