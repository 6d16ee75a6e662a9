//! What every lock of one [`ZkClient`](crate::ZkClient) shares: the ZooKeeper session's
//! handle, the core's [`Background`] (and through it the hold registry), the table of this
//! client's live lock nodes with their local reentrancy counts, and the mapping of
//! zookeeper-client's errors to keylatch's.
//!
//! May import: keylatch-core, zookeeper-client (no other file of this crate).

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use keylatch_core::{Background, Error, OwnerId, Result, StoreError};
use uuid::Uuid;
use zookeeper_client as zk;

/// One lock node this client holds, and how many guards of one owner share it (Curator's
/// local reentrancy: only the last release deletes the node).
#[derive(Clone, Debug)]
pub(crate) struct NodeHold {
    /// The node's full path.
    pub(crate) node: String,
    /// Guards of the owner on it.
    pub(crate) count: usize,
    /// The node's creation zxid: the fencing token.
    pub(crate) token: u64,
    /// The session epoch the node was created in (see [`Shared::epoch`]).
    pub(crate) epoch: u64,
}

/// A hold's identity in the table: its hold key (the lock path, or a side of it) and owner.
pub(crate) type HoldId = (Arc<str>, OwnerId);

/// The state shared by a client and its locks.
pub(crate) struct Shared {
    /// This client's UUID (the first half of every owner id).
    pub(crate) id: Uuid,
    /// The session; `None` once the client is shut down (dropping the last handle closes it).
    /// Replaced by a new session after the last one expired.
    client: Mutex<Option<zk::Client>>,
    /// How many sessions have expired: a node created in an earlier epoch is gone.
    epoch: AtomicU64,
    /// Background work, the hold registry and the shutdown.
    pub(crate) background: Background,
    /// Where names without a leading `/` go.
    pub(crate) base: String,
    /// ACLs of created nodes (the client's [`AclPolicy`](crate::AclPolicy)).
    pub(crate) acls: zk::Acls<'static>,
    /// Whether holds are lost as soon as the connection is (`DisconnectLoss::OnDisconnect`):
    /// then a hold granted while the connection is down is lost at once.
    pub(crate) lose_on_disconnect: bool,
    /// Whether lock directories are created as container nodes (cleared, once, when the
    /// server answers that it has none: ZooKeeper before 3.5).
    containers: AtomicBool,
    /// The live lock nodes of this client.
    holds: Mutex<HashMap<HoldId, NodeHold>>,
    /// The negotiated session timeout.
    pub(crate) session_timeout: Duration,
    /// Dropped with this: ends the session watcher.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("id", &self.id)
            .field("base", &self.base)
            .field("background", &self.background)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every change is one call: a panic elsewhere cannot leave the map half-updated.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub(crate) fn new(
        client: zk::Client,
        background: Background,
        base: String,
        acls: zk::Acls<'static>,
        lose_on_disconnect: bool,
        stop: tokio::sync::oneshot::Sender<()>,
    ) -> Shared {
        Shared {
            id: Uuid::new_v4(),
            session_timeout: client.session_timeout(),
            client: Mutex::new(Some(client)),
            epoch: AtomicU64::new(0),
            background,
            base,
            acls,
            lose_on_disconnect,
            containers: AtomicBool::new(true),
            holds: Mutex::new(HashMap::new()),
            _stop: stop,
        }
    }

    /// The mode lock directories are created with: container nodes (the server deletes
    /// them once their last child is gone, as Curator's `creatingParentContainersIfNeeded`
    /// makes them), or persistent ones on a server without containers.
    pub(crate) fn dir_mode(&self) -> zk::CreateMode {
        if self.containers.load(Ordering::Relaxed) {
            zk::CreateMode::Container
        } else {
            zk::CreateMode::Persistent
        }
    }

    /// The server has no container nodes: directories are persistent from now on (logged
    /// once).
    pub(crate) fn no_containers(&self) {
        if self.containers.swap(false, Ordering::Relaxed) {
            tracing::warn!(
                target: "keylatch::zookeeper",
                "the server has no container nodes (ZooKeeper before 3.5): lock directories are created persistent and stay after use"
            );
        }
    }

    /// A handle on the session.
    ///
    /// # Errors
    /// [`Error::Closed`] after the shutdown.
    pub(crate) fn client(&self) -> Result<zk::Client> {
        lock(&self.client).clone().ok_or(Error::Closed)
    }

    /// The session epoch: how many sessions of this client have expired. Read before a node
    /// is created, it tells later whether the node's session is still the current one.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// The session expired: a new epoch begins (before its holds are marked lost).
    pub(crate) fn next_epoch(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Puts a new session in place of the expired one; `false` (and `client` is dropped,
    /// which closes it) when the client was shut down meanwhile.
    pub(crate) fn replace_client(&self, client: zk::Client) -> bool {
        let mut current = lock(&self.client);
        if current.is_none() {
            return false;
        }
        *current = Some(client);
        true
    }

    /// Lets go of the session: once the handles in use are dropped, it is closed.
    pub(crate) fn take_client(&self) -> Option<zk::Client> {
        lock(&self.client).take()
    }

    /// The node held for `id`, if any.
    pub(crate) fn hold(&self, id: &HoldId) -> Option<NodeHold> {
        lock(&self.holds).get(id).cloned()
    }

    /// One more guard on an existing hold; `None` when there is none.
    pub(crate) fn reenter(&self, id: &HoldId) -> Option<NodeHold> {
        let mut holds = lock(&self.holds);
        let hold = holds.get_mut(id)?;
        hold.count += 1;
        Some(hold.clone())
    }

    /// Records a fresh hold (count 1). If the owner already holds it (two acquisitions for
    /// one owner that ran at once, which a read lock lets both win), the hold is joined
    /// instead: its count grows, and the fresh node, returned, is to be deleted.
    pub(crate) fn insert(
        &self,
        id: HoldId,
        node: String,
        token: u64,
        epoch: u64,
    ) -> (NodeHold, Option<String>) {
        use std::collections::hash_map::Entry;
        match lock(&self.holds).entry(id) {
            Entry::Occupied(mut slot) => {
                let hold = slot.get_mut();
                hold.count += 1;
                (hold.clone(), Some(node))
            }
            Entry::Vacant(slot) => {
                let hold = NodeHold {
                    node,
                    count: 1,
                    token,
                    epoch,
                };
                slot.insert(hold.clone());
                (hold, None)
            }
        }
    }

    /// One guard fewer on `id`, if its count is `expected` (any count for `None`): the node
    /// to delete when that was the last, `Ok(None)` when guards remain or the count differs.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when there is no such hold.
    pub(crate) fn leave(&self, id: &HoldId, expected: Option<usize>) -> Result<Option<String>> {
        let mut holds = lock(&self.holds);
        let Some(hold) = holds.get_mut(id) else {
            return Err(Error::NotHeld {
                name: id.0.to_string(),
            });
        };
        if expected.is_some_and(|count| count != hold.count) {
            return Ok(None);
        }
        hold.count -= 1;
        if hold.count > 0 {
            return Ok(None);
        }
        Ok(holds.remove(id).map(|hold| hold.node))
    }

    /// Forgets every hold (the session ended, or is taken as lost): their nodes.
    pub(crate) fn drain(&self) -> Vec<String> {
        lock(&self.holds)
            .drain()
            .map(|(_, hold)| hold.node)
            .collect()
    }

    /// Maps a zookeeper-client error.
    pub(crate) fn error(&self, err: zk::Error) -> Error {
        store_error(err, self.session_timeout)
    }

    /// Deletes `node`, riding out a few lost connections (and a connection the library gave up
    /// on, [`transient`]): a node already gone, or gone with an ended session, counts as
    /// deleted. A try cut short by the caller is still sent by zookeeper-client once it is
    /// connected again within the session.
    ///
    /// # Errors
    /// The last error once the tries are used up.
    pub(crate) async fn delete_node(&self, node: &str) -> Result<()> {
        self.delete_node_found(node).await.map(drop)
    }

    /// As [`delete_node`](Shared::delete_node): whether this call deleted it (`false` when it
    /// was already gone).
    ///
    /// # Errors
    /// As [`delete_node`](Shared::delete_node).
    pub(crate) async fn delete_node_found(&self, node: &str) -> Result<bool> {
        let mut tries = 0u32;
        loop {
            let client = self.client()?;
            match client.delete(node, None).await {
                Ok(()) => return Ok(true),
                Err(zk::Error::NoNode | zk::Error::SessionExpired) => return Ok(false),
                Err(err) if transient(&err) && tries < keylatch_core::TRANSIENT_RETRIES => {
                    tracing::debug!(target: "keylatch::zookeeper", error = %err, "delete: retrying");
                    tries += 1;
                    tokio::time::sleep(keylatch_core::Backoff::nth(
                        Duration::from_millis(20),
                        Duration::from_millis(640),
                        tries - 1,
                    ))
                    .await;
                }
                Err(err) => return Err(self.error(err)),
            }
        }
    }
}

/// Whether a request that failed with `err` may succeed if sent again in the same session: the
/// connection went ([`connection_lost`]), the request timed out, or the library gave up on a
/// connection that stopped answering (its `Custom` error "no response from connection").
pub(crate) fn transient(err: &zk::Error) -> bool {
    connection_lost(err) || matches!(err, zk::Error::Timeout | zk::Error::Custom(_))
}

/// Whether `err` says the connection went: `ConnectionLoss`, or an I/O error of the socket
/// (a reset while a request was in flight, as when a leader dies) that the library passes on
/// as a custom error.
pub(crate) fn connection_lost(err: &zk::Error) -> bool {
    if matches!(err, zk::Error::ConnectionLoss) {
        return true;
    }
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if cause.is::<std::io::Error>() {
            return true;
        }
        source = cause.source();
    }
    false
}

/// keylatch's error for a zookeeper-client error: a lost connection (or one the library gave
/// up on) is ambiguous ([`Error::Connection`]), a request timeout [`Error::Timeout`], refused credentials
/// [`Error::Auth`], a closed client [`Error::Closed`]; the rest [`Error::Store`]. The
/// library's error is the source.
pub(crate) fn store_error(err: zk::Error, timeout: Duration) -> Error {
    match err {
        // A connection the library gave up on ("no response from connection") left its
        // requests' outcome unknown, as a lost connection does.
        err if connection_lost(&err) || matches!(err, zk::Error::Custom(_)) => {
            Error::Connection(StoreError::new(err))
        }
        zk::Error::Timeout => Error::Timeout { after: timeout },
        zk::Error::NoAuth | zk::Error::AuthFailed => Error::Auth(StoreError::new(err)),
        zk::Error::ClientClosed => Error::Closed,
        other => Error::Store(StoreError::new(other)),
    }
}

impl Shared {
    /// Whether the session has ended (expired, closed, or its credentials refused).
    pub(crate) fn session_ended(&self) -> bool {
        match lock(&self.client).as_ref() {
            None => true,
            Some(client) => matches!(
                client.state(),
                zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed
            ),
        }
    }

    /// Whether the session's connection is down now (the session may still live).
    pub(crate) fn disconnected(&self) -> bool {
        self.client()
            .is_ok_and(|client| client.state() == zk::SessionState::Disconnected)
    }

    /// Every hold of this client is lost while its session may still live: each guard's
    /// `lost()` completes, and each node is deleted once the session is back (if it comes
    /// back), so it blocks no one. Returns how many holds there were.
    pub(crate) fn lose_all_and_free(self: &Arc<Self>, reason: keylatch_core::LossReason) -> usize {
        let nodes = self.lose_all(reason);
        let count = nodes.len();
        for node in nodes {
            let owner = Arc::downgrade(self);
            self.background.spawn(async move {
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
        count
    }

    /// Every hold of this client is lost: each guard's `lost()` completes. Returns the nodes
    /// they had (already gone when the session ended; to delete when it is only taken as lost).
    pub(crate) fn lose_all(&self, reason: keylatch_core::LossReason) -> Vec<String> {
        // The releases are dropped: the nodes are dealt with by the caller.
        let taken = self.background.registry().take_all_lost(reason);
        drop(taken);
        self.drain()
    }
}
