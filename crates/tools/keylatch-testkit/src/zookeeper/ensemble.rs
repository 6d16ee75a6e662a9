//! A three-node ensemble on loopback: quorum ports, `myid` files, the leader, killing and
//! restarting a node.

use super::*;

/// Three ZooKeeper servers on loopback forming one ensemble (`server.1` to `server.3`,
/// quorum and election ports on `127.0.0.1`, a `myid` file in each data directory).
///
/// Dropping it stops every node and removes their directories.
#[derive(Debug)]
pub struct ZooKeeperEnsemble {
    nodes: Vec<ZooKeeperServer>,
}

impl ZooKeeperEnsemble {
    /// Starts three nodes and waits until every one serves and one of them leads.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::NotFound`] if ZooKeeper is not installed; an error quoting the
    /// logs if a node exits or the ensemble is not ready within 60 seconds. Ports taken
    /// meanwhile are retried with fresh ones a few times.
    pub fn start() -> io::Result<ZooKeeperEnsemble> {
        if !zookeeper_available() {
            return Err(not_installed());
        }
        let mut last_err = None;
        for _ in 0..START_ATTEMPTS {
            match Self::try_start()? {
                Ok(ensemble) => {
                    ensemble.wait_ready(Instant::now() + ENSEMBLE_READY_TIMEOUT)?;
                    return Ok(ensemble);
                }
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("could not start a ZooKeeper ensemble")))
    }

    /// One attempt: `Ok(Err(_))` if a port was taken (worth another attempt).
    fn try_start() -> io::Result<Result<ZooKeeperEnsemble, io::Error>> {
        let mut peers = Vec::with_capacity(ENSEMBLE_SIZE);
        let mut ports = Vec::new();
        let reserve = |ports: &mut Vec<u16>| -> io::Result<u16> {
            let port = reserve_free_port()?;
            ports.push(port);
            Ok(port)
        };
        for id in 1..=ENSEMBLE_SIZE as u32 {
            let reserved = (|| {
                Ok::<_, io::Error>(Peer {
                    id,
                    client_port: reserve(&mut ports)?,
                    quorum_port: reserve(&mut ports)?,
                    election_port: reserve(&mut ports)?,
                })
            })();
            match reserved {
                Ok(peer) => peers.push(peer),
                Err(e) => {
                    ports.iter().for_each(|p| release_port(*p));
                    return Err(e);
                }
            }
        }
        // Each node owns (and releases) its own three ports from here on.
        let mut nodes = Vec::with_capacity(ENSEMBLE_SIZE);
        let mut failed = None;
        for peer in &peers {
            let own = vec![peer.client_port, peer.quorum_port, peer.election_port];
            match ZooKeeperServer::create(peer.client_port, Some(peer.id), &peers, own) {
                Ok(node) => nodes.push(node),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            // The failed node released its ports; those of the nodes after it were
            // never handed over.
            for peer in &peers[nodes.len() + 1..] {
                for p in [peer.client_port, peer.quorum_port, peer.election_port] {
                    release_port(p);
                }
            }
            return Err(e);
        }
        let mut ensemble = ZooKeeperEnsemble { nodes };
        for node in &mut ensemble.nodes {
            match launch(&node.dir, QUORUM_MAIN) {
                Ok(launched) => node.adopt(launched),
                Err(LaunchError::PortTaken(e)) => return Ok(Err(e)),
                Err(LaunchError::Fatal(e)) => return Err(e),
            }
        }
        Ok(Ok(ensemble))
    }

    /// Waits until every running node serves and exactly one leads.
    fn wait_ready(&self, deadline: Instant) -> io::Result<()> {
        loop {
            let modes = self.modes();
            let serving = modes.iter().flatten().count();
            let running = self.nodes.iter().filter(|n| n.is_running()).count();
            let leaders = modes.iter().flatten().filter(|m| *m == "leader").count();
            if serving == running && leaders == 1 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let mut logs = String::new();
                for node in &self.nodes {
                    logs.push_str(&format!(
                        "--- node {} (port {}) ---\n{}\n",
                        node.myid.unwrap_or(0),
                        node.port,
                        log_tail(&node.dir, 0)
                    ));
                }
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the ZooKeeper ensemble was not ready in time (modes {modes:?})\n{logs}"
                    ),
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// The connect string for a client: `"127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"`.
    pub fn connect_string(&self) -> String {
        self.nodes
            .iter()
            .map(ZooKeeperServer::connect_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The nodes; node `i` is `server.{i + 1}`.
    pub fn nodes(&self) -> &[ZooKeeperServer] {
        &self.nodes
    }

    /// Node `index` (0-based), or `None` if there is no such node.
    pub fn node(&self, index: usize) -> Option<&ZooKeeperServer> {
        self.nodes.get(index)
    }

    /// Each node's `Mode:` (see [`ZooKeeperServer::mode`]).
    pub fn modes(&self) -> Vec<Option<String>> {
        self.nodes.iter().map(ZooKeeperServer::mode).collect()
    }

    /// The index of the node whose `srvr` says `Mode: leader`, if one does.
    pub fn leader(&self) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.mode().as_deref() == Some("leader"))
    }

    /// Waits (at most `timeout`) until a node leads and a quorum serves (the leader
    /// and at least one follower); returns the leader's index.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::TimedOut`] with the nodes' modes if none does in time.
    pub fn wait_for_leader(&self, timeout: Duration) -> io::Result<usize> {
        let deadline = Instant::now() + timeout;
        loop {
            let modes = self.modes();
            let leader = modes.iter().position(|m| m.as_deref() == Some("leader"));
            let followers = modes
                .iter()
                .filter(|m| m.as_deref() == Some("follower"))
                .count();
            if let Some(leader) = leader
                && followers >= 1
            {
                return Ok(leader);
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no ZooKeeper leader within {timeout:?} (modes {modes:?})"),
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops every node (`SIGKILL`) and starts them all again on their ports with their
    /// data (a full ensemble restart), then waits (at most `timeout`) for a leader as
    /// [`wait_for_leader`](Self::wait_for_leader) does; returns its index.
    ///
    /// # Errors
    ///
    /// A node's restart error, or [`io::ErrorKind::TimedOut`] when no leader comes.
    pub fn restart_all(&mut self, timeout: Duration) -> io::Result<usize> {
        for node in &mut self.nodes {
            node.kill();
        }
        for node in &mut self.nodes {
            node.restart()?;
        }
        self.wait_for_leader(timeout)
    }

    fn node_mut(&mut self, index: usize) -> io::Result<&mut ZooKeeperServer> {
        let len = self.nodes.len();
        self.nodes.get_mut(index).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no node {index} in an ensemble of {len}"),
            )
        })
    }

    /// Kills node `index` (`SIGKILL`); its ports and data stay for
    /// [`restart_node`](Self::restart_node).
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidInput`] if there is no such node.
    pub fn kill_node(&mut self, index: usize) -> io::Result<()> {
        self.node_mut(index)?.kill();
        Ok(())
    }

    /// Restarts node `index` on its ports with its data and waits until it serves again
    /// (as leader or follower), which needs a quorum: at least one other node running.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidInput`] if there is no such node; an error quoting its log
    /// if it exits or does not serve within 30 seconds.
    pub fn restart_node(&mut self, index: usize) -> io::Result<()> {
        let node = self.node_mut(index)?;
        node.restart()?;
        node.wait_serving(Instant::now() + READY_TIMEOUT)?;
        Ok(())
    }
}
