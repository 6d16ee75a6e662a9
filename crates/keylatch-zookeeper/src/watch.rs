//! The session watcher: a task per client that follows the ZooKeeper session's state and
//! marks every hold of the client lost when the session expires, is closed or is refused, or
//! (by [`DisconnectLoss`]) when a disconnection lasts longer than a bound — Curator's simulated
//! LOST. Nodes of holds taken as lost while the session may still live are deleted once it
//! reconnects, so they block no one.
//!
//! May import: keylatch-core, zookeeper-client, `session`.

use std::sync::{Arc, Weak};
use std::time::Duration;

use keylatch_core::LossReason;
use tokio::sync::oneshot;
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::session::Shared;

/// When the holds of a disconnected client are taken as lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum DisconnectLoss {
    /// After a disconnection as long as the negotiated session timeout (Curator's default:
    /// by then the server may have expired the session and handed the lock on).
    #[default]
    AfterSessionTimeout,
    /// After a disconnection this long.
    After(Duration),
    /// Only when the session is known ended (expired or closed).
    OnlyOnExpiry,
}

/// Starts the watcher. It ends when the session ends or `stop` is dropped (the client is).
pub(crate) fn spawn(
    shared: Weak<Shared>,
    mut states: zk::StateWatcher,
    policy: DisconnectLoss,
    session_timeout: Duration,
    mut stop: oneshot::Receiver<()>,
) {
    let bound = match policy {
        DisconnectLoss::AfterSessionTimeout => Some(session_timeout),
        DisconnectLoss::After(bound) => Some(bound),
        DisconnectLoss::OnlyOnExpiry => None,
    };
    tokio::spawn(async move {
        let mut disconnected_at: Option<Instant> = None;
        loop {
            let limit = disconnected_at
                .zip(bound)
                .map(|(since, bound)| since + bound);
            let expiry = async {
                match limit {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                state = states.changed() => match state {
                    zk::SessionState::Disconnected => {
                        disconnected_at.get_or_insert_with(Instant::now);
                    }
                    zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                        disconnected_at = None;
                    }
                    zk::SessionState::Expired
                    | zk::SessionState::Closed
                    | zk::SessionState::AuthFailed => {
                        if let Some(shared) = shared.upgrade() {
                            let nodes = shared.lose_all(LossReason::SessionExpired);
                            if !nodes.is_empty() {
                                tracing::warn!(target: "keylatch::zookeeper", ?state, holds = nodes.len(), "session ended: holds lost");
                            }
                        }
                        return;
                    }
                },
                () = expiry => {
                    // Once per disconnection.
                    let since = disconnected_at.take();
                    bound_passed(&shared, since.map_or(Duration::ZERO, |at| at.elapsed()));
                }
                _ = &mut stop => return,
            }
        }
    });
}

/// A disconnection outlasted the bound: every hold is lost, and its node is deleted once the
/// session is back (if it comes back).
fn bound_passed(shared: &Weak<Shared>, for_: Duration) {
    let Some(shared) = shared.upgrade() else {
        return;
    };
    let nodes = shared.lose_all(LossReason::Disconnected { for_ });
    if nodes.is_empty() {
        return;
    }
    tracing::warn!(target: "keylatch::zookeeper", holds = nodes.len(), "disconnected longer than the bound: holds lost");
    for node in nodes {
        let owner = Arc::downgrade(&shared);
        shared.background.spawn(async move {
            loop {
                let Some(shared) = owner.upgrade() else {
                    return Ok(());
                };
                if shared.session_ended() {
                    return Ok(());
                }
                match shared.delete_node(&node).await {
                    Err(err) if err.is_transient() => {}
                    other => return other,
                }
                drop(shared);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
    }
}
