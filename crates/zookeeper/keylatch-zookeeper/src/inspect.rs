//! What is under a lock's path, for `keylatch inspect` (Curator's `getParticipantNodes`): the
//! contenders of a mutex, a read-write lock or a semaphore, in queue order, with the owner id
//! each node carries.
//!
//! May import: keylatch-core, `client`, `node`, `path`, `session`, the recipes' node names.

use keylatch_core::Result;
use zookeeper_client as zk;

use crate::client::ZkClient;
use crate::mutex::LOCK_NAME;
use crate::node::children;
use crate::path::lock_path;
use crate::rwlock::{READ_NAME, WRITE_NAME};
use crate::semaphore::LEASE_NAME;
use crate::session::Shared;

/// The most bytes of a node's data shown (an owner id is 50).
const SHOWN_DATA: usize = 200;

/// One node under a lock's path.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Contender {
    /// The node's name (`_c_<uuid>-lock-0000000003`).
    pub node: String,
    /// Which recipe's node it is: `lock` (mutex), `read`, `write` (read-write lock) or `lease`
    /// (a semaphore's permit).
    pub kind: &'static str,
    /// The node's data as text, at most 200 bytes (keylatch writes the owner id; Curator,
    /// by default, the client's address); `None` when the node went meanwhile.
    pub data: Option<String>,
}

/// The nodes under a lock's path, in queue order within each kind.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Contenders {
    /// The lock's znode (inside the chroot).
    pub path: String,
    /// The mutex's or read-write lock's nodes, first first (the first holds a mutex).
    pub nodes: Vec<Contender>,
    /// The semaphore's lease nodes (held permits).
    pub leases: Vec<Contender>,
}

impl ZkClient {
    /// Lists the contenders for `name` (named as [`lock`](ZkClient::lock)'s), reading the data
    /// of at most `limit` nodes of each list (the rest are listed without it). Writes nothing.
    ///
    /// # Errors
    /// [`Error::InvalidName`](keylatch_core::Error::InvalidName); store errors.
    pub async fn contenders(&self, name: &str, limit: usize) -> Result<Contenders> {
        let path = lock_path(&self.shared.base, name)?;
        let nodes = children(&self.shared, &path, &[LOCK_NAME, READ_NAME, WRITE_NAME]).await?;
        let leases_dir = format!("{path}/leases");
        let leases = children(&self.shared, &leases_dir, &[LEASE_NAME]).await?;
        let client = self.shared.client()?;
        Ok(Contenders {
            nodes: read_all(&self.shared, &client, &path, nodes, limit).await?,
            leases: read_all(&self.shared, &client, &leases_dir, leases, limit).await?,
            path,
        })
    }
}

fn kind(node: &str) -> &'static str {
    if node.contains(READ_NAME) {
        "read"
    } else if node.contains(WRITE_NAME) {
        "write"
    } else if node.contains(LEASE_NAME) {
        "lease"
    } else {
        "lock"
    }
}

async fn read_all(
    shared: &Shared,
    client: &zk::Client,
    dir: &str,
    nodes: Vec<String>,
    limit: usize,
) -> Result<Vec<Contender>> {
    let mut out = Vec::with_capacity(nodes.len());
    for (i, node) in nodes.into_iter().enumerate() {
        let data = if i < limit {
            match client.get_data(&format!("{dir}/{node}")).await {
                Ok((bytes, _)) => {
                    let shown = &bytes[..bytes.len().min(SHOWN_DATA)];
                    Some(String::from_utf8_lossy(shown).into_owned())
                }
                Err(zk::Error::NoNode) => None,
                Err(err) => return Err(shared.error(err)),
            }
        } else {
            None
        };
        out.push(Contender {
            kind: kind(&node),
            node,
            data,
        });
    }
    Ok(out)
}
