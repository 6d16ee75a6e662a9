//! `SemaphoreLock`: one permit of a [`Semaphore`] behind the shared lock trait.

use async_trait::async_trait;
use keylatch_core::{AcquireOptions, DistributedLock, Error, LockGuard, Result};
use keylatch_redis::Client;

use crate::semaphore::Semaphore;
use crate::semaphore_permit::SemaphorePermit;

/// One permit of a [`Semaphore`] as a [`DistributedLock`]: `lock` takes a permit, and the
/// [`LockGuard`] gives it back on [`unlock`](LockGuard::unlock) or drop. With `N` permits, up
/// to `N` guards exist at once across every process.
///
/// - **Leases**: the plain semaphore's permits never expire on the server. Without a lease
///   the guard holds its permit until it is unlocked or dropped (the guard is never `lost`).
///   With a lease (`lock_with_lease`, `try_lock_for(.., Some(lease))`) this process gives the
///   permit back when the lease ends, and the guard reports `lost` then; `unlock` afterwards
///   returns [`Error::NotHeld`](keylatch_core::Error::NotHeld). If the process dies first, the permit is never returned: use
///   [`PermitExpirableSemaphore::as_lock`](crate::PermitExpirableSemaphore::as_lock) when a
///   crashed holder's permit must come back.
/// - **Fairness**: none (see [`Semaphore`]). **Reentrancy**: none; each `lock` takes another
///   permit, so a task holding the last permit that locks again waits for someone else.
/// - `is_locked` is true when no permit is available; `force_unlock` changes nothing and
///   fails with [`Error::Unsupported`] (permits are not owned, so there is no holder to
///   evict; give permits back with [`Semaphore::release`]).
///
/// ```no_run
/// # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
/// use std::sync::Arc;
/// use keylatch::DistributedLock;
///
/// let semaphore = client.semaphore("crawlers");
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

impl Semaphore {
    /// The guard form: a [`DistributedLock`](keylatch_core::DistributedLock) whose lock takes
    /// one permit and whose guard gives it back on unlock or drop.
    pub fn as_lock(&self) -> SemaphoreLock {
        SemaphoreLock::from_semaphore(self.clone())
    }
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
}

#[async_trait]
impl DistributedLock for SemaphoreLock {
    fn name(&self) -> &str {
        self.semaphore.name()
    }

    async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        let permit = self.semaphore.acquire_with(options).await?;
        Ok(permit.map(SemaphorePermit::into_guard))
    }

    async fn is_locked(&self) -> Result<bool> {
        Ok(self.semaphore.available_permits().await? == 0)
    }

    async fn force_unlock(&self) -> Result<bool> {
        self.semaphore.shared.client.validate_name(self.name())?;
        Err(Error::Unsupported {
            primitive: "semaphore",
            operation: "force_unlock",
            reason: "permits have no holder to evict; give permits back with Semaphore::release",
        })
    }
}
