//! Curator's contention for a lock directory, the part every recipe shares: creating a
//! protected ephemeral-sequential node (`_c_<uuid>-<lock name><sequence>`), finding it again by
//! its prefix when the reply was lost, listing the contenders in sequence order, waiting for
//! the one node a contender depends on to go, and undoing the node of an acquisition that gave
//! up or was dropped ([`NodeUndo`]).
//!
//! May import: keylatch-core, zookeeper-client, `session`.

use std::sync::Arc;
use std::time::Duration;

use keylatch_core::lock::{Attempt, retrying};
use keylatch_core::{Backoff, Error, Result, StoreError, TRANSIENT_RETRIES};
use tokio::time::Instant;
use uuid::Uuid;
use zookeeper_client as zk;

use crate::session::Shared;

/// Curator's protected-mode prefix: `_c_` (`ProtectedUtils.PROTECTED_PREFIX`).
const PROTECTED_PREFIX: &str = "_c_";

/// A lock node that vanished while its acquisition waited (the session ended, or someone
/// deleted it, as a force unlock does) once more than the acquisition re-creates it.
#[derive(Debug, thiserror::Error)]
#[error("the lock node {0:?} is gone (its session ended, or it was deleted)")]
pub struct NodeGone(pub String);

/// A node this client created.
#[derive(Clone, Debug)]
pub(crate) struct OwnNode {
    /// The full path.
    pub(crate) path: String,
    /// The name within its directory.
    pub(crate) name: String,
    /// The creation zxid: the fencing token.
    pub(crate) token: u64,
    /// The session epoch it was created in.
    pub(crate) epoch: u64,
}

/// The text that orders a child: what follows the last of the lock names in it (Curator's
/// `standardFixForSorting`), so the protected prefix is ignored.
pub(crate) fn sequence<'a>(child: &'a str, names: &[&str]) -> Option<&'a str> {
    names
        .iter()
        .filter_map(|name| child.rfind(name).map(|i| i + name.len()))
        .max()
        .map(|i| &child[i..])
}

/// The children of `dir` that carry one of the lock names, in sequence order; an absent
/// directory has none.
///
/// # Errors
/// Store errors.
pub(crate) async fn children(shared: &Shared, dir: &str, names: &[&str]) -> Result<Vec<String>> {
    let client = shared.client()?;
    let mut children = match client.list_children(dir).await {
        Ok(children) => children,
        Err(zk::Error::NoNode) => return Ok(Vec::new()),
        Err(err) => return Err(shared.error(err)),
    };
    children.retain(|c| sequence(c, names).is_some());
    children.sort_by_cached_key(|c| {
        let seq = sequence(c, names).unwrap_or_default();
        (seq.parse::<i64>().unwrap_or(i64::MAX), seq.to_owned())
    });
    Ok(children)
}

/// Undoes the node of an acquisition in progress: armed before the create is sent, told the
/// node once it is known, disarmed when the node is handed to a guard. Dropped armed (the
/// acquisition failed or its future was dropped), it deletes the node in the background,
/// finding it by its protected prefix when the create's reply never came (a session's requests
/// are applied in order, so the listing sees the create).
#[derive(Debug)]
pub(crate) struct NodeUndo {
    shared: Arc<Shared>,
    dir: String,
    prefix: String,
    node: Option<String>,
    armed: bool,
}

impl NodeUndo {
    fn new(shared: Arc<Shared>, dir: &str) -> NodeUndo {
        NodeUndo {
            shared,
            dir: dir.to_owned(),
            prefix: format!("{PROTECTED_PREFIX}{}-", Uuid::new_v4()),
            node: None,
            armed: true,
        }
    }

    /// The node is handed over: nothing to undo.
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }

    /// Deletes the node now.
    ///
    /// # Errors
    /// The delete's error (it is then retried in the background).
    pub(crate) async fn run_now(mut self) -> Result<()> {
        let result = undo(&self.shared, &self.dir, &self.prefix, self.node.as_deref()).await;
        if result.is_ok() {
            self.armed = false;
        }
        result
    }
}

impl Drop for NodeUndo {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let shared = self.shared.clone();
        let dir = std::mem::take(&mut self.dir);
        let prefix = std::mem::take(&mut self.prefix);
        let node = self.node.take();
        self.shared.background.spawn(async move {
            let mut tries = 0;
            loop {
                match undo(&shared, &dir, &prefix, node.as_deref()).await {
                    Err(err) if err.is_transient() && tries < TRANSIENT_RETRIES => {
                        tries += 1;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    other => return other,
                }
            }
        });
    }
}

async fn undo(shared: &Shared, dir: &str, prefix: &str, node: Option<&str>) -> Result<()> {
    if let Some(node) = node {
        return shared.delete_node(node).await;
    }
    let client = shared.client()?;
    let children = match client.list_children(dir).await {
        Ok(children) => children,
        Err(zk::Error::NoNode | zk::Error::SessionExpired) => return Ok(()),
        Err(err) => return Err(shared.error(err)),
    };
    for child in children.iter().filter(|c| c.starts_with(prefix)) {
        shared.delete_node(&format!("{dir}/{child}")).await?;
    }
    Ok(())
}

/// Creates a protected ephemeral-sequential node `<dir>/_c_<uuid>-<lock_name><sequence>`,
/// creating `dir` (a container node) when missing; a create whose reply was lost is found again by
/// its prefix. The returned undo deletes the node unless disarmed.
///
/// # Errors
/// Store errors; the undo (dropped) deletes whatever may have been created.
pub(crate) async fn create(
    shared: &Arc<Shared>,
    dir: &str,
    lock_name: &str,
    data: &[u8],
) -> Result<(OwnNode, NodeUndo)> {
    create_with(shared, dir, lock_name, data, None).await
}

/// As [`create`], or, with `sequence`, a plain ephemeral node carrying that sequence (Curator's
/// read node of a write holder, which sorts where its write node does).
///
/// # Errors
/// As [`create`].
pub(crate) async fn create_with(
    shared: &Arc<Shared>,
    dir: &str,
    lock_name: &str,
    data: &[u8],
    sequence: Option<&str>,
) -> Result<(OwnNode, NodeUndo)> {
    let mut undo = NodeUndo::new(shared.clone(), dir);
    let path = format!("{dir}/{}{lock_name}{}", undo.prefix, sequence.unwrap_or(""));
    let mode = if sequence.is_some() {
        zk::CreateMode::Ephemeral
    } else {
        zk::CreateMode::EphemeralSequential
    };
    let ephemeral = mode.with_acls(shared.acls);
    let mut tries = 0u32;
    loop {
        let epoch = shared.epoch();
        let client = shared.client()?;
        let err = match client.create(&path, data, &ephemeral).await {
            Ok((stat, created)) => {
                let node = match sequence {
                    Some(_) => path.clone(),
                    None => format!("{path}{created}"),
                };
                undo.node = Some(node.clone());
                let name = node[dir.len() + 1..].to_owned();
                let token = u64::try_from(stat.czxid).unwrap_or_default();
                return Ok((
                    OwnNode {
                        path: node,
                        name,
                        token,
                        epoch,
                    },
                    undo,
                ));
            }
            Err(err) => err,
        };
        tries += 1;
        if tries > TRANSIENT_RETRIES {
            return Err(shared.error(err));
        }
        match err {
            zk::Error::NoNode => {
                if let Err(err) = make_dir(shared, &client, dir).await
                    && !matches!(err, zk::Error::ConnectionLoss)
                {
                    return Err(shared.error(err));
                }
            }
            err if crate::session::connection_lost(&err) => {
                let pause = Backoff::nth(
                    Duration::from_millis(20),
                    Duration::from_millis(640),
                    tries - 1,
                );
                tokio::time::sleep(pause).await;
                if let Some(node) = find(shared, dir, &undo.prefix, epoch).await? {
                    undo.node = Some(node.path.clone());
                    return Ok((node, undo));
                }
            }
            other => return Err(shared.error(other)),
        }
    }
}

/// Creates `dir` and its missing ancestors as container nodes (Curator's
/// `creatingParentContainersIfNeeded`: the server reaps each once its last child is gone), or
/// persistent ones on a server without containers, which answers `Unimplemented`.
async fn make_dir(shared: &Shared, client: &zk::Client, dir: &str) -> Result<(), zk::Error> {
    let options = shared.dir_mode().with_acls(shared.acls);
    match client.mkdir(dir, &options).await {
        Err(zk::Error::Unimplemented) if shared.dir_mode() == zk::CreateMode::Container => {
            shared.no_containers();
            let options = zk::CreateMode::Persistent.with_acls(shared.acls);
            client.mkdir(dir, &options).await
        }
        other => other,
    }
}

/// The node with the protected `prefix` in `dir`, if it was created (protected mode).
async fn find(shared: &Shared, dir: &str, prefix: &str, epoch: u64) -> Result<Option<OwnNode>> {
    let client = shared.client()?;
    let children = match client.list_children(dir).await {
        Ok(children) => children,
        Err(zk::Error::NoNode) => return Ok(None),
        Err(err) => return Err(shared.error(err)),
    };
    let Some(name) = children.into_iter().find(|c| c.starts_with(prefix)) else {
        return Ok(None);
    };
    let path = format!("{dir}/{name}");
    match client.check_stat(&path).await {
        Ok(Some(stat)) => Ok(Some(OwnNode {
            path,
            name,
            token: u64::try_from(stat.czxid).unwrap_or_default(),
            epoch,
        })),
        Ok(None) => Ok(None),
        Err(err) => Err(shared.error(err)),
    }
}

/// How a wait on another node ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Waited {
    /// It changed or went: look again.
    Changed,
    /// The deadline passed first.
    TimedOut,
}

/// Waits until the node `path` is deleted (or anything else happens to it), the deadline
/// passes, or the client shuts down. The watch is set with a data read, as Curator does, so no
/// watch is left on a node that is already gone.
///
/// # Errors
/// Store errors; [`Error::Closed`] when the shutdown starts.
pub(crate) async fn wait_gone(
    shared: &Shared,
    path: &str,
    deadline: Option<Instant>,
) -> Result<Waited> {
    let client = shared.client()?;
    let watcher = match client.get_and_watch_data(path).await {
        Ok((_, _, watcher)) => watcher,
        Err(zk::Error::NoNode) => return Ok(Waited::Changed),
        Err(err) => return Err(shared.error(err)),
    };
    drop(client);
    let timer = async {
        match deadline {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _event = watcher.changed() => Ok(Waited::Changed),
        () = timer => Ok(Waited::TimedOut),
        () = shared.background.closing() => Err(Error::Closed),
    }
}

/// How many times one acquisition re-creates its node when the node vanished while it waited
/// (Curator's retry of a `NoNode` for its own sequential node, bounded by its retry policy).
pub(crate) const NODE_RECREATES: u32 = 3;

/// Where a contender stands after a wait.
#[derive(Debug)]
enum Turn {
    /// Nothing to wait for: ours.
    Ours,
    /// The deadline passed first.
    TimedOut,
    /// Our node is not among the contenders any more.
    Vanished,
}

/// Contends for `dir` under `lock_name`: creates this acquisition's node and waits until
/// `decide` (given the contenders in order and the index of ours) names no node to wait for.
/// A node that vanished while it waited (deleted by someone, or gone with an ended session) is
/// created again and the wait goes on, up to [`NODE_RECREATES`] times (Curator's
/// `LockInternals.attemptLock`). `Ok(None)` when the deadline passed first; the node is then
/// deleted. The undo returned with the node deletes it unless disarmed (when the node is
/// handed to a guard).
///
/// # Errors
/// Store errors (a few lost connections are ridden out); [`NodeGone`] as the source of an
/// [`Error::Store`] when our node vanished once more than the bound; [`Error::Closed`].
pub(crate) async fn contend(
    shared: &Arc<Shared>,
    dir: &str,
    lock_name: &str,
    names: &[&str],
    data: &[u8],
    deadline: Option<Instant>,
    decide: impl Fn(&[String], usize) -> Option<String>,
) -> Result<Option<(OwnNode, NodeUndo)>> {
    let mut recreated = 0u32;
    loop {
        let (node, undo) = create(shared, dir, lock_name, data).await?;
        match wait_turn(shared, dir, names, &node, deadline, &decide).await? {
            Turn::Ours => return Ok(Some((node, undo))),
            Turn::TimedOut => {
                undo.run_now().await?;
                return Ok(None);
            }
            Turn::Vanished if recreated < NODE_RECREATES => {
                recreated += 1;
                // The node is not listed any more: nothing to undo.
                undo.disarm();
                tracing::debug!(target: "keylatch::zookeeper", node = %node.path, recreated, "our node vanished while waiting: creating it again");
                tokio::time::sleep(Backoff::nth(
                    Duration::from_millis(20),
                    Duration::from_millis(640),
                    recreated - 1,
                ))
                .await;
            }
            Turn::Vanished => {
                undo.disarm();
                return Err(Error::Store(StoreError::new(NodeGone(node.path))));
            }
        }
    }
}

/// Waits, with `node` created, until it is ours, the deadline passes, or it vanished.
async fn wait_turn(
    shared: &Arc<Shared>,
    dir: &str,
    names: &[&str],
    node: &OwnNode,
    deadline: Option<Instant>,
    decide: &impl Fn(&[String], usize) -> Option<String>,
) -> Result<Turn> {
    // A few lost connections in a row are ridden out, with the acquisitions' back-off.
    let mut failures = 0u32;
    let mut step = || async move {
        let children = children(shared, dir, names).await?;
        let Some(mine) = children.iter().position(|c| *c == node.name) else {
            return Ok(Attempt::Done(Turn::Vanished));
        };
        match decide(&children, mine) {
            None => Ok(Attempt::Done(Turn::Ours)),
            Some(other) => match wait_gone(shared, &format!("{dir}/{other}"), deadline).await? {
                Waited::Changed => Ok(Attempt::Retry(None)),
                Waited::TimedOut => Ok(Attempt::Done(Turn::TimedOut)),
            },
        }
    };
    loop {
        if let Attempt::Done(turn) = retrying(&mut step, deadline, &mut failures).await? {
            return Ok(turn);
        }
    }
}
