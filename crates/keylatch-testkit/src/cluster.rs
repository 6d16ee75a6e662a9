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

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone, PartialEq)]
struct NodeLine {
    id: String,
    port: u16,
    flags: Vec<String>,
    /// The id of the primary, for a replica.
    primary: Option<String>,
    /// Owned slot ranges, inclusive.
    slots: Vec<(u16, u16)>,
}

impl NodeLine {
    fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    fn is_primary(&self) -> bool {
        self.has_flag("master")
    }

    fn is_replica(&self) -> bool {
        self.has_flag("slave")
    }

    /// The cluster agreed that the node is down (`fail`, not just suspected `fail?`).
    fn failed(&self) -> bool {
        self.has_flag("fail")
    }

    fn owns(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
    }
}

/// Parses the text of `CLUSTER NODES`.
fn parse_nodes(text: &str) -> io::Result<Vec<NodeLine>> {
    let bad = |line: &str| io::Error::other(format!("unexpected CLUSTER NODES line {line:?}"));
    let mut nodes = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 {
            return Err(bad(line));
        }
        // ip:port@cport[,hostname]
        let port = fields[1]
            .split(['@', ','])
            .next()
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| bad(line))?;
        let mut slots = Vec::new();
        // `[slot->-id]` / `[slot-<-id]`: a slot being migrated or imported, not owned.
        for range in fields[8..].iter().filter(|r| !r.starts_with('[')) {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            match (a.parse(), b.parse()) {
                (Ok(a), Ok(b)) => slots.push((a, b)),
                _ => return Err(bad(line)),
            }
        }
        nodes.push(NodeLine {
            id: fields[0].to_owned(),
            port,
            flags: fields[2].split(',').map(str::to_owned).collect(),
            primary: (fields[3] != "-").then(|| fields[3].to_owned()),
            slots,
        });
    }
    Ok(nodes)
}

/// The slot ranges of the primaries in `view`, with their owners' ids, sorted.
fn slot_map(view: &[NodeLine]) -> Vec<(u16, u16, &str)> {
    let mut map: Vec<(u16, u16, &str)> = view
        .iter()
        .filter(|n| n.is_primary())
        .flat_map(|n| n.slots.iter().map(|&(a, b)| (a, b, n.id.as_str())))
        .collect();
    map.sort_unstable();
    map
}

/// The `field:value` line of an `INFO`-style text, if present.
fn info_field<'a>(text: &'a str, field: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
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

    /// Moves `slot` with all its keys from primary `from` to primary `to`:
    /// [`begin_slot_migration`](Self::begin_slot_migration),
    /// [`move_slot_keys`](Self::move_slot_keys), then
    /// [`finish_slot_migration`](Self::finish_slot_migration). Returns the number of
    /// keys moved.
    pub fn migrate_slot(
        &self,
        slot: u16,
        from: &RedisServer,
        to: &RedisServer,
    ) -> io::Result<usize> {
        self.begin_slot_migration(slot, from, to)?;
        let moved = self.move_slot_keys(slot, from, to)?;
        self.finish_slot_migration(slot, to)?;
        Ok(moved)
    }

    /// Starts moving `slot` from primary `from` to primary `to`: `CLUSTER SETSLOT slot
    /// IMPORTING` on `to`, then `CLUSTER SETSLOT slot MIGRATING` on `from`. From then on
    /// `from` answers `ASK` for keys of the slot it no longer has.
    pub fn begin_slot_migration(
        &self,
        slot: u16,
        from: &RedisServer,
        to: &RedisServer,
    ) -> io::Result<()> {
        let from_id = &self.ids[self.index_of(from)?];
        let to_id = &self.ids[self.index_of(to)?];
        if from_id == to_id {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a slot cannot move to the node it is on",
            ));
        }
        let slot = slot.to_string();
        self.command(to, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", from_id])?;
        self.command(from, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", to_id])?;
        Ok(())
    }

    /// Moves the keys of `slot` from `from` to `to`, 100 at a time (`CLUSTER
    /// GETKEYSINSLOT`, then `MIGRATE … KEYS …`, logged in to `to` with the cluster's
    /// password), after [`begin_slot_migration`](Self::begin_slot_migration). Returns the
    /// number of keys handed to `MIGRATE`. Keys must be UTF-8.
    pub fn move_slot_keys(
        &self,
        slot: u16,
        from: &RedisServer,
        to: &RedisServer,
    ) -> io::Result<usize> {
        self.index_of(from)?;
        self.index_of(to)?;
        let slot_text = slot.to_string();
        let to_port = to.port().to_string();
        let deadline = Instant::now() + MOVE_KEYS_TIMEOUT;
        let mut moved = 0;
        loop {
            let keys = match self.request(
                from,
                &["CLUSTER", "GETKEYSINSLOT", &slot_text, KEYS_PER_BATCH],
                COMMAND_TIMEOUT,
            )? {
                Reply::Array(items) => items
                    .into_iter()
                    .map(|item| match item {
                        Reply::Bulk(b) => String::from_utf8(b).map_err(|_| {
                            io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("a key in slot {slot} is not UTF-8"),
                            )
                        }),
                        other => Err(io::Error::other(format!("GETKEYSINSLOT: {other:?}"))),
                    })
                    .collect::<io::Result<Vec<String>>>()?,
                other => return Err(io::Error::other(format!("GETKEYSINSLOT: {other:?}"))),
            };
            if keys.is_empty() {
                return Ok(moved);
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "slot {slot}: keys left on node {} after {MOVE_KEYS_TIMEOUT:?} ({moved} moved)",
                        from.port()
                    ),
                ));
            }
            let mut args = vec![
                "MIGRATE",
                "127.0.0.1",
                &to_port,
                "",
                "0",
                MIGRATE_TIMEOUT_MS,
            ];
            if let Some(Secret(password)) = &self.password {
                args.extend(["AUTH", password.as_str()]);
            }
            args.push("KEYS");
            args.extend(keys.iter().map(String::as_str));
            self.request(from, &args, COMMAND_TIMEOUT)?;
            moved += keys.len();
        }
    }

    /// Ends a slot migration: `CLUSTER SETSLOT slot NODE <to>` on `to`, then on every
    /// other primary (the source among them; it refuses while it still holds keys of the
    /// slot). Then waits until every node that answers names `to` as the owner.
    pub fn finish_slot_migration(&self, slot: u16, to: &RedisServer) -> io::Result<()> {
        let to_id = &self.ids[self.index_of(to)?];
        let slot_text = slot.to_string();
        let setslot = ["CLUSTER", "SETSLOT", &slot_text, "NODE", to_id];
        self.command(to, &setslot)?;
        let view = self.view_of(to)?;
        for line in view.iter().filter(|n| n.is_primary() && !n.failed()) {
            if line.id != *to_id {
                self.command(self.node_by_id(&line.id)?, &setslot)?;
            }
        }
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            let lagging: Vec<u16> = self
                .views()
                .into_iter()
                .filter_map(|(node, view)| {
                    let view = view?;
                    let owner = view.iter().find(|n| n.is_primary() && n.owns(slot));
                    (owner.map(|n| &n.id) != Some(to_id)).then(|| node.port())
                })
                .collect();
            if lagging.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "slot {slot}: nodes {lagging:?} do not name node {} as its owner \
                         after {SETTLE_TIMEOUT:?}",
                        to.port()
                    ),
                ));
            }
            thread::sleep(POLL);
        }
    }

    // --- forming --------------------------------------------------------------------

    /// Assigns the slots, introduces the nodes, attaches the replicas and waits until
    /// the cluster is ready.
    fn form(&mut self) -> io::Result<()> {
        for node in &self.nodes {
            let id = self.text(node, &["CLUSTER", "MYID"], COMMAND_TIMEOUT)?;
            self.ids.push(id.trim().to_owned());
        }
        let primaries = self.primaries_at_start;
        for (i, node) in self.nodes.iter().enumerate() {
            // Distinct config epochs, as redis-cli gives them, so that no collision
            // has to be resolved first.
            let epoch = (i + 1).to_string();
            self.command(node, &["CLUSTER", "SET-CONFIG-EPOCH", &epoch])?;
        }
        let slots = SLOT_COUNT as usize;
        for (i, node) in self.nodes[..primaries].iter().enumerate() {
            let start = (i * slots / primaries).to_string();
            let end = ((i + 1) * slots / primaries - 1).to_string();
            self.command(node, &["CLUSTER", "ADDSLOTSRANGE", &start, &end])?;
        }
        let first = &self.nodes[0];
        for node in &self.nodes[1..] {
            let port = node.port().to_string();
            self.command(first, &["CLUSTER", "MEET", "127.0.0.1", &port])?;
        }
        self.wait_for("the nodes to meet", |c| c.met())?;
        for (k, node) in self.nodes[primaries..].iter().enumerate() {
            let primary_id = &self.ids[k % primaries];
            self.command(node, &["CLUSTER", "REPLICATE", primary_id])?;
        }
        self.wait_for("the cluster to form", |c| c.formed())
    }

    /// `Ok` once every node knows every other node (no handshake left).
    fn met(&self) -> Result<(), String> {
        for node in &self.nodes {
            let view = self.view_of(node).map_err(|e| e.to_string())?;
            for (other, id) in self.nodes.iter().zip(&self.ids) {
                match view.iter().find(|n| n.id == *id) {
                    None => {
                        return Err(format!(
                            "node {} does not know node {} yet",
                            node.port(),
                            other.port()
                        ));
                    }
                    Some(line) if line.has_flag("handshake") || line.has_flag("noaddr") => {
                        return Err(format!(
                            "node {} lists node {} as {}",
                            node.port(),
                            other.port(),
                            line.flags.join(",")
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }

    /// `Ok` once every node reports `cluster_state:ok` and lists every node in its
    /// intended role, healthy, and every replica is in sync.
    fn formed(&self) -> Result<(), String> {
        let primaries = self.primaries_at_start;
        for (i, node) in self.nodes.iter().enumerate() {
            let port = node.port();
            let info = self
                .text(node, &["CLUSTER", "INFO"], PROBE_TIMEOUT)
                .map_err(|e| format!("node {port}: {e}"))?;
            let state = info_field(&info, "cluster_state").unwrap_or("?");
            if state != "ok" {
                return Err(format!("node {port}: cluster_state:{state}"));
            }
            let view = self.view_of(node).map_err(|e| e.to_string())?;
            for (j, (other, id)) in self.nodes.iter().zip(&self.ids).enumerate() {
                let line = view.iter().find(|n| n.id == *id);
                let want_primary = (j >= primaries).then(|| &self.ids[(j - primaries) % primaries]);
                let fine = line.is_some_and(|l| {
                    !l.flags
                        .iter()
                        .any(|f| f.starts_with("fail") || f == "handshake")
                        && match want_primary {
                            None => l.is_primary(),
                            Some(p) => l.is_replica() && l.primary.as_ref() == Some(p),
                        }
                });
                if !fine {
                    return Err(format!(
                        "node {port} lists node {} as {:?}",
                        other.port(),
                        line.map(|l| (l.flags.join(","), l.primary.clone()))
                    ));
                }
            }
            if i >= primaries {
                let replication = self
                    .text(node, &["INFO", "replication"], PROBE_TIMEOUT)
                    .map_err(|e| format!("node {port}: {e}"))?;
                let link = info_field(&replication, "master_link_status").unwrap_or("?");
                if link != "up" {
                    return Err(format!("replica {port}: master_link_status:{link}"));
                }
            }
        }
        Ok(())
    }

    /// Polls `state` until it is `Ok`, for at most [`FORM_TIMEOUT`].
    fn wait_for(&self, what: &str, state: impl Fn(&Self) -> Result<(), String>) -> io::Result<()> {
        let deadline = Instant::now() + FORM_TIMEOUT;
        loop {
            let result = state(self);
            if result.is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "timed out after {FORM_TIMEOUT:?} waiting for {what}: {}",
                        result.err().unwrap_or_default()
                    ),
                ));
            }
            thread::sleep(POLL);
        }
    }

    // --- talking to the nodes ---------------------------------------------------------

    /// Sends one command to `node` (logged in with the cluster's password), waiting at
    /// most `timeout` for the reply. An error reply becomes an error naming the node.
    fn request(&self, node: &RedisServer, args: &[&str], timeout: Duration) -> io::Result<Reply> {
        let target = Target::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, node.port())));
        let password = self.password.as_ref().map(|p| p.0.as_str());
        match resp::request_to(&target, password, args, timeout.min(PROBE_TIMEOUT), timeout) {
            Ok(Reply::Error(msg)) => Err(io::Error::other(format!(
                "node {}: {} {}: {msg}",
                node.port(),
                args[0],
                args.get(1).unwrap_or(&"")
            ))),
            Ok(reply) => Ok(reply),
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!("node {}: {}: {e}", node.port(), args[0]),
            )),
        }
    }

    /// [`request`](Self::request), the reply rendered as text.
    fn text(&self, node: &RedisServer, args: &[&str], timeout: Duration) -> io::Result<String> {
        self.request(node, args, timeout).map(|r| r.render())
    }

    /// A command whose reply does not matter, with the long timeout.
    fn command(&self, node: &RedisServer, args: &[&str]) -> io::Result<()> {
        self.request(node, args, COMMAND_TIMEOUT).map(drop)
    }

    /// `CLUSTER NODES` of `node`.
    fn view_of(&self, node: &RedisServer) -> io::Result<Vec<NodeLine>> {
        parse_nodes(&self.text(node, &["CLUSTER", "NODES"], PROBE_TIMEOUT)?)
    }

    /// `CLUSTER NODES` of every node (`None` for one that does not answer).
    fn views(&self) -> Vec<(&RedisServer, Option<Vec<NodeLine>>)> {
        self.nodes
            .iter()
            .map(|n| (n, self.view_of(n).ok()))
            .collect()
    }

    /// `CLUSTER NODES` of the first node that answers.
    fn view(&self) -> io::Result<Vec<NodeLine>> {
        let mut last = None;
        for node in &self.nodes {
            match self.view_of(node) {
                Ok(view) => return Ok(view),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("the cluster has no nodes")))
    }

    /// The nodes whose line in the cluster's view passes `role` (and are not failed).
    fn members(&self, role: fn(&NodeLine) -> bool) -> Vec<&RedisServer> {
        let Ok(view) = self.view() else {
            return Vec::new();
        };
        self.nodes
            .iter()
            .zip(&self.ids)
            .filter(|(_, id)| view.iter().any(|n| n.id == **id && role(n) && !n.failed()))
            .map(|(node, _)| node)
            .collect()
    }

    fn index_of(&self, node: &RedisServer) -> io::Result<usize> {
        self.nodes
            .iter()
            .position(|n| n.port() == node.port())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("port {} is not a node of this cluster", node.port()),
                )
            })
    }

    fn node_by_id(&self, id: &str) -> io::Result<&RedisServer> {
        self.ids
            .iter()
            .position(|i| i == id)
            .map(|i| &self.nodes[i])
            .ok_or_else(|| io::Error::other(format!("the cluster names unknown node {id}")))
    }

    /// The port of the node with `id`, 0 if unknown (for messages).
    fn port_of(&self, id: &str) -> u16 {
        self.node_by_id(id).map_or(0, RedisServer::port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cluster_nodes() {
        let text = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@40004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@40002,host.example master - 0 1426238316232 2 connected 5461-10922 [10923->-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca]
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 16383
6ec23923021cf3ffec47632106199cb7f496ce01 :0@0 master,fail?,noaddr - 1426238316232 0 5 disconnected
";
        let nodes = parse_nodes(text).unwrap();
        assert_eq!(nodes.len(), 4);
        assert!(nodes[0].is_replica());
        assert_eq!(nodes[0].port, 30004);
        assert_eq!(
            nodes[0].primary.as_deref(),
            Some("e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca")
        );
        assert_eq!(nodes[1].port, 30002);
        assert_eq!(nodes[1].slots, vec![(5461, 10922)]);
        assert!(!nodes[1].owns(10923));
        assert!(nodes[2].is_primary() && nodes[2].has_flag("myself"));
        assert_eq!(nodes[2].slots, vec![(0, 5460), (16383, 16383)]);
        assert!(nodes[2].owns(16383) && !nodes[2].owns(5461));
        assert_eq!(nodes[3].port, 0);
        assert!(!nodes[3].failed() && nodes[3].has_flag("fail?"));
        let map = slot_map(&nodes);
        assert_eq!(map[0].0, 0);
        assert_eq!(map.len(), 3);
        assert!(parse_nodes("garbage line").is_err());
    }

    #[test]
    fn reads_info_fields() {
        let text = "# Cluster\r\ncluster_state:ok\r\ncluster_slots_assigned:16384\r\n";
        assert_eq!(info_field(text, "cluster_state"), Some("ok"));
        assert_eq!(info_field(text, "cluster_slots"), None);
        assert_eq!(info_field(text, "missing"), None);
    }
}
