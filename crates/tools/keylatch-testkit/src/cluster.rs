//! A Redis Cluster on loopback: primaries, each with replicas, formed with raw `CLUSTER`
//! commands (no `redis-cli`).

use std::collections::HashSet;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::thread;
use std::time::{Duration, Instant};

use crate::RedisServer;
use crate::resp::{self, Reply, Target};
use crate::server::Secret;

mod form;
mod migrate;
mod nodes;

use nodes::{NodeLine, info_field, parse_nodes, slot_map};

/// Hash slots of a Redis Cluster.
const SLOT_COUNT: u32 = 16384;
/// Each node's cluster configuration file, in its own directory.
const NODES_FILE: &str = "nodes.conf";
/// `cluster-node-timeout`: how long a node may be unreachable before it is suspected.
const NODE_TIMEOUT_MS: &str = "500";
/// How long forming the cluster may take, per stage.
const FORM_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`RedisCluster::failover`] and slot ownership changes may take to settle.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`RedisCluster::move_slot_keys`] may take in all.
const MOVE_KEYS_TIMEOUT: Duration = Duration::from_secs(60);
/// Keys asked for (and migrated) at a time.
const KEYS_PER_BATCH: &str = "100";
/// `MIGRATE` timeout, in milliseconds.
const MIGRATE_TIMEOUT_MS: &str = "5000";
/// Reply timeout of a single command (longer than the `MIGRATE` timeout).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// Reply timeout of a probe while polling: a node that does not answer in time (paused,
/// or killed) counts as down.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
const POLL: Duration = Duration::from_millis(20);

/// Options for a [`RedisCluster`]; made by [`RedisCluster::builder`].
#[derive(Debug, Clone)]
pub struct RedisClusterBuilder {
    primaries: usize,
    replicas_per_primary: usize,
    password: Option<Secret>,
}

impl Default for RedisClusterBuilder {
    fn default() -> Self {
        RedisClusterBuilder {
            primaries: 3,
            replicas_per_primary: 1,
            password: None,
        }
    }
}

impl RedisClusterBuilder {
    /// How many primaries share the 16384 slots (3 by default; at least 1).
    pub fn primaries(mut self, count: usize) -> Self {
        self.primaries = count;
        self
    }

    /// How many replicas each primary has (1 by default; 0 for none).
    pub fn replicas_per_primary(mut self, count: usize) -> Self {
        self.replicas_per_primary = count;
        self
    }

    /// Requires `password` on every node (`requirepass`; `masterauth` for the replicas).
    /// It goes to the nodes in configuration files only, never on the command line; the
    /// cluster's own commands ([`RedisServer::cli`] too) log in with it.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(Secret(password.into()));
        self
    }

    /// Starts every node, forms the cluster and waits until it is ready: the slots
    /// split evenly over the primaries, every node knows every other node in its role,
    /// reports `cluster_state:ok`, and every replica is in sync with its primary.
    ///
    /// Takes about 2 seconds (a fresh primary waits that long before it reports `ok`).
    /// Each stage gives up after 30 seconds with an error that says what was missing.
    pub fn start(self) -> io::Result<RedisCluster> {
        if self.primaries == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a cluster needs at least one primary",
            ));
        }
        if self.primaries > SLOT_COUNT as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a cluster has at most 16384 primaries (one per slot)",
            ));
        }
        let count = self.primaries * (1 + self.replicas_per_primary);
        let nodes = thread::scope(|scope| {
            let handles: Vec<_> = (0..count)
                .map(|_| scope.spawn(|| self.node_builder().start()))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(io::Error::other("a node's start panicked")))
                })
                .collect::<Vec<_>>()
        });
        // On an error the started nodes are dropped, which stops them.
        let nodes = nodes.into_iter().collect::<io::Result<Vec<_>>>()?;
        let mut cluster = RedisCluster {
            nodes,
            ids: Vec::new(),
            primaries_at_start: self.primaries,
            password: self.password,
        };
        cluster.form()?;
        Ok(cluster)
    }

    fn node_builder(&self) -> crate::RedisServerBuilder {
        let builder = RedisServer::builder()
            .cluster_node(NODES_FILE)
            .arg("--cluster-enabled")
            .arg("yes")
            .arg("--cluster-config-file")
            .arg(NODES_FILE)
            .arg("--cluster-node-timeout")
            .arg(NODE_TIMEOUT_MS)
            .arg("--repl-diskless-sync")
            .arg("yes")
            .arg("--repl-diskless-sync-delay")
            .arg("0");
        match &self.password {
            Some(p) => builder.password(p.0.clone()),
            None => builder,
        }
    }
}

/// A Redis Cluster on loopback: three primaries with one replica each by default, for
/// tests. Dropping it stops every node.
///
/// The nodes use `cluster-node-timeout 500` (a node unreachable for half a second is
/// suspected, and a replica takes over a failed primary within a few seconds) and keep
/// the default `cluster-require-full-coverage yes`: while a slot has no live owner the
/// whole cluster refuses commands with `CLUSTERDOWN`, as a production cluster does by
/// default, and `cluster_state:ok` means every slot is served.
///
/// Roles change (failovers), so [`primaries`](Self::primaries) and
/// [`replicas`](Self::replicas) ask the cluster instead of relying on the start order.
/// The helpers that poll count a node that does not answer within a second (killed or
/// [paused](RedisServer::pause)) as down.
///
/// ```no_run
/// use keylatch_testkit::RedisCluster;
///
/// let cluster = RedisCluster::start()?;
/// println!("connect to {}", cluster.seed_url()); // redis+cluster://127.0.0.1:…,…
/// let owner = cluster.node_for_key("lock:{order-7}")?;
/// owner.cli(&["SET", "lock:{order-7}", "me"])?;
///
/// // Promote the replica of that primary.
/// let replica = cluster.replicas_of(owner)?[0];
/// let took = cluster.failover(replica)?;
/// println!("failover in {took:?}");
///
/// // Move the key's slot (with the key) to another primary.
/// let slot = cluster.keyslot("lock:{order-7}")?;
/// let from = cluster.node_for_slot(slot)?;
/// let to = cluster.primaries().into_iter().find(|p| p.port() != from.port()).unwrap();
/// assert_eq!(cluster.migrate_slot(slot, from, to)?, 1);
/// assert_eq!(cluster.node_for_key("lock:{order-7}")?.port(), to.port());
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    /// Node ids, in the order of `nodes`.
    ids: Vec<String>,
    /// The first this many `nodes` were started as primaries.
    primaries_at_start: usize,
    password: Option<Secret>,
}

impl std::fmt::Debug for RedisCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisCluster")
            .field(
                "nodes",
                &self.nodes.iter().map(|n| n.port()).collect::<Vec<_>>(),
            )
            .field("ids", &self.ids)
            .field("password", &self.password)
            .finish()
    }
}

impl RedisCluster {
    /// Starts a cluster with default options: 3 primaries with one replica each, no
    /// password.
    pub fn start() -> io::Result<RedisCluster> {
        Self::builder().start()
    }

    /// Returns a builder for a cluster of another shape or with a password.
    pub fn builder() -> RedisClusterBuilder {
        RedisClusterBuilder::default()
    }

    /// Every node, in start order: the primaries first, then the replicas (the first
    /// replica of each primary, then the second, …). Failovers change the roles, not
    /// this order.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Every node, to [`pause`](RedisServer::pause), [`kill`](RedisServer::kill) or
    /// [`restart`](RedisServer::restart) one (a restarted node keeps its identity and
    /// rejoins, with no data).
    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// The node listening on `port`, to pause, kill or restart it.
    pub fn node_mut(&mut self, port: u16) -> Option<&mut RedisServer> {
        self.nodes.iter_mut().find(|n| n.port() == port)
    }

    /// The cluster's id of `node` (`CLUSTER MYID`), or `None` if it is not a node of
    /// this cluster.
    pub fn node_id(&self, node: &RedisServer) -> Option<&str> {
        self.index_of(node).ok().map(|i| self.ids[i].as_str())
    }

    /// The primaries, as the cluster sees them now (`CLUSTER NODES` of the first node
    /// that answers), in start order. Primaries the cluster has marked as failed are left
    /// out. Empty if no node answers.
    pub fn primaries(&self) -> Vec<&RedisServer> {
        self.members(NodeLine::is_primary)
    }

    /// The replicas, as the cluster sees them now, in start order (failed ones left
    /// out). Empty if no node answers.
    pub fn replicas(&self) -> Vec<&RedisServer> {
        self.members(NodeLine::is_replica)
    }

    /// The replicas of `primary`, as the cluster sees them now, in start order (failed
    /// ones left out).
    pub fn replicas_of(&self, primary: &RedisServer) -> io::Result<Vec<&RedisServer>> {
        let id = &self.ids[self.index_of(primary)?];
        let view = self.view()?;
        Ok(self
            .nodes
            .iter()
            .zip(&self.ids)
            .filter(|(_, node_id)| {
                view.iter().any(|n| {
                    &n.id == *node_id
                        && n.is_replica()
                        && !n.failed()
                        && n.primary.as_ref() == Some(id)
                })
            })
            .map(|(node, _)| node)
            .collect())
    }

    /// `redis://127.0.0.1:PORT` of the first node (no password).
    pub fn url(&self) -> String {
        self.nodes[0].url()
    }

    /// `redis://127.0.0.1:PORT` of every node, in start order.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,…` with every node as a seed (no
    /// password).
    pub fn seed_url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`, asked from the first node that
    /// answers); keys with the same `{hash tag}` share a slot.
    pub fn keyslot(&self, key: &str) -> io::Result<u16> {
        let mut last = None;
        for node in &self.nodes {
            match self.request(node, &["CLUSTER", "KEYSLOT", key], PROBE_TIMEOUT) {
                Ok(Reply::Integer(slot)) => {
                    return u16::try_from(slot)
                        .map_err(|_| io::Error::other(format!("bad slot {slot}")));
                }
                Ok(other) => return Err(io::Error::other(format!("CLUSTER KEYSLOT: {other:?}"))),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("the cluster has no nodes")))
    }

    /// The primary that owns the slot of `key` now.
    pub fn node_for_key(&self, key: &str) -> io::Result<&RedisServer> {
        self.node_for_slot(self.keyslot(key)?)
    }

    /// The primary that owns `slot` now, as the first node that answers sees it.
    pub fn node_for_slot(&self, slot: u16) -> io::Result<&RedisServer> {
        let view = self.view()?;
        let owner = view
            .iter()
            .find(|n| n.is_primary() && n.owns(slot))
            .ok_or_else(|| io::Error::other(format!("no node owns slot {slot}")))?;
        self.node_by_id(&owner.id)
    }

    /// Forces a failover to `replica` (`CLUSTER FAILOVER`, which needs its primary to be
    /// up; wait for the cluster's own failover when the primary is down) and returns how
    /// long it took from the command until `replica` reports itself as master (`ROLE`)
    /// and every node that answers lists it as a master. Then waits until the cluster is
    /// [ok](Self::wait_ok) again (the old primary a replica of the new one, in sync), so
    /// that another failover can follow.
    pub fn failover(&self, replica: &RedisServer) -> io::Result<Duration> {
        let index = self.index_of(replica)?;
        let id = &self.ids[index];
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        let started = Instant::now();
        self.command(replica, &["CLUSTER", "FAILOVER"])?;
        loop {
            let state = self.promoted(replica, id);
            if state.is_ok() {
                break;
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "node {} did not take over within {SETTLE_TIMEOUT:?}: {}",
                        replica.port(),
                        state.err().unwrap_or_default()
                    ),
                ));
            }
            thread::sleep(POLL);
        }
        let took = started.elapsed();
        self.wait_ok(deadline.saturating_duration_since(Instant::now()))?;
        Ok(took)
    }

    /// `Ok` once `replica` says it is a master and every node that answers agrees.
    fn promoted(&self, replica: &RedisServer, id: &str) -> Result<(), String> {
        let role = self
            .text(replica, &["ROLE"], PROBE_TIMEOUT)
            .map_err(|e| format!("ROLE: {e}"))?;
        if !role.starts_with("master") {
            return Err(format!("it reports ROLE {:?}", role.lines().next()));
        }
        for (node, view) in self.views() {
            let Some(view) = view else { continue };
            if !view.iter().any(|n| n.id == id && n.is_primary()) {
                return Err(format!(
                    "node {} does not list it as a master yet",
                    node.port()
                ));
            }
        }
        Ok(())
    }

    /// Waits until the cluster serves every slot again and has settled: every node that
    /// answers (a killed or paused node does not) reports `cluster_state:ok`, they agree
    /// on which primary owns which slots, every owner answers, every replica that
    /// answers is in sync with its primary (`master_link_status:up`), and every node that
    /// answers lists every other one that does in the role that one reports for itself,
    /// not marked `fail` or `fail?`.
    ///
    /// Right after a primary was killed the others still report `ok`, but its slots
    /// have an owner that does not answer, so this waits for a replica to take over.
    pub fn wait_ok(&self, timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let state = self.health();
            if state.is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the cluster was not ok within {timeout:?}: {}",
                        state.err().unwrap_or_default()
                    ),
                ));
            }
            thread::sleep(POLL);
        }
    }

    /// `Ok` if the cluster is healthy (see [`wait_ok`](Self::wait_ok)), else what is not.
    fn health(&self) -> Result<(), String> {
        let mut live = Vec::new();
        for (node, id) in self.nodes.iter().zip(&self.ids) {
            // Not answering: down (killed or paused).
            let Ok(info) = self.text(node, &["CLUSTER", "INFO"], PROBE_TIMEOUT) else {
                continue;
            };
            let state = info_field(&info, "cluster_state").unwrap_or("?");
            if state != "ok" {
                return Err(format!("node {}: cluster_state:{state}", node.port()));
            }
            let view = self.view_of(node).map_err(|e| e.to_string())?;
            if view.iter().any(|n| n.id == *id && n.is_replica()) {
                let replication = self
                    .text(node, &["INFO", "replication"], PROBE_TIMEOUT)
                    .map_err(|e| format!("node {}: {e}", node.port()))?;
                let link = info_field(&replication, "master_link_status").unwrap_or("?");
                if link != "up" {
                    return Err(format!(
                        "replica {}: master_link_status:{link}",
                        node.port()
                    ));
                }
            }
            live.push((node, id, view));
        }
        let Some((first, _, first_view)) = live.first() else {
            return Err("no node answers".to_owned());
        };
        let live_ids: HashSet<&str> = live.iter().map(|(_, id, _)| id.as_str()).collect();
        let first_map = slot_map(first_view);
        for &(start, end, owner) in &first_map {
            if !live_ids.contains(owner) {
                return Err(format!(
                    "slots {start}-{end} belong to node {}, which does not answer",
                    self.port_of(owner)
                ));
            }
        }
        for (node, _, view) in &live[1..] {
            if slot_map(view) != first_map {
                return Err(format!(
                    "nodes {} and {} disagree on the slot owners",
                    first.port(),
                    node.port()
                ));
            }
        }
        // Every node sees every other live node healthy, in the role it has.
        for (target, id, own_view) in &live {
            let Some(own) = own_view.iter().find(|n| n.id == **id) else {
                return Err(format!("node {} does not list itself", target.port()));
            };
            for (viewer, _, view) in &live {
                let seen = view.iter().find(|n| n.id == **id);
                let agrees = seen.is_some_and(|l| {
                    !l.flags.iter().any(|f| f.starts_with("fail"))
                        && l.is_primary() == own.is_primary()
                        && l.primary == own.primary
                });
                if !agrees {
                    return Err(format!(
                        "node {} lists node {} as {:?}, not as {}",
                        viewer.port(),
                        target.port(),
                        seen.map(|l| l.flags.join(",")),
                        own.flags.join(",")
                    ));
                }
            }
        }
        Ok(())
    }
}
