//! A Sentinel-managed replicated Redis on loopback: one primary, two replicas and
//! three sentinels.

use std::io;
use std::thread;
use std::time::{Duration, Instant};

use crate::RedisServer;
use crate::server::Secret;

/// The service (master) name the sentinels monitor.
const SERVICE: &str = "keylatch";
/// How long a set may take to link up after its processes started.
const LINK_TIMEOUT: Duration = Duration::from_secs(20);
/// How long [`SentinelSet::failover`] waits for the sentinels to switch.
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);

/// Options for a [`SentinelSet`]; made by [`SentinelSet::builder`].
#[derive(Debug, Clone)]
pub struct SentinelSetBuilder {
    password: Option<Secret>,
    sentinel_password: Option<Secret>,
    down_after: Duration,
    tls: Option<TlsPaths>,
}

/// The certificate files of a TLS set (the `TlsFiles` they come from must outlive it).
#[derive(Debug, Clone)]
struct TlsPaths(std::sync::Arc<crate::TlsFiles>);

impl std::fmt::Debug for SentinelSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelSet")
            .field(
                "nodes",
                &self.nodes.iter().map(|n| n.port()).collect::<Vec<_>>(),
            )
            .field(
                "sentinels",
                &self.sentinels.iter().map(|s| s.port()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Default for SentinelSetBuilder {
    fn default() -> Self {
        SentinelSetBuilder {
            password: None,
            sentinel_password: None,
            down_after: Duration::from_secs(1),
            tls: None,
        }
    }
}

impl SentinelSetBuilder {
    /// Requires `password` on the data nodes (primary and replicas); the sentinels and
    /// the replicas are told it, through configuration files only.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(Secret(password.into()));
        self
    }

    /// Requires `password` on the sentinels themselves.
    pub fn sentinel_password(mut self, password: impl Into<String>) -> Self {
        self.sentinel_password = Some(Secret(password.into()));
        self
    }

    /// Serves TLS only, on every node and sentinel (`--tls-port`, plaintext ports off,
    /// replication and the sentinels' own links over TLS too), on certificates of `files`;
    /// [`SentinelSet::url`] is then a `rediss+sentinel://` URL.
    pub fn tls(mut self, files: std::sync::Arc<crate::TlsFiles>) -> Self {
        self.tls = Some(TlsPaths(files));
        self
    }

    /// How long the primary must be unreachable before the sentinels call it down
    /// (`down-after-milliseconds`, 1 s by default).
    pub fn down_after(mut self, down_after: Duration) -> Self {
        self.down_after = down_after;
        self
    }

    /// Starts the primary, the two replicas and the three sentinels, and waits until
    /// the replicas are in sync and every sentinel knows both replicas and the other
    /// two sentinels.
    pub fn start(self) -> io::Result<SentinelSet> {
        let tls = |builder: crate::RedisServerBuilder| match &self.tls {
            Some(TlsPaths(files)) => builder
                .tls(files, crate::ClientAuth::No)
                .arg("--tls-replication")
                .arg("yes"),
            None => builder,
        };
        let data = |builder: crate::RedisServerBuilder| {
            let builder = tls(builder)
                .arg("--repl-diskless-sync")
                .arg("yes")
                .arg("--repl-diskless-sync-delay")
                .arg("0");
            match &self.password {
                Some(p) => builder.password(p.0.clone()),
                None => builder,
            }
        };
        let primary = data(RedisServer::builder()).start()?;
        let mut nodes = vec![primary];
        for _ in 0..2 {
            let replica = data(RedisServer::builder())
                .arg("--replicaof")
                .arg("127.0.0.1")
                .arg(nodes[0].port().to_string())
                .start()?;
            nodes.push(replica);
        }
        let mut sentinels = Vec::new();
        for _ in 0..3 {
            let mut builder = tls(RedisServer::builder())
                .sentinel(true)
                .config_line(format!(
                    "sentinel monitor {SERVICE} 127.0.0.1 {} 2",
                    nodes[0].port()
                ))
                .config_line(format!(
                    "sentinel down-after-milliseconds {SERVICE} {}",
                    self.down_after.as_millis().max(1)
                ))
                .config_line(format!("sentinel failover-timeout {SERVICE} 10000"))
                .config_line(format!("sentinel parallel-syncs {SERVICE} 2"));
            if let Some(p) = &self.password {
                builder = builder.config_line(format!(
                    "sentinel auth-pass {SERVICE} {}",
                    crate::server::quote(&p.0)
                ));
            }
            if let Some(p) = &self.sentinel_password {
                builder = builder.password(p.0.clone());
            }
            sentinels.push(builder.start()?);
        }
        let set = SentinelSet {
            nodes,
            sentinels,
            _tls: self.tls,
        };
        set.wait_linked(LINK_TIMEOUT)?;
        Ok(set)
    }
}

/// One primary, two replicas and three sentinels (quorum 2) on loopback, monitoring
/// the service `"keylatch"`. Dropping it stops every process.
///
/// ```no_run
/// use keylatch_testkit::SentinelSet;
///
/// let set = SentinelSet::start()?;
/// println!("connect to {}", set.url()); // redis+sentinel://127.0.0.1:…,…/keylatch
/// let before = set.primary_port()?;
/// let took = set.failover()?;
/// assert_ne!(set.primary_port()?, before);
/// println!("the sentinels switched in {took:?}");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct SentinelSet {
    nodes: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
    /// Kept alive while the servers use the files.
    _tls: Option<TlsPaths>,
}

impl SentinelSet {
    /// Starts a set with default options.
    pub fn start() -> io::Result<SentinelSet> {
        Self::builder().start()
    }

    /// Returns a builder for a set with passwords or another down-after time.
    pub fn builder() -> SentinelSetBuilder {
        SentinelSetBuilder::default()
    }

    /// The service name the sentinels monitor.
    pub fn service_name(&self) -> &str {
        SERVICE
    }

    /// `redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/keylatch` (no passwords;
    /// `rediss+sentinel://` for a TLS set).
    pub fn url(&self) -> String {
        let scheme = if self._tls.is_some() {
            "rediss+sentinel"
        } else {
            "redis+sentinel"
        };
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port()))
            .collect();
        format!("{scheme}://{}/{SERVICE}", hosts.join(","))
    }

    /// The data nodes; the first one was the primary at the start.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The data nodes, to [`pause`](RedisServer::pause) or [`kill`](RedisServer::kill) one.
    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// The three sentinels.
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// The port of the primary, as the first sentinel that answers reports it.
    pub fn primary_port(&self) -> io::Result<u16> {
        let mut last = None;
        for sentinel in &self.sentinels {
            match primary_port_of(sentinel) {
                Ok(port) => return Ok(port),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no sentinel")))
    }

    /// The data node that is the primary now.
    pub fn primary(&self) -> io::Result<&RedisServer> {
        let port = self.primary_port()?;
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .ok_or_else(|| io::Error::other(format!("the sentinels name unknown port {port}")))
    }

    /// Forces a failover (`SENTINEL FAILOVER`, retried while the sentinels are not
    /// ready for one), and returns how long it took from the command until every
    /// sentinel names a new primary that answers `ROLE` as master. Then waits until the
    /// set is linked again (the old primary a replica of the new one), so that
    /// another failover can follow.
    pub fn failover(&self) -> io::Result<Duration> {
        let before = self.primary_port()?;
        let deadline = Instant::now() + FAILOVER_TIMEOUT;
        let started = Instant::now();
        loop {
            match self.sentinels[0].cli(&["SENTINEL", "FAILOVER", SERVICE]) {
                Ok(_) => break,
                Err(e) if Instant::now() < deadline => {
                    // NOGOODSLAVE / INPROG: the sentinel is not ready yet.
                    let _ = e;
                    thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e),
            }
        }
        self.wait_for_new_primary(before, deadline)?;
        let took = started.elapsed();
        self.wait_linked(LINK_TIMEOUT)?;
        Ok(took)
    }

    /// Waits until every sentinel names a primary other than port `before`, and that node
    /// answers `ROLE` as master (after a failover the sentinels started on their own, for
    /// example once the primary was killed). Returns how long that took.
    pub fn wait_for_new_primary(&self, before: u16, deadline: Instant) -> io::Result<Duration> {
        let started = Instant::now();
        loop {
            let ports: Vec<Option<u16>> = self
                .sentinels
                .iter()
                .map(|s| primary_port_of(s).ok())
                .collect();
            if let Some(Some(new)) = ports.first()
                && *new != before
                && ports.iter().all(|p| *p == Some(*new))
                && self.is_master(*new)
            {
                return Ok(started.elapsed());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the sentinels did not switch from port {before}: they name {ports:?}"),
                ));
            }
            thread::sleep(POLL);
        }
    }

    /// Waits until the primary has both replicas online and every sentinel knows the
    /// primary, two replicas and two other sentinels.
    pub fn wait_linked(&self, timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let state = self.link_state();
            if state.is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the sentinel set did not link up within {timeout:?}: {}",
                        state.err().unwrap_or_default()
                    ),
                ));
            }
            thread::sleep(POLL);
        }
    }

    /// `Ok` once everything is linked, else what is still missing.
    fn link_state(&self) -> Result<(), String> {
        let port = self.primary_port().map_err(|e| e.to_string())?;
        let primary = self
            .nodes
            .iter()
            .find(|n| n.port() == port)
            .ok_or("the sentinels name an unknown primary")?;
        let replication = primary
            .cli(&["INFO", "replication"])
            .map_err(|e| e.to_string())?;
        let online = replication
            .lines()
            .filter(|l| l.starts_with("slave") && l.contains("state=online"))
            .count();
        if !replication.contains("role:master") || online < 2 {
            return Err(format!("primary {port}: {online} replicas online"));
        }
        for sentinel in &self.sentinels {
            let info = sentinel
                .cli(&["INFO", "sentinel"])
                .map_err(|e| e.to_string())?;
            let want = format!("status=ok,address=127.0.0.1:{port},slaves=2,sentinels=3");
            if !info.contains(&want) {
                return Err(format!("sentinel {}: {}", sentinel.port(), info.trim()));
            }
        }
        Ok(())
    }

    fn is_master(&self, port: u16) -> bool {
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .and_then(|n| n.cli(&["ROLE"]).ok())
            .is_some_and(|role| role.starts_with("master"))
    }
}

/// The primary's port as `sentinel` reports it.
fn primary_port_of(sentinel: &RedisServer) -> io::Result<u16> {
    let reply = sentinel.cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE])?;
    reply
        .lines()
        .nth(1)
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| io::Error::other(format!("unexpected reply: {reply:?}")))
}
