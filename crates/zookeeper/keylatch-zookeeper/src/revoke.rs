//! Revocation in Curator's protocol (`Revoker`, `InterProcessMutex.makeRevocable`,
//! `LockInternals`): a revoke request sets a lock node's data to `__REVOKE__`; the holder of a
//! revocable lock watches its node's data and, when the marker is there, is asked to release.
//! keylatch signals that through the guard's `lost()`, with [`LossReason::Revoked`]: the node
//! stays until the guard is released, as Curator's listener decides when to release.
//!
//! May import: keylatch-core, zookeeper-client, `session`.

use std::sync::{Arc, Weak};

use keylatch_core::{LossReason, OwnerId, Result};
use zookeeper_client as zk;

use crate::session::Shared;

/// What a revoke request writes into a lock node (`LockInternals.REVOKE_MESSAGE`).
pub(crate) const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// Sets the data of the lock node `node` (a full path) to the revoke marker
/// (`Revoker.attemptRevoke`): `false` when the node is gone (nothing to revoke).
///
/// # Errors
/// Store errors.
pub(crate) async fn attempt_revoke(shared: &Shared, node: &str) -> Result<bool> {
    let client = shared.client()?;
    match client.set_data(node, REVOKE_MESSAGE, None).await {
        Ok(_) => Ok(true),
        Err(zk::Error::NoNode) => Ok(false),
        Err(err) => Err(shared.error(err)),
    }
}

/// Watches the data of `node`, held for (`key`, `owner`), until the node or the session goes:
/// when it carries the revoke marker (also when it already did, set while the acquisition
/// waited, which Curator's watch from the node's creation would have seen), the hold is marked
/// lost with [`LossReason::Revoked`]. Curator re-reads the data with a new watch on every
/// `NodeDataChanged`, as this does.
pub(crate) fn watch_revocation(shared: &Arc<Shared>, key: Arc<str>, owner: OwnerId, node: String) {
    let weak = Arc::downgrade(shared);
    let closing = shared.background.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = follow(weak, key, owner, node) => {}
            () = closing.closing() => {}
        }
    });
}

async fn follow(shared: Weak<Shared>, key: Arc<str>, owner: OwnerId, node: String) {
    loop {
        let Some(owner_shared) = shared.upgrade() else {
            return;
        };
        let Ok(client) = owner_shared.client() else {
            return;
        };
        let watcher = match client.get_and_watch_data(&node).await {
            Ok((data, _, watcher)) => {
                if data == REVOKE_MESSAGE {
                    revoked(&owner_shared, &key, owner, &node);
                    return;
                }
                watcher
            }
            // Gone, or the session ended: nothing left to revoke.
            Err(zk::Error::NoNode | zk::Error::SessionExpired | zk::Error::ClientClosed) => return,
            Err(err) => {
                tracing::debug!(target: "keylatch::zookeeper", error = %err, node, "revocation watch: retrying");
                drop((client, owner_shared));
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                continue;
            }
        };
        drop((client, owner_shared));
        let event = watcher.changed().await;
        if event.event_type != zk::EventType::NodeDataChanged {
            // Deleted (released), or the session ended.
            return;
        }
    }
}

/// The marker is on `node`: its hold, if still this one, is marked lost.
fn revoked(shared: &Shared, key: &str, owner: OwnerId, node: &str) {
    let id = (Arc::from(key), owner);
    if shared.hold(&id).is_none_or(|hold| hold.node != node) {
        return;
    }
    let field = owner.to_string();
    if shared
        .background
        .registry()
        .mark_lost(key, &field, LossReason::Revoked)
    {
        tracing::info!(target: "keylatch::zookeeper", node, "revocation requested: hold marked lost");
    }
}
