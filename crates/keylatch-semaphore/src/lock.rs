//! `SemaphoreLock`: one permit of a [`Semaphore`] behind the shared lock trait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::redis::Value;
use keylatch_core::{
    AcquireOptions, Client, DistributedLock, Error, HoldRelease, LockGuard, MAX_LEASE, Owner,
    OwnerId, Renewal, Result, validate_lease, validate_name,
};
use tokio::time::Instant;

use crate::request::with_keys;
use crate::request::{MAX_PERMITS, run_idempotent};
use crate::scripts::ADD;
use crate::semaphore::{Semaphore, Shared, unexpected};

/// One permit of a [`Semaphore`] as a [`DistributedLock`]: `lock` takes a permit, and the
/// [`LockGuard`] gives it back on [`unlock`](LockGuard::unlock) or drop. With `N` permits, up
/// to `N` guards exist at once across every process.
///
/// - **Leases**: the plain semaphore's permits never expire on the server. Without a lease
///   the guard holds its permit until it is unlocked or dropped (the guard is never `lost`).
///   With a lease (`lock_with_lease`, `try_lock_for(.., Some(lease))`) this process gives the
///   permit back when the lease ends, and the guard reports `lost` then; `unlock` afterwards
///   returns [`Error::NotHeld`]. If the process dies first, the permit is never returned: use
///   [`PermitExpirableSemaphore::as_lock`](crate::PermitExpirableSemaphore::as_lock) when a
///   crashed holder's permit must come back.
/// - **Fairness**: none (see [`Semaphore`]). **Reentrancy**: none; each `lock` takes another
///   permit, so a task holding the last permit that locks again waits for someone else.
/// - `is_locked` is true when no permit is available; `force_unlock` changes nothing and
///   returns `false` (permits are not owned, so there is no holder to evict; give permits back
///   with [`Semaphore::release`]).
///
/// ```no_run
/// # async fn demo(client: keylatch_core::Client) -> keylatch_core::Result<()> {
/// use std::sync::Arc;
/// use keylatch_core::DistributedLock;
/// use keylatch_semaphore::Semaphore;
///
/// let semaphore = Semaphore::new(&client, "crawlers");
/// semaphore.try_set_permits(3).await?;
/// let lock: Arc<dyn DistributedLock> = Arc::new(semaphore.as_lock());
/// let guard = lock.lock().await?; // one of 3 permits
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SemaphoreLock {
    semaphore: Semaphore,
}

impl SemaphoreLock {
    /// The guard form of the semaphore `name` (as [`Semaphore::as_lock`]).
    pub fn new(client: &Client, name: &str) -> SemaphoreLock {
        SemaphoreLock::from_semaphore(Semaphore::new(client, name))
    }

    pub(crate) fn from_semaphore(semaphore: Semaphore) -> SemaphoreLock {
        SemaphoreLock { semaphore }
    }

    /// The semaphore behind it.
    pub fn semaphore(&self) -> &Semaphore {
        &self.semaphore
    }

    fn guard(&self, lease: Option<Duration>) -> LockGuard {
        let shared = &self.semaphore.shared;
        let client = &shared.client;
        let release = Arc::new(PermitRelease {
            shared: shared.clone(),
            marker: shared.requests.marker(),
            done: AtomicBool::new(false),
            timer: Mutex::new(None),
            first_sent: OnceLock::new(),
        });
        // The hold is registered so that `lost` and the client's counters see it; nothing
        // renews it (the permit has no expiry on the server).
        let hold = client.watchdog().register(
            &shared.name,
            &release.marker,
            lease.unwrap_or(MAX_LEASE),
            Renewal::Lease,
            Instant::now(),
        );
        if let Some(lease) = lease {
            release.start_timer(lease);
        }
        LockGuard::new(
            client.clone(),
            shared.name.clone(),
            client.owner_id(Owner::CurrentTask),
            release,
            hold,
            None,
        )
    }
}

#[async_trait]
impl DistributedLock for SemaphoreLock {
    fn name(&self) -> &str {
        self.semaphore.name()
    }

    async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        validate_name(self.name())?;
        if let Some(lease) = options.lease() {
            validate_lease(lease)?;
        }
        let deadline = options.wait().map(|wait| Instant::now() + wait);
        if !self.semaphore.acquire_until(1, deadline).await? {
            return Ok(None);
        }
        Ok(Some(self.guard(options.lease())))
    }

    async fn is_locked(&self) -> Result<bool> {
        Ok(self.semaphore.available_permits().await? == 0)
    }

    async fn force_unlock(&self) -> Result<bool> {
        validate_name(self.name())?;
        Ok(false)
    }
}

/// Gives back the one permit of one guard, exactly once: its release carries a fixed marker,
/// so a retry after a lost reply does not release twice.
#[derive(Debug)]
struct PermitRelease {
    shared: Arc<Shared>,
    marker: String,
    done: AtomicBool,
    timer: Mutex<Option<tokio::task::AbortHandle>>,
    /// When the release was first sent: retries must reach the server within its window.
    first_sent: OnceLock<Instant>,
}

impl PermitRelease {
    /// Gives the permit back when `lease` ends, unless the guard did first.
    fn start_timer(self: &Arc<Self>, lease: Duration) {
        let me = self.clone();
        let task = tokio::spawn(async move {
            tokio::time::sleep(lease).await;
            if !me.done.swap(true, Ordering::AcqRel) {
                let client = me.shared.client.clone();
                client.spawn_background(async move { me.send(true).await });
            }
        });
        *self.timer.lock().expect("timer lock") = Some(task.abort_handle());
    }

    /// Sends the release; `retry` retries transient failures within the request window.
    async fn send(&self, retry: bool) -> Result<()> {
        let requests = &self.shared.requests;
        let settled = requests.take_settled();
        let call = ADD
            .call()
            .key(&*self.shared.name)
            .key(&*self.shared.channel)
            .key(&self.marker);
        let call = with_keys(call, &settled)
            .arg(1)
            .arg(requests.window_ms())
            .arg(MAX_PERMITS);
        let since = *self.first_sent.get_or_init(Instant::now);
        let reply = if retry {
            run_idempotent(&self.shared.client, &call, since).await?.0
        } else {
            self.shared.client.eval_value(&call).await?
        };
        match reply {
            Value::Int(1) => {
                requests.settle(self.marker.clone());
                Ok(())
            }
            Value::Int(code @ (-1 | -2)) => {
                requests.give_back(settled);
                Err(crate::request::refused(code))
            }
            _ => Err(unexpected("semaphore_add")),
        }
    }
}

#[async_trait]
impl HoldRelease for PermitRelease {
    async fn release(&self, _owner: OwnerId) -> Result<()> {
        if self.done.swap(true, Ordering::AcqRel) {
            // The lease ended first and gave the permit back.
            return Err(Error::NotHeld {
                name: self.shared.name.to_string(),
            });
        }
        if let Some(timer) = self.timer.lock().expect("timer lock").take() {
            timer.abort();
        }
        self.send(false).await
    }

    async fn release_if_count(&self, _owner: OwnerId, _expected: u64) -> Result<()> {
        // Called after a lost reply: the same marker makes sending again safe.
        self.send(true).await
    }
}
