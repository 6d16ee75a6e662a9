//! `ExpirableSemaphoreLock`: one permit of a [`PermitExpirableSemaphore`] behind the shared
//! lock trait.

use async_trait::async_trait;
use keylatch_core::{AcquireOptions, DistributedLock, Error, LockGuard, Result};
use keylatch_redis::Client;

use crate::expirable::PermitExpirableSemaphore;

/// One permit of a [`PermitExpirableSemaphore`] as a [`DistributedLock`]: `lock` takes a
/// permit, and the [`LockGuard`] gives it back on [`unlock`](LockGuard::unlock) or drop. With
/// `N` permits, up to `N` guards exist at once across every process.
///
/// - **Leases** as the trait says: without a lease the permit is renewed by the watchdog while
///   the guard lives, so a crashed holder's permit comes back within the watchdog timeout;
///   with a lease it ends after the lease. `lost` fires as for any lock.
/// - **Fairness**: none. **Reentrancy**: none; each `lock` takes another permit.
/// - `is_locked` is true when no permit is available; `force_unlock` changes nothing and
///   fails with [`Error::Unsupported`] (permits belong to their ids; release one by id with
///   [`PermitExpirableSemaphore::release`]).
#[derive(Clone, Debug)]
pub struct ExpirableSemaphoreLock {
    semaphore: PermitExpirableSemaphore,
}

impl PermitExpirableSemaphore {
    /// The guard form: a [`DistributedLock`](keylatch_core::DistributedLock) whose lock takes
    /// one permit.
    pub fn as_lock(&self) -> ExpirableSemaphoreLock {
        ExpirableSemaphoreLock::from_semaphore(self.clone())
    }
}

impl ExpirableSemaphoreLock {
    /// The guard form of the permit-expirable semaphore `name` (as
    /// [`PermitExpirableSemaphore::as_lock`]).
    pub fn new(client: &Client, name: &str) -> ExpirableSemaphoreLock {
        ExpirableSemaphoreLock::from_semaphore(PermitExpirableSemaphore::new(client, name))
    }

    pub(crate) fn from_semaphore(semaphore: PermitExpirableSemaphore) -> ExpirableSemaphoreLock {
        ExpirableSemaphoreLock { semaphore }
    }

    /// The semaphore behind it.
    pub fn semaphore(&self) -> &PermitExpirableSemaphore {
        &self.semaphore
    }
}

#[async_trait]
impl DistributedLock for ExpirableSemaphoreLock {
    fn name(&self) -> &str {
        self.semaphore.name()
    }

    async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        let permit = self.semaphore.acquire_with(options).await?;
        Ok(permit.map(|p| p.into_guard()))
    }

    async fn is_locked(&self) -> Result<bool> {
        Ok(self.semaphore.available_permits().await? == 0)
    }

    async fn force_unlock(&self) -> Result<bool> {
        self.semaphore.shared.client.validate_name(self.name())?;
        Err(Error::Unsupported {
            primitive: "permit-expirable semaphore",
            operation: "force_unlock",
            reason: "permits belong to their ids; release one with PermitExpirableSemaphore::release",
        })
    }
}
