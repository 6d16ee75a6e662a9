//! The reentrant mutex, Curator's `InterProcessMutex`: one node per acquisition under the lock
//! path, the lowest sequence holds, each waiter watches its predecessor only; reentrancy is
//! local (a count per client and owner); the fencing token is the node's creation zxid.
//!
//! May import: keylatch-core, `session`, `node`, `holds`.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use keylatch_core::{AcquireOptions, DistributedLock, Error, LockGuard, Owner, Result};

use crate::holds::{hold_new, reenter};
use crate::node::{children, contend};
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
#[derive(Clone)]
pub struct ZkMutex {
    shared: Arc<Shared>,
    name: Arc<str>,
    path: Arc<str>,
    owner: Option<Owner>,
    reentrant: bool,
}

impl fmt::Debug for ZkMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkMutex")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("owner", &self.owner)
            .field("reentrant", &self.reentrant)
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
        Ok(Some(hold_new(
            &self.shared,
            self.path.clone(),
            self.name.clone(),
            owner,
            node.path,
            node.token,
            node.epoch,
        )))
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
