//! The read-write lock, Curator's `InterProcessReadWriteLock`: read and write nodes
//! (`__READ__`, `__WRIT__`, same length on purpose) in one directory, ordered by sequence; a
//! writer waits for every earlier node, a reader only for earlier writers (it watches the first
//! of them). An owner holding the write lock gets the read lock at once (its read node carries
//! the write node's sequence, so releasing the write lock downgrades); asking for the write
//! lock while holding the read lock is refused (it would wait for itself).
//!
//! May import: keylatch-core, `session`, `node`, `holds`, `mutex`.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use keylatch_core::{AcquireOptions, DistributedLock, Error, LockGuard, Owner, OwnerId, Result};

use crate::holds::{hold_new, reenter};
use crate::mutex::{lease_unsupported, predecessor};
use crate::node::{OwnNode, children, contend, create_with, sequence};
use crate::session::Shared;

/// Curator's read node name.
pub(crate) const READ_NAME: &str = "__READ__";
/// Curator's write node name.
pub(crate) const WRITE_NAME: &str = "__WRIT__";
const BOTH: [&str; 2] = [READ_NAME, WRITE_NAME];

/// A read-write lock on ZooKeeper, laid out as Curator's `InterProcessReadWriteLock`. Made by
/// [`ZkClient::read_write_lock`](crate::ZkClient::read_write_lock); its two sides are locks of
/// their own ([`read_lock`](ZkReadWriteLock::read_lock),
/// [`write_lock`](ZkReadWriteLock::write_lock)), each reentrant per owner.
#[derive(Clone)]
pub struct ZkReadWriteLock {
    shared: Arc<Shared>,
    name: Arc<str>,
    path: Arc<str>,
    owner: Option<Owner>,
}

impl fmt::Debug for ZkReadWriteLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkReadWriteLock")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("owner", &self.owner)
            .finish()
    }
}

impl ZkReadWriteLock {
    pub(crate) fn new(shared: Arc<Shared>, name: &str, path: String) -> ZkReadWriteLock {
        ZkReadWriteLock {
            shared,
            name: Arc::from(name),
            path: Arc::from(path),
            owner: None,
        }
    }

    /// The same lock, acquiring for `owner` (to re-enter, or to downgrade a write hold).
    pub fn with_owner(&self, owner: Owner) -> ZkReadWriteLock {
        ZkReadWriteLock {
            owner: Some(owner),
            ..self.clone()
        }
    }

    /// The read side: shared with other readers, excluded by writers.
    pub fn read_lock(&self) -> ZkRwSide {
        self.side(false)
    }

    /// The write side: excludes readers and writers.
    pub fn write_lock(&self) -> ZkRwSide {
        self.side(true)
    }

    fn side(&self, write: bool) -> ZkRwSide {
        ZkRwSide {
            shared: self.shared.clone(),
            name: self.name.clone(),
            path: self.path.clone(),
            read_key: Arc::from(format!("{}#read", self.path)),
            write_key: Arc::from(format!("{}#write", self.path)),
            write,
            owner: self.owner,
        }
    }
}

/// One side of a [`ZkReadWriteLock`], behind the shared [`DistributedLock`] trait.
#[derive(Clone)]
pub struct ZkRwSide {
    shared: Arc<Shared>,
    name: Arc<str>,
    path: Arc<str>,
    read_key: Arc<str>,
    write_key: Arc<str>,
    write: bool,
    owner: Option<Owner>,
}

impl fmt::Debug for ZkRwSide {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkRwSide")
            .field("name", &self.name)
            .field("side", &if self.write { "write" } else { "read" })
            .field("owner", &self.owner)
            .finish()
    }
}

impl ZkRwSide {
    fn key(&self) -> &Arc<str> {
        if self.write {
            &self.write_key
        } else {
            &self.read_key
        }
    }

    fn lock_name(&self) -> &'static str {
        if self.write { WRITE_NAME } else { READ_NAME }
    }

    async fn take(&self, owner: OwnerId, options: AcquireOptions) -> Result<Option<LockGuard>> {
        let data = owner.to_string();
        if self.write {
            if self.shared.hold(&(self.read_key.clone(), owner)).is_some() {
                return Err(Error::UpgradeRefused {
                    name: self.name.to_string(),
                });
            }
        } else if let Some(write) = self.shared.hold(&(self.write_key.clone(), owner)) {
            // A write holder reads at once: a plain node with the write node's sequence.
            let seq = sequence(&write.node, &[WRITE_NAME]).unwrap_or_default();
            let (node, undo) = create_with(
                &self.shared,
                &self.path,
                READ_NAME,
                data.as_bytes(),
                Some(seq),
            )
            .await?;
            undo.disarm();
            return Ok(Some(self.hold(owner, node)));
        }
        let decide = |children: &[String], mine: usize| -> Option<String> {
            if self.write {
                predecessor(children, mine)
            } else {
                children[..mine]
                    .iter()
                    .find(|c| c.contains(WRITE_NAME))
                    .cloned()
            }
        };
        let won = contend(
            &self.shared,
            &self.path,
            self.lock_name(),
            &BOTH,
            data.as_bytes(),
            options.deadline(),
            decide,
        )
        .await;
        let Some((node, undo)) = self.shared.background.open(won)? else {
            return Ok(None);
        };
        undo.disarm();
        Ok(Some(self.hold(owner, node)))
    }

    fn hold(&self, owner: OwnerId, node: OwnNode) -> LockGuard {
        hold_new(
            &self.shared,
            self.key().clone(),
            self.name.clone(),
            owner,
            node.path,
            node.token,
            node.epoch,
        )
    }
}

#[async_trait]
impl DistributedLock for ZkRwSide {
    fn name(&self) -> &str {
        &self.name
    }

    /// Acquires this side: re-enters the owner's hold, else creates a node and waits (a writer
    /// for every earlier node, a reader for earlier writers). `Ok(None)` when the wait bound
    /// passed first (the node is deleted then).
    ///
    /// # Errors
    /// [`Error::UpgradeRefused`] for the write side while the owner holds the read side;
    /// [`Error::Unsupported`] for a fixed lease; [`Error::Closed`]; store errors.
    ///
    /// # Cancel safety
    /// Cancel safe, as the mutex's.
    async fn acquire(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        lease_unsupported("zookeeper read-write lock", &options)?;
        let mut acquisition = self
            .shared
            .background
            .begin_acquisition("zookeeper_rwlock")?;
        acquisition.naming(&self.name);
        let owner = Owner::or_unique(self.owner).resolve(self.shared.id);
        acquisition.owned_by(owner);
        if let Some(guard) = reenter(&self.shared, self.key(), &self.name, owner) {
            acquisition.finish("acquired");
            return Ok(Some(guard));
        }
        let taken = self.take(owner, options).await?;
        acquisition.finish(if taken.is_some() {
            "acquired"
        } else {
            "timed_out"
        });
        Ok(taken)
    }

    /// The write side: whether anyone holds or waits for either side; the read side: whether
    /// a writer holds or waits.
    ///
    /// # Errors
    /// Store errors.
    async fn is_locked(&self) -> Result<bool> {
        let names: &[&str] = if self.write { &BOTH } else { &[WRITE_NAME] };
        Ok(!children(&self.shared, &self.path, names).await?.is_empty())
    }

    /// Deletes every node of this side (holders' and waiters'). Returns whether there was any.
    ///
    /// # Errors
    /// Store errors.
    async fn force_unlock(&self) -> Result<bool> {
        let nodes = children(&self.shared, &self.path, &[self.lock_name()]).await?;
        // Waiters first, the holder last: a waiter woken by the holder's delete finds its own
        // node already gone instead of taking the lock.
        for node in nodes.iter().rev() {
            self.shared
                .delete_node(&format!("{}/{node}", self.path))
                .await?;
        }
        Ok(!nodes.is_empty())
    }
}
