//! The reentrant mutex, Curator's `InterProcessMutex`: one node per acquisition under the lock
//! path, the lowest sequence holds, each waiter watches its predecessor only; reentrancy is
//! local (a count per client and owner); the fencing token is the node's creation zxid.
//!
//! May import: keylatch-core, `session`, `node`, `holds`, `revoke`.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use keylatch_core::{AcquireOptions, DistributedLock, Error, LockGuard, Owner, Result};

use crate::holds::{hold_new, reenter};
use crate::node::{children, contend};
use crate::revoke::{attempt_revoke, watch_revocation};
use crate::session::Shared;

/// Curator's lock name for a mutex's nodes (`InterProcessMutex.LOCK_NAME`).
pub(crate) const LOCK_NAME: &str = "lock-";

/// What a fixed lease is refused with: a node lives as long as its session.
pub(crate) fn lease_unsupported(primitive: &'static str, options: &AcquireOptions) -> Result<()> {
    match options.lease() {
        None => Ok(()),
        Some(lease) => {
            keylatch_core::validate_lease(lease)?;
            Err(Error::Unsupported {
                primitive,
                operation: "a fixed lease",
                reason: "a ZooKeeper lock lasts as long as its session; release it (or use a \
                         short session timeout) instead",
            })
        }
    }
}

/// A reentrant distributed mutex on ZooKeeper, laid out as Curator's `InterProcessMutex`:
/// interoperable with Curator clients locking the same path.
///
/// Made by [`ZkClient::lock`](crate::ZkClient::lock). Every acquisition is a new owner unless
/// one is given ([`with_owner`](ZkMutex::with_owner)); an owner that already holds the lock
/// through this client re-enters it without a request (only its last release deletes the node).
/// A [`non_reentrant`](ZkMutex::non_reentrant) handle refuses that re-entry instead.
///
/// **Revocation** (Curator's `makeRevocable` and `Revoker`): the holds of a
/// [`revocable`](ZkMutex::revocable) handle watch their node, and a revoke request (Curator's
/// `Revoker.attemptRevoke`, or keylatch's [`revoke_holder`](ZkMutex::revoke_holder) /
/// [`revoke`](ZkMutex::revoke)) completes the guard's `lost()` with
/// [`LossReason::Revoked`](keylatch_core::LossReason::Revoked). Revocation is cooperative, as
/// in Curator: the node stays, and the lock passes on, only once the guard is released.
#[derive(Clone)]
pub struct ZkMutex {
    shared: Arc<Shared>,
    name: Arc<str>,
    path: Arc<str>,
    owner: Option<Owner>,
    reentrant: bool,
    revocable: bool,
}

impl fmt::Debug for ZkMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkMutex")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("owner", &self.owner)
            .field("reentrant", &self.reentrant)
            .field("revocable", &self.revocable)
            .finish()
    }
}

impl ZkMutex {
    pub(crate) fn new(shared: Arc<Shared>, name: &str, path: String) -> ZkMutex {
        ZkMutex {
            shared,
            name: Arc::from(name),
            path: Arc::from(path),
            owner: None,
            reentrant: true,
            revocable: false,
        }
    }

    /// The same lock, not reentrant: an acquisition by an owner that already holds it through
    /// this client fails at once with [`Error::AlreadyHeld`] (no node is created, the first
    /// hold is left as it was) instead of entering it again. The layout on the server is the
    /// same, so reentrant and non-reentrant handles exclude each other as usual.
    pub fn non_reentrant(&self) -> ZkMutex {
        ZkMutex {
            reentrant: false,
            ..self.clone()
        }
    }

    /// Whether a second acquisition by the holder re-enters (else it is
    /// [`Error::AlreadyHeld`]).
    pub fn is_reentrant(&self) -> bool {
        self.reentrant
    }

    /// The same lock, its holds revocable (Curator's `InterProcessMutex.makeRevocable`): each
    /// hold this handle acquires watches its node's data, and when another client writes the
    /// revoke marker there (`__REVOKE__`: Curator's `Revoker.attemptRevoke`, or
    /// [`revoke`](ZkMutex::revoke)), the guard's `lost()` completes with
    /// [`LossReason::Revoked`](keylatch_core::LossReason::Revoked). A request that came while
    /// the acquisition waited is seen once it holds. The hold stays until the guard is
    /// released: release it when `lost()` completes. A re-entry shares the first hold's watch.
    pub fn revocable(&self) -> ZkMutex {
        ZkMutex {
            revocable: true,
            ..self.clone()
        }
    }

    /// Whether this handle's holds are revocable ([`revocable`](ZkMutex::revocable)).
    pub fn is_revocable(&self) -> bool {
        self.revocable
    }

    /// Asks the holder of the lock to let go (Curator's `Revoker.attemptRevoke` on the first
    /// node in the queue): the node's name, or `None` when no one holds the lock. Only a
    /// revocable holder (a Curator `InterProcessMutex` made revocable, or a keylatch
    /// [`revocable`](ZkMutex::revocable) handle) reacts; revocation is cooperative.
    ///
    /// # Errors
    /// Store errors.
    pub async fn revoke_holder(&self) -> Result<Option<String>> {
        let nodes = children(&self.shared, &self.path, &[LOCK_NAME]).await?;
        for node in nodes {
            if self.revoke(&node).await? {
                return Ok(Some(node));
            }
        }
        Ok(None)
    }

    /// Asks the holder (or waiter) of the node `node` under the lock's path (a name from
    /// [`ZkClient::contenders`](crate::ZkClient::contenders), Curator's
    /// `getParticipantNodes`) to let go: sets its data to the revoke marker. `false` when the
    /// node is gone.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for a name that is not a node of this lock; store errors.
    pub async fn revoke(&self, node: &str) -> Result<bool> {
        if node.is_empty() || node.contains('/') || !node.contains(LOCK_NAME) {
            return Err(Error::InvalidName {
                reason: "not the name of a node of this lock",
            });
        }
        attempt_revoke(&self.shared, &format!("{}/{node}", self.path)).await
    }

    /// The same lock, acquiring for `owner`: re-enters the holds it already has.
    pub fn with_owner(&self, owner: Owner) -> ZkMutex {
        ZkMutex {
            owner: Some(owner),
            ..self.clone()
        }
    }

    /// The lock's znode (the parent of its contenders' nodes).
    pub fn path(&self) -> &str {
        &self.path
    }
}

#[async_trait]
impl DistributedLock for ZkMutex {
    fn name(&self) -> &str {
        &self.name
    }

    /// Acquires: re-enters a hold of the same owner, else creates this acquisition's node and
    /// waits for its predecessor to go. `Ok(None)` when the wait bound passed first (the node
    /// is deleted then).
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a fixed lease ([`Error::InvalidLease`] for an invalid one);
    /// [`Error::AlreadyHeld`] when a [`non_reentrant`](ZkMutex::non_reentrant) handle's owner
    /// already holds the lock through this client; [`Error::Closed`] after the shutdown; store
    /// errors.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped acquisition's node is deleted in the background (found by its
    /// protected prefix when the create's reply had not arrived).
    async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        lease_unsupported("zookeeper mutex", &options)?;
        let background = &self.shared.background;
        let mut acquisition = background.begin_acquisition("zookeeper_mutex")?;
        acquisition.naming(&self.name);
        let owner = Owner::or_unique(self.owner).resolve(self.shared.id);
        acquisition.owned_by(owner);
        if !self.reentrant && self.shared.hold(&(self.path.clone(), owner)).is_some() {
            return Err(Error::AlreadyHeld {
                name: self.name.to_string(),
            });
        }
        if let Some(guard) = reenter(&self.shared, &self.path, &self.name, owner) {
            acquisition.finish("acquired");
            return Ok(Some(guard));
        }
        let deadline = options.deadline();
        let data = owner.to_string();
        let node = contend(
            &self.shared,
            &self.path,
            LOCK_NAME,
            &[LOCK_NAME],
            data.as_bytes(),
            deadline,
            predecessor,
        )
        .await;
        let node = background.open(node)?;
        let Some((node, undo)) = node else {
            acquisition.finish("timed_out");
            return Ok(None);
        };
        undo.disarm();
        acquisition.finish("acquired");
        let node_path = self.revocable.then(|| node.path.clone());
        let guard = hold_new(
            &self.shared,
            self.path.clone(),
            self.name.clone(),
            owner,
            node.path,
            node.token,
            node.epoch,
        );
        if let Some(node) = node_path {
            watch_revocation(&self.shared, self.path.clone(), owner, node);
        }
        Ok(Some(guard))
    }

    /// Whether any node is under the lock path.
    ///
    /// # Errors
    /// Store errors.
    async fn is_locked(&self) -> Result<bool> {
        Ok(!children(&self.shared, &self.path, &[LOCK_NAME])
            .await?
            .is_empty())
    }

    /// Deletes every node under the lock path (the holder's and the waiters'): the holder's
    /// guard is not told (as in Curator) and its `unlock` reports [`Error::NotHeld`]; waiters
    /// create their nodes again and queue anew (Curator's retry of a vanished node; after a
    /// few times in one acquisition it fails with [`NodeGone`](crate::NodeGone)). Returns
    /// whether there was any.
    ///
    /// # Errors
    /// Store errors.
    async fn force_unlock(&self) -> Result<bool> {
        let nodes = children(&self.shared, &self.path, &[LOCK_NAME]).await?;
        // Waiters first, the holder last: a waiter woken by the holder's delete finds its own
        // node already gone, and queues again, instead of taking the lock on a stale node.
        for node in nodes.iter().rev() {
            self.shared
                .delete_node(&format!("{}/{node}", self.path))
                .await?;
        }
        Ok(!nodes.is_empty())
    }
}

/// A mutex contender waits for the node just before its own.
pub(crate) fn predecessor(children: &[String], mine: usize) -> Option<String> {
    mine.checked_sub(1).map(|i| children[i].clone())
}
