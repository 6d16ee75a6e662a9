//! `SemaphorePermit`: permits of a plain [`Semaphore`](crate::Semaphore), given back on drop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::hold::{Extension, HoldExtend};
use keylatch_core::{
    Error, HoldKey, HoldRelease, LockGuard, MAX_LEASE, Owner, OwnerId, Renewal, Result,
};
use keylatch_redis::redis::Value;
use tokio::time::Instant;

use crate::counts::{MAX_PERMITS, refused};
use crate::retry::{run_until_applied, with_keys};
use crate::scripts::ADD;
use crate::semaphore_shared::{Shared, unexpected};

/// Permits taken from a [`Semaphore`](crate::Semaphore), as tokio's `SemaphorePermit`: they go
/// back when the permit is [released](SemaphorePermit::release) or dropped.
///
/// - [`release`](SemaphorePermit::release) gives them back and reports errors; dropping the
///   permit gives them back in the background (exactly once, even after a lost reply). A
///   release the server does not confirm is retried until it does, for as long as the client
///   lives, however long it is unreachable (see [`Semaphore`](crate::Semaphore) for the one
///   case this can give them back twice); [`Client::shutdown`](keylatch_redis::Client::shutdown)
///   lists those still unconfirmed when it gives up.
/// - [`forget`](SemaphorePermit::forget) keeps them taken, for a deliberate hand-over: whoever
///   takes over gives them back with [`Semaphore::release`](crate::Semaphore::release).
/// - With a lease (`acquire_with_lease`, `try_acquire_for(.., Some(lease))`) this process
///   gives them back when the lease ends, and [`lost`](SemaphorePermit::lost) completes then.
///   The plain semaphore's permits never expire on the server: if the process dies holding
///   them, they are gone until someone adds them back. Use the
///   [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore) when a crashed holder's
///   permits must come back.
/// - Having no lease on the server (Redisson's `RSemaphore`), they have none to change: the
///   guard's [`extend`](LockGuard::extend), [`set_lease`](LockGuard::set_lease) and
///   [`watchdog`](LockGuard::watchdog) (after [`into_guard`](SemaphorePermit::into_guard))
///   fail with [`Error::Unsupported`] and change nothing. A
///   [`Permit`](crate::Permit) of the permit-expirable semaphore can change its lease.
/// - [`Client::shutdown`](keylatch_redis::Client::shutdown) gives back every permit the client
///   still holds: call it before the program ends.
#[must_use = "dropping a SemaphorePermit gives its permits back (in the background); keep it while you use them, or `forget()` it to keep them taken"]
#[derive(Debug)]
pub struct SemaphorePermit {
    permits: u32,
    guard: LockGuard,
    release: Arc<PermitRelease>,
}

impl SemaphorePermit {
    /// Wraps `permits` permits just taken; `lease` starts the local give-back timer.
    pub(crate) fn new(
        shared: &Arc<Shared>,
        permits: u32,
        lease: Option<Duration>,
    ) -> SemaphorePermit {
        let client = &shared.client;
        let release = Arc::new(PermitRelease {
            shared: shared.clone(),
            permits,
            marker: shared.requests.marker(),
            done: AtomicBool::new(false),
            timer: Mutex::new(None),
        });
        // The hold is registered so that `lost`, the client's counters and its shutdown see
        // it; nothing renews it (the permits have no expiry on the server).
        let hold = client.watchdog().register(
            HoldKey::new(&shared.name, &release.marker),
            lease.unwrap_or(MAX_LEASE),
            Renewal::Lease,
            Instant::now(),
        );
        if let Some(lease) = lease {
            release.start_timer(lease);
        }
        let guard = LockGuard::new(
            client.background().clone(),
            shared.name.clone(),
            client.owner_id(Owner::unique()),
            release.clone(),
            hold,
            None,
        )
        .extendable(release.clone());
        SemaphorePermit {
            permits,
            guard,
            release,
        }
    }

    /// How many permits this holds.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The semaphore's name.
    pub fn semaphore_name(&self) -> &str {
        self.guard.name()
    }

    /// The local instant until which the permits are held, or `None` once they are lost.
    pub fn valid_until(&self) -> Option<Instant> {
        self.guard.valid_until()
    }

    /// Whether the permits are lost (see [`lost`](SemaphorePermit::lost)).
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// Why the permit is lost, or `None` while it is held (see
    /// [`LockGuard::loss_reason`](keylatch_core::LockGuard::loss_reason)).
    pub fn loss_reason(&self) -> Option<keylatch_core::LossReason> {
        self.guard.loss_reason()
    }

    /// Completes when the permits are no longer held: a lease given at acquire ran out (this
    /// process gave them back), or the client shut down. The future owns what it needs.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.guard.lost()
    }

    /// Gives the permits back and wakes the waiters.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when a lease had already given them back (nothing changed);
    /// [`Error::Closed`] after the client's shutdown (which gave them back);
    /// [`Error::Timeout`] when the server did not confirm the release within
    /// [`Config::release_timeout`](keylatch_redis::Config::release_timeout) (it goes on in the
    /// background until it does); Redis errors.
    ///
    /// # Cancel safety
    /// A lost reply, or a future dropped before it, is settled by sending the release again
    /// with the same request marker: the permits go back exactly once.
    pub async fn release(self) -> Result<()> {
        self.guard.unlock().await
    }

    /// Keeps the permits taken and returns how many: no release on drop, no lease timer. Give
    /// them back with [`Semaphore::release`](crate::Semaphore::release), from any process.
    pub fn forget(self) -> u32 {
        self.release.done.store(true, Ordering::Release);
        if let Some(timer) = self.release.timer.lock().expect("timer lock").take() {
            timer.abort();
        }
        self.guard.forget();
        self.permits
    }

    /// The permits as a plain [`LockGuard`] (for the shared lock trait). Its `extend`,
    /// `set_lease` and `watchdog` fail with [`Error::Unsupported`]: the permits have no lease on
    /// the server.
    pub fn into_guard(self) -> LockGuard {
        self.guard
    }
}

/// Gives back the permits of one guard, exactly once: the release carries a fixed marker, so a
/// retry after a lost reply does not release twice.
#[derive(Debug)]
struct PermitRelease {
    shared: Arc<Shared>,
    permits: u32,
    marker: String,
    done: AtomicBool,
    timer: Mutex<Option<tokio::task::AbortHandle>>,
}

impl PermitRelease {
    /// Gives the permits back when `lease` ends, unless the guard did first.
    fn start_timer(self: &Arc<Self>, lease: Duration) {
        let me = self.clone();
        let task = tokio::spawn(async move {
            tokio::time::sleep(lease).await;
            if !me.done.swap(true, Ordering::AcqRel) {
                let client = me.shared.client.clone();
                client.spawn_background(async move { me.send().await });
            }
        });
        *self.timer.lock().expect("timer lock") = Some(task.abort_handle());
    }

    /// Sends the release, listed with the client until it ends, and retries transient failures
    /// until the server answers, while the client lives (the marker is counted from when the
    /// server applied the release, so a retry of one it applied does nothing). Its caller
    /// bounds the wait: the guard's unlock by the release timeout, then the background.
    async fn send(&self) -> Result<()> {
        let client = &self.shared.client;
        let _ticket = client.track_release(&self.shared.name, u64::from(self.permits));
        let requests = &self.shared.requests;
        let settled = requests.take_settled();
        let call = ADD
            .call()
            .key(&*self.shared.name)
            .key(&*self.shared.channel)
            .key(&self.marker);
        let call = with_keys(call, settled.keys())
            .arg(self.permits)
            .arg(requests.release_window_ms())
            .arg(MAX_PERMITS);
        let (reply, _) = run_until_applied(client, &call).await?;
        match reply {
            Value::Int(1) => {
                settled.deleted();
                requests.settle_release(self.marker.clone());
                Ok(())
            }
            Value::Int(code @ (-1 | -2)) => {
                settled.give_back();
                Err(refused(code))
            }
            _ => Err(unexpected("semaphore_add")),
        }
    }
}

#[async_trait]
impl HoldRelease for PermitRelease {
    async fn release(&self, _owner: OwnerId) -> Result<()> {
        if self.done.swap(true, Ordering::AcqRel) {
            // The lease ended first, or the client's shutdown, and gave the permits back.
            if self.shared.client.is_closed() {
                return Err(Error::Closed);
            }
            return Err(Error::NotHeld {
                name: self.shared.name.to_string(),
            });
        }
        if let Some(timer) = self.timer.lock().expect("timer lock").take() {
            timer.abort();
        }
        self.send().await
    }

    async fn release_if_count(&self, _owner: OwnerId, _expected: u64) -> Result<()> {
        // Called after a lost reply: the same marker makes sending again safe.
        self.send().await
    }
}

/// The plain semaphore's permits have no lease on the server: changing one is refused with a
/// reason that says so (the guard's generic refusal would not).
#[async_trait]
impl HoldExtend for PermitRelease {
    async fn extend(&self, _owner: OwnerId, _how: Extension) -> Result<Option<Duration>> {
        Err(Error::Unsupported {
            primitive: "semaphore",
            operation: "extend",
            reason: "a semaphore's permits have no lease on the server (Redisson's RSemaphore): \
                     they are held until released; use a PermitExpirableSemaphore for permits \
                     with a lease",
        })
    }

    fn watchdog_renewal(&self) -> Option<(Renewal, Duration)> {
        None
    }
}
