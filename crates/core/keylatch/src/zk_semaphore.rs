//! The ZooKeeper side of the facade's semaphores: a name, the client, and the maximum the
//! handle was given (`with_permits`), turned into keylatch-zookeeper's `ZkSemaphore` (Curator's
//! `InterProcessSemaphoreV2`) at each call. ZooKeeper keeps no count: each client brings the
//! maximum, as Curator's `maxLeases`; without one, an acquisition is a typed error that says
//! so. Without the `zookeeper` feature the types are empty enums.
//!
//! May import: keylatch-core, keylatch-zookeeper, `zk.rs`, `future.rs`.

#[cfg(feature = "zookeeper")]
pub(crate) use on::*;

#[cfg(not(feature = "zookeeper"))]
pub(crate) use off::*;

/// What an acquisition on ZooKeeper answers when the handle has no maximum.
#[cfg_attr(not(feature = "zookeeper"), allow(dead_code))]
pub(crate) const NO_MAXIMUM: keylatch_core::Error = keylatch_core::Error::InvalidPermits {
    reason: "on ZooKeeper a semaphore takes its maximum from each client (Curator's maxLeases): \
             give it with `with_permits(n)`",
};

/// The reason of what a ZooKeeper semaphore refuses, per kind of method.
pub(crate) mod reason {
    /// Setting, adding or draining the count.
    pub(crate) const COUNT: &str = "ZooKeeper keeps no count of permits: each client gives the maximum (`with_permits`), as Curator's maxLeases";
    /// Giving permits back by count or by id.
    pub(crate) const BY_ID: &str = "a ZooKeeper permit is a lease node of its holder's session: give it back through its permit, or end the session";
    /// Leases, expiry, adoption.
    pub(crate) const LEASE: &str =
        "a ZooKeeper permit has no lease: it is held until released or until its session ends";
    /// Several permits in one call.
    pub(crate) const MANY: &str = "the ZooKeeper semaphore takes one lease per acquisition";
    /// Deleting the semaphore.
    pub(crate) const DELETE: &str =
        "a ZooKeeper semaphore's lease nodes belong to their holders' sessions";
}

#[cfg(feature = "zookeeper")]
mod on {
    use std::sync::Arc;

    use keylatch_core::{AcquireOptions, DistributedLock, LockGuard, Result};
    use keylatch_zookeeper::{ZkSemaphore, ZkSemaphoreLock};

    use super::NO_MAXIMUM;
    use crate::future::Boxed;
    use crate::zk::ZkClient;

    /// A permit of a ZooKeeper semaphore.
    pub(crate) type ZkSemPermit = keylatch_zookeeper::ZkPermit;

    /// A semaphore by name, with the maximum its handle was given.
    #[derive(Clone, Debug)]
    pub(crate) struct ZkSem {
        client: ZkClient,
        name: Arc<str>,
        max: Option<u32>,
    }

    impl ZkSem {
        pub(crate) fn new(client: &ZkClient, name: &str) -> ZkSem {
            ZkSem {
                client: client.clone(),
                name: Arc::from(name),
                max: None,
            }
        }

        pub(crate) fn name(&self) -> &str {
            &self.name
        }

        pub(crate) fn with_permits(&self, permits: u32) -> ZkSem {
            ZkSem {
                max: Some(permits),
                ..self.clone()
            }
        }

        /// The maximum, or the error that asks for one.
        pub(crate) fn max(&self) -> Result<u32> {
            self.max.ok_or(NO_MAXIMUM)
        }

        fn semaphore(&self) -> Result<ZkSemaphore> {
            let max = self.max()?;
            self.client.get().semaphore(&self.name, max)
        }

        pub(crate) fn acquire(
            &self,
            options: AcquireOptions,
        ) -> Boxed<'_, Result<Option<ZkSemPermit>>> {
            Box::pin(async move { self.semaphore()?.acquire_with(options).await })
        }

        /// How many lease nodes there are (held permits, this client's and others').
        pub(crate) fn held(&self) -> Boxed<'_, Result<u64>> {
            Box::pin(async move {
                let leases = self.client.get().contenders(&self.name, 0).await?.leases;
                Ok(leases.len() as u64)
            })
        }

        /// The maximum less the permits held (none when more are held, as after a client
        /// with a larger maximum took some).
        pub(crate) fn available(&self) -> Boxed<'_, Result<u64>> {
            Box::pin(async move {
                let max = self.max()?;
                Ok(u64::from(max).saturating_sub(self.held().await?))
            })
        }

        pub(crate) fn as_lock(&self) -> ZkSemLock {
            ZkSemLock(self.clone())
        }
    }

    /// A [`ZkSem`] as a lock (keylatch-zookeeper's `ZkSemaphoreLock`, made at each call).
    #[derive(Clone, Debug)]
    pub(crate) struct ZkSemLock(ZkSem);

    impl ZkSemLock {
        pub(crate) fn name(&self) -> &str {
            &self.0.name
        }

        fn lock(&self) -> Result<ZkSemaphoreLock> {
            Ok(self.0.semaphore()?.as_lock())
        }

        pub(crate) fn acquire(
            &self,
            options: AcquireOptions,
        ) -> Boxed<'_, Result<Option<LockGuard>>> {
            Box::pin(async move { self.lock()?.acquire(options).await })
        }

        pub(crate) fn is_locked(&self) -> Boxed<'_, Result<bool>> {
            Box::pin(async move { self.lock()?.is_locked().await })
        }

        pub(crate) fn force_unlock(&self) -> Boxed<'_, Result<bool>> {
            Box::pin(async move { self.lock()?.force_unlock().await })
        }
    }
}

#[cfg(not(feature = "zookeeper"))]
mod off {
    use keylatch_core::{AcquireOptions, LockGuard, Result};

    use crate::zk::ZkClient;

    /// No value exists without the `zookeeper` feature.
    #[derive(Debug)]
    pub(crate) enum ZkSemPermit {}

    /// No value exists without the `zookeeper` feature.
    #[derive(Clone, Debug)]
    pub(crate) enum ZkSem {}

    /// No value exists without the `zookeeper` feature.
    #[derive(Clone, Debug)]
    pub(crate) enum ZkSemLock {}

    #[allow(clippy::unused_async, dead_code)]
    impl ZkSem {
        pub(crate) fn new(client: &ZkClient, _name: &str) -> ZkSem {
            match *client {}
        }
        pub(crate) fn name(&self) -> &str {
            match *self {}
        }
        pub(crate) fn with_permits(&self, _permits: u32) -> ZkSem {
            match *self {}
        }
        pub(crate) fn max(&self) -> Result<u32> {
            match *self {}
        }
        pub(crate) async fn acquire(&self, _: AcquireOptions) -> Result<Option<ZkSemPermit>> {
            match *self {}
        }
        pub(crate) async fn held(&self) -> Result<u64> {
            match *self {}
        }
        pub(crate) async fn available(&self) -> Result<u64> {
            match *self {}
        }
        pub(crate) fn as_lock(&self) -> ZkSemLock {
            match *self {}
        }
    }

    #[allow(clippy::unused_async, dead_code)]
    impl ZkSemLock {
        pub(crate) fn name(&self) -> &str {
            match *self {}
        }
        pub(crate) async fn acquire(&self, _: AcquireOptions) -> Result<Option<LockGuard>> {
            match *self {}
        }
        pub(crate) async fn is_locked(&self) -> Result<bool> {
            match *self {}
        }
        pub(crate) async fn force_unlock(&self) -> Result<bool> {
            match *self {}
        }
    }

    #[allow(dead_code)]
    impl ZkSemPermit {
        pub(crate) fn id(&self) -> &str {
            match *self {}
        }
        pub(crate) fn semaphore_name(&self) -> &str {
            match *self {}
        }
        pub(crate) fn valid_until(&self) -> Option<tokio::time::Instant> {
            match *self {}
        }
        pub(crate) fn is_lost(&self) -> bool {
            match *self {}
        }
        pub(crate) fn loss_reason(&self) -> Option<keylatch_core::LossReason> {
            match *self {}
        }
        pub(crate) fn lost(&self) -> std::future::Pending<()> {
            match *self {}
        }
        #[allow(clippy::unused_async)]
        pub(crate) async fn release(self) -> Result<()> {
            match self {}
        }
        pub(crate) fn forget(self) -> String {
            match self {}
        }
        pub(crate) fn into_guard(self) -> LockGuard {
            match self {}
        }
    }
}
