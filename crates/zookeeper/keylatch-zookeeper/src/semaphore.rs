//! The semaphore, Curator's `InterProcessSemaphoreV2`: under the semaphore's path, a mutex in
//! `locks/` is held while a lease is taken, and each permit is an ephemeral-sequential node in
//! `leases/`; a lease is held once at most `max_leases` nodes are there. A crashed holder's
//! permits end with its session. The maximum is fixed, or read from a Curator `SharedCount`
//! node (`shared_count`).
//!
//! May import: keylatch-core, zookeeper-client, `session`, `node`, `holds`, `mutex`, `path`,
//! `shared_count`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::lock::{Attempt, retrying};
use keylatch_core::{AcquireOptions, DistributedLock, Error, LockGuard, Owner, Result, StoreError};
use tokio::time::Instant;

use crate::holds::hold_new;
use crate::mutex::{LOCK_NAME, lease_unsupported, predecessor};
use crate::node::{NodeGone, Waited, children, contend, create, sequence};
use crate::path::lock_path;
use crate::session::Shared;
use crate::shared_count::read_and_watch;

/// Curator's lease node name (`InterProcessSemaphoreV2`).
pub(crate) const LEASE_NAME: &str = "lease-";

/// A counting semaphore on ZooKeeper, laid out as Curator's `InterProcessSemaphoreV2`: at most
/// `max_leases` permits are held at once, across every client using the same path and the
/// same maximum (the maximum is a convention of its users, as in Curator).
///
/// Made by [`ZkClient::semaphore`](crate::ZkClient::semaphore). With
/// [`with_shared_count`](ZkSemaphore::with_shared_count), the maximum is read from a Curator
/// `SharedCount` node instead, and followed as it changes (`InterProcessSemaphoreV2`'s
/// `SharedCountReader` constructor).
#[derive(Clone)]
pub struct ZkSemaphore {
    shared: Arc<Shared>,
    name: Arc<str>,
    path: Arc<str>,
    leases: Arc<str>,
    locks: Arc<str>,
    max_leases: u32,
    count: Option<Arc<str>>,
}

impl fmt::Debug for ZkSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkSemaphore")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("max_leases", &self.max_leases)
            .field("count", &self.count)
            .finish()
    }
}

/// One permit of a [`ZkSemaphore`], held by this client: its lease node, and the release.
/// Dropping it gives it back in the background; [`lost`](ZkPermit::lost) completes when the
/// session ends.
#[must_use = "dropping a ZkPermit gives it back (in the background)"]
#[derive(Debug)]
pub struct ZkPermit {
    id: String,
    guard: LockGuard,
}

impl ZkPermit {
    /// The lease node's name (`_c_<uuid>-lease-<sequence>`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The semaphore's name.
    pub fn semaphore_name(&self) -> &str {
        self.guard.name()
    }

    /// The local instant until which the permit is known held (the session's), or `None`
    /// once it is lost.
    pub fn valid_until(&self) -> Option<Instant> {
        self.guard.valid_until()
    }

    /// Whether the permit is lost (its session ended).
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// Why the permit is lost, or `None` while it is held.
    pub fn loss_reason(&self) -> Option<keylatch_core::LossReason> {
        self.guard.loss_reason()
    }

    /// Completes when the permit is lost. The future owns what it needs.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.guard.lost()
    }

    /// Gives the permit back (deletes its lease node).
    ///
    /// # Errors
    /// [`Error::UnknownPermit`] when it was no longer held (its session ended); store errors.
    ///
    /// # Cancel safety
    /// A dropped release finishes in the background.
    pub async fn release(self) -> Result<()> {
        let ZkPermit { id, guard } = self;
        guard.unlock().await.map_err(|err| match err {
            Error::NotHeld { name } => Error::UnknownPermit { name, id },
            other => other,
        })
    }

    /// Stops tracking the permit and returns its id: no release on drop. Its lease node stays
    /// until the session ends (the client's shutdown, or a session expiry), or until someone
    /// deletes the node.
    pub fn forget(self) -> String {
        self.guard.forget();
        self.id
    }

    /// The permit as a plain [`LockGuard`].
    pub fn into_guard(self) -> LockGuard {
        self.guard
    }
}

impl ZkSemaphore {
    /// # Errors
    /// [`Error::InvalidPermits`] for a maximum of zero.
    pub(crate) fn new(
        shared: Arc<Shared>,
        name: &str,
        path: String,
        max_leases: u32,
    ) -> Result<ZkSemaphore> {
        if max_leases == 0 {
            return Err(Error::InvalidPermits {
                reason: "a semaphore needs at least one lease",
            });
        }
        Ok(ZkSemaphore {
            shared,
            name: Arc::from(name),
            leases: Arc::from(format!("{path}/leases")),
            locks: Arc::from(format!("{path}/locks")),
            path: Arc::from(path),
            max_leases,
            count: None,
        })
    }

    /// The same semaphore, its maximum read from the Curator `SharedCount` node `name` (named
    /// as [`ZkClient::lock`](crate::ZkClient::lock)'s: a path when it starts with `/`): the
    /// node's data is the count, a 4-byte big-endian integer, as Curator's `SharedCount`
    /// writes it. A lease is held while at most that many lease nodes exist, checked again
    /// whenever the count changes (a waiter is granted a lease as soon as the count rises
    /// above the leases held). A count that falls below the leases held takes none back, as
    /// in Curator. A missing node is created with this semaphore's `max_leases` as the seed,
    /// as a Curator `SharedCount(client, path, seed)` does when started.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for a name that is no valid znode path. Acquisitions fail with
    /// [`BadSharedCount`](crate::BadSharedCount) as the source of [`Error::Store`] when the
    /// node's data is not a count.
    pub fn with_shared_count(&self, name: &str) -> Result<ZkSemaphore> {
        let path = lock_path(&self.shared.base, name)?;
        Ok(ZkSemaphore {
            count: Some(Arc::from(path)),
            ..self.clone()
        })
    }

    /// The shared count node the maximum is read from, if any.
    pub fn shared_count_path(&self) -> Option<&str> {
        self.count.as_deref()
    }

    /// The maximum now: the shared count's value, or the fixed maximum.
    ///
    /// # Errors
    /// As [`with_shared_count`](ZkSemaphore::with_shared_count)'s acquisitions; store errors.
    pub async fn current_max_leases(&self) -> Result<i64> {
        Ok(self.maximum().await?.0)
    }

    /// The maximum now, and a watch on the shared count when there is one.
    async fn maximum(&self) -> Result<(i64, Option<zookeeper_client::OneshotWatcher>)> {
        let Some(count) = &self.count else {
            return Ok((i64::from(self.max_leases), None));
        };
        let seed = i32::try_from(self.max_leases).unwrap_or(i32::MAX);
        let (value, watcher) = read_and_watch(&self.shared, count, seed).await?;
        Ok((i64::from(value), Some(watcher)))
    }

    /// The semaphore's znode.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The maximum number of permits held at once (with a shared count: the seed of a count
    /// node created by this semaphore; see
    /// [`current_max_leases`](ZkSemaphore::current_max_leases)).
    pub fn max_leases(&self) -> u32 {
        self.max_leases
    }

    /// Waits for a permit as long as it takes.
    ///
    /// # Errors
    /// [`Error::Closed`] after the shutdown; store errors.
    ///
    /// # Cancel safety
    /// Cancel safe: the nodes of a dropped acquisition are deleted in the background.
    pub async fn acquire(&self) -> Result<ZkPermit> {
        keylatch_core::unbounded(self.acquire_with(AcquireOptions::new()).await)
    }

    /// Takes a permit if one is free now.
    ///
    /// # Errors
    /// As [`acquire`](ZkSemaphore::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](ZkSemaphore::acquire).
    pub async fn try_acquire(&self) -> Result<Option<ZkPermit>> {
        self.acquire_with(AcquireOptions::new().with_wait(Duration::ZERO))
            .await
    }

    /// Waits for a permit within the options' wait bound; `None` when it passed first.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a fixed lease; as [`acquire`](ZkSemaphore::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](ZkSemaphore::acquire).
    pub async fn acquire_with(&self, options: AcquireOptions) -> Result<Option<ZkPermit>> {
        lease_unsupported("zookeeper semaphore", &options)?;
        let background = &self.shared.background;
        let mut acquisition = background.begin_acquisition("zookeeper_semaphore")?;
        acquisition.naming(&self.name);
        let owner = Owner::unique().resolve(self.shared.id);
        acquisition.owned_by(owner);
        let deadline = options.deadline();
        // The mutex around taking a lease.
        let Some((mutex, mutex_undo)) = contend(
            &self.shared,
            &self.locks,
            LOCK_NAME,
            &[LOCK_NAME],
            &[],
            deadline,
            predecessor,
        )
        .await?
        else {
            acquisition.finish("timed_out");
            return Ok(None);
        };
        let taken = self
            .take_lease(owner.to_string().as_bytes(), deadline)
            .await;
        drop(mutex);
        // Released in every case (a failed delete is retried in the background).
        let _ = mutex_undo.run_now().await;
        let Some((lease, undo)) = background.open(taken)? else {
            acquisition.finish("timed_out");
            return Ok(None);
        };
        undo.disarm();
        acquisition.finish("acquired");
        let guard = hold_new(
            &self.shared,
            self.leases.clone(),
            self.name.clone(),
            owner,
            lease.path,
            lease.token,
            lease.epoch,
        );
        Ok(Some(ZkPermit {
            id: lease.name,
            guard,
        }))
    }

    /// Creates this acquisition's lease node and waits until at most `max_leases` lease nodes
    /// exist (Curator's `internalAcquire1Lease`).
    async fn take_lease(
        &self,
        data: &[u8],
        deadline: Option<Instant>,
    ) -> Result<Option<(crate::node::OwnNode, crate::node::NodeUndo)>> {
        let (lease, undo) = create(&self.shared, &self.leases, LEASE_NAME, data).await?;
        // A few lost connections in a row are ridden out, with the acquisitions' back-off.
        let mut failures = 0;
        let name = &lease.name;
        let mut check =
            || async move { self.check_leases(name, deadline).await.map(Attempt::Done) };
        loop {
            let Attempt::Done(waited) = retrying(&mut check, deadline, &mut failures).await? else {
                continue;
            };
            match waited {
                None => return Ok(Some((lease, undo))),
                Some(Waited::Changed) => {}
                Some(Waited::TimedOut) => {
                    undo.run_now().await?;
                    return Ok(None);
                }
            }
        }
    }

    /// `None` when the lease `mine` is held; else waits for the leases to change.
    async fn check_leases(&self, mine: &str, deadline: Option<Instant>) -> Result<Option<Waited>> {
        let client = self.shared.client()?;
        let (mut nodes, _, watcher) = client
            .get_and_watch_children(&self.leases)
            .await
            .map_err(|err| self.shared.error(err))?;
        drop(client);
        nodes.retain(|n| sequence(n, &[LEASE_NAME]).is_some());
        if !nodes.iter().any(|n| n == mine) {
            return Err(Error::Store(StoreError::new(NodeGone(format!(
                "{}/{mine}",
                self.leases
            )))));
        }
        let (max, count_watcher) = self.maximum().await?;
        if i64::try_from(nodes.len()).unwrap_or(i64::MAX) <= max {
            return Ok(None);
        }
        let count_changed = async {
            match count_watcher {
                Some(watcher) => drop(watcher.changed().await),
                None => std::future::pending().await,
            }
        };
        let timer = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _event = watcher.changed() => Ok(Some(Waited::Changed)),
            () = count_changed => Ok(Some(Waited::Changed)),
            () = timer => Ok(Some(Waited::TimedOut)),
            () = self.shared.background.closing() => Err(Error::Closed),
        }
    }

    /// How many permits are held now (lease nodes).
    ///
    /// # Errors
    /// Store errors.
    pub async fn held(&self) -> Result<usize> {
        Ok(children(&self.shared, &self.leases, &[LEASE_NAME])
            .await?
            .len())
    }

    /// The semaphore as a lock: one permit per guard.
    pub fn as_lock(&self) -> ZkSemaphoreLock {
        ZkSemaphoreLock {
            semaphore: self.clone(),
        }
    }
}

/// A [`ZkSemaphore`] behind the shared [`DistributedLock`] trait: each guard is one permit.
#[derive(Clone, Debug)]
pub struct ZkSemaphoreLock {
    semaphore: ZkSemaphore,
}

#[async_trait]
impl DistributedLock for ZkSemaphoreLock {
    fn name(&self) -> &str {
        &self.semaphore.name
    }

    async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        Ok(self
            .semaphore
            .acquire_with(options)
            .await?
            .map(ZkPermit::into_guard))
    }

    /// Whether every permit is taken.
    async fn is_locked(&self) -> Result<bool> {
        let max = self.semaphore.current_max_leases().await?;
        Ok(i64::try_from(self.semaphore.held().await?).unwrap_or(i64::MAX) >= max)
    }

    /// Unsupported: permits have no single holder to evict.
    async fn force_unlock(&self) -> Result<bool> {
        Err(Error::Unsupported {
            primitive: "zookeeper semaphore",
            operation: "force_unlock",
            reason: "permits have no single holder to evict; their sessions end them",
        })
    }
}
