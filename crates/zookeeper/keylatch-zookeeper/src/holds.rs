//! Guards over lock nodes: registering a hold in the core's registry and making its
//! [`LockGuard`], and [`NodeRelease`], the core's [`HoldRelease`] for a node (a local count,
//! the node deleted by the last release).
//!
//! May import: keylatch-core, `session`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::{HoldKey, HoldRelease, LockGuard, OwnerId, Renewal, Result};
use tokio::time::Instant;

use crate::session::{HoldId, NodeHold, Shared};

/// How long a hold is registered for: a node lives as long as its session, so the registry's
/// deadline is only a bound no hold reaches (ten years); the session watcher marks holds lost.
const UNBOUNDED_HOLD: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Releases one guard of a node hold: the last one deletes the node.
#[derive(Debug)]
pub(crate) struct NodeRelease {
    shared: Arc<Shared>,
    key: Arc<str>,
}

#[async_trait]
impl HoldRelease for NodeRelease {
    async fn release(&self, owner: OwnerId) -> Result<()> {
        let id = (self.key.clone(), owner);
        if let Some(node) = self.shared.leave(&id, None)?
            && !self.shared.delete_node_found(&node).await?
        {
            // Deleted by someone else (a force unlock), or gone with the session.
            return Err(keylatch_core::Error::NotHeld {
                name: self.key.to_string(),
            });
        }
        Ok(())
    }

    async fn release_if_count(&self, owner: OwnerId, expected: u64) -> Result<()> {
        let id = (self.key.clone(), owner);
        let expected = usize::try_from(expected).unwrap_or(usize::MAX);
        match self.shared.leave(&id, Some(expected)) {
            Ok(Some(node)) => self.shared.delete_node(&node).await,
            Ok(None) | Err(keylatch_core::Error::NotHeld { .. }) => Ok(()),
            Err(err) => Err(err),
        }
    }
}

/// A guard for a hold the table already counts (a fresh node inserted, or a re-entry).
pub(crate) fn make_guard(
    shared: &Arc<Shared>,
    key: Arc<str>,
    name: Arc<str>,
    owner: OwnerId,
    hold: &NodeHold,
) -> LockGuard {
    let registry = shared.background.registry();
    let registered = registry.register(
        HoldKey::new(&key, owner),
        UNBOUNDED_HOLD,
        Renewal::Lease,
        Instant::now(),
    );
    let release = Arc::new(NodeRelease {
        shared: shared.clone(),
        key,
    });
    let guard = LockGuard::new(
        shared.background.clone(),
        name,
        owner,
        release,
        registered,
        Some(hold.token),
    );
    // A session that ended while this was acquired (or one already replaced by a new session):
    // its watcher may already have marked the holds lost, so this one is marked now.
    if shared.session_ended() || hold.epoch != shared.epoch() {
        shared.lose_all(keylatch_core::LossReason::SessionExpired);
    } else if shared.lose_on_disconnect && shared.disconnected() {
        // Granted just as the connection went: the watcher may have marked the holds lost
        // before this one was registered.
        let for_ = Duration::ZERO;
        let holds = shared.lose_all_and_free(keylatch_core::LossReason::Disconnected { for_ });
        tracing::warn!(target: "keylatch::zookeeper", holds, "connection lost as a lock was granted: holds lost");
    }
    guard
}

/// A hold for `owner` on `key`, entered again if this client already holds it (Curator's
/// local reentrancy): `None` when it does not.
pub(crate) fn reenter(
    shared: &Arc<Shared>,
    key: &Arc<str>,
    name: &Arc<str>,
    owner: OwnerId,
) -> Option<LockGuard> {
    let id: HoldId = (key.clone(), owner);
    let hold = shared.reenter(&id)?;
    Some(make_guard(shared, key.clone(), name.clone(), owner, &hold))
}

/// Records a fresh node for `owner` on `key`, created in session `epoch`, and makes its guard.
pub(crate) fn hold_new(
    shared: &Arc<Shared>,
    key: Arc<str>,
    name: Arc<str>,
    owner: OwnerId,
    node: String,
    token: u64,
    epoch: u64,
) -> LockGuard {
    let (hold, extra) = shared.insert((key.clone(), owner), node, token, epoch);
    if let Some(extra) = extra {
        let deleting = shared.clone();
        shared
            .background
            .spawn(async move { deleting.delete_node(&extra).await });
    }
    make_guard(shared, key, name, owner, &hold)
}
