//! Forming the cluster (slots, introductions, replicas), its health, failovers, and the
//! raw commands and views the other parts use.

use super::*;

impl RedisCluster {
    // --- forming --------------------------------------------------------------------

    /// Assigns the slots, introduces the nodes, attaches the replicas and waits until
    /// the cluster is ready.
    pub(super) fn form(&mut self) -> io::Result<()> {
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
    pub(super) fn met(&self) -> Result<(), String> {
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
    pub(super) fn formed(&self) -> Result<(), String> {
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
    pub(super) fn wait_for(
        &self,
        what: &str,
        state: impl Fn(&Self) -> Result<(), String>,
    ) -> io::Result<()> {
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
    pub(super) fn request(
        &self,
        node: &RedisServer,
        args: &[&str],
        timeout: Duration,
    ) -> io::Result<Reply> {
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
    pub(super) fn text(
        &self,
        node: &RedisServer,
        args: &[&str],
        timeout: Duration,
    ) -> io::Result<String> {
        self.request(node, args, timeout).map(|r| r.render())
    }

    /// A command whose reply does not matter, with the long timeout.
    pub(super) fn command(&self, node: &RedisServer, args: &[&str]) -> io::Result<()> {
        self.request(node, args, COMMAND_TIMEOUT).map(drop)
    }

    /// `CLUSTER NODES` of `node`.
    pub(super) fn view_of(&self, node: &RedisServer) -> io::Result<Vec<NodeLine>> {
        parse_nodes(&self.text(node, &["CLUSTER", "NODES"], PROBE_TIMEOUT)?)
    }

    /// `CLUSTER NODES` of every node (`None` for one that does not answer).
    pub(super) fn views(&self) -> Vec<(&RedisServer, Option<Vec<NodeLine>>)> {
        self.nodes
            .iter()
            .map(|n| (n, self.view_of(n).ok()))
            .collect()
    }

    /// `CLUSTER NODES` of the first node that answers.
    pub(super) fn view(&self) -> io::Result<Vec<NodeLine>> {
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
    pub(super) fn members(&self, role: fn(&NodeLine) -> bool) -> Vec<&RedisServer> {
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

    pub(super) fn index_of(&self, node: &RedisServer) -> io::Result<usize> {
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

    pub(super) fn node_by_id(&self, id: &str) -> io::Result<&RedisServer> {
        self.ids
            .iter()
            .position(|i| i == id)
            .map(|i| &self.nodes[i])
            .ok_or_else(|| io::Error::other(format!("the cluster names unknown node {id}")))
    }

    /// The port of the node with `id`, 0 if unknown (for messages).
    pub(super) fn port_of(&self, id: &str) -> u16 {
        self.node_by_id(id).map_or(0, RedisServer::port)
    }
}
