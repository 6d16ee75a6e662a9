//! Starting, stopping and restarting Apache ZooKeeper servers (JVM child processes):
//! a standalone [`ZooKeeperServer`] and a three-node [`ZooKeeperEnsemble`].
//!
//! The servers come from Debian's `zookeeper` package (`./scripts/setup-zookeeper.sh`
//! installs it): `java -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar …`. Each
//! server listens on free loopback ports, keeps its data in its own temporary directory,
//! has the admin server off and every four-letter word allowed (the testkit talks to it
//! only through those: `srvr`, `envi`, `ruok`, … over a plain TCP connection).

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::find_on_path;
use crate::support::{file_len, release_port, reserve_free_port, tail};

const HOST: &str = "127.0.0.1";
/// The configuration directory of Debian's `zookeeper` package (`log4j.properties`, …).
const ZK_CONF_DIR: &str = "/etc/zookeeper/conf";
/// The server's jar; its manifest lists the jars it needs.
const ZK_JAR: &str = "/usr/share/java/zookeeper.jar";
/// An SLF4J binding that logs to stderr; without one the server logs nothing at all.
/// Added to the class path when it is installed (Debian's `libslf4j-java`).
const SLF4J_SIMPLE_JAR: &str = "/usr/share/java/slf4j-simple.jar";
const JAVA_BIN: &str = "java";
const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";
const QUORUM_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
/// The server's stdout and stderr (its log), in its directory.
const LOG_FILE: &str = "zookeeper.log";
/// The generated configuration, in the server's directory.
const CONFIG_FILE: &str = "zoo.cfg";
/// The data directory (snapshots, transaction logs, `myid`), inside the server's directory.
const DATA_DIR: &str = "data";
/// ZooKeeper's basic time unit; sessions may last 2 to 120 ticks (1 s to 60 s).
const TICK_MS: u32 = 500;
/// How long a server may take to start and serve (a JVM start on a loaded machine).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an ensemble may take until all three nodes serve and one leads.
const ENSEMBLE_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Fresh ports tried by a start before giving up.
const START_ATTEMPTS: usize = 5;
/// Tries (200 ms apart) to re-bind the old ports in a restart.
const RESTART_ATTEMPTS: usize = 25;
/// Nodes of a [`ZooKeeperEnsemble`].
const ENSEMBLE_SIZE: usize = 3;

/// Whether Debian's ZooKeeper server can be started: `java` is on `PATH` and
/// `/usr/share/java/zookeeper.jar` exists. If not, run `./scripts/setup-zookeeper.sh`.
pub fn zookeeper_available() -> bool {
    find_on_path(JAVA_BIN) && Path::new(ZK_JAR).is_file()
}

fn not_installed() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "ZooKeeper is not installed (`{JAVA_BIN}` on PATH and {ZK_JAR} are needed); \
             run ./scripts/setup-zookeeper.sh (it installs the Debian package zookeeper)"
        ),
    )
}

/// One node of an ensemble, as written to every node's `zoo.cfg`.
#[derive(Debug, Clone, Copy)]
struct Peer {
    id: u32,
    client_port: u16,
    quorum_port: u16,
    election_port: u16,
}

/// A running ZooKeeper server (JVM child process) on `127.0.0.1`, for tests: standalone
/// when made by [`ZooKeeperServer::start`], or one node of a [`ZooKeeperEnsemble`].
///
/// Dropping it kills the JVM (`SIGKILL`) and removes its temporary directory. A small
/// `sh` watchdog kills the JVM within about a second if the test process dies first.
#[derive(Debug)]
pub struct ZooKeeperServer {
    port: u16,
    pid: u32,
    dir: PathBuf,
    /// `Some(id)` for an ensemble node.
    myid: Option<u32>,
    /// Every port reserved for this server (client, and for a node its quorum and
    /// election ports), released on drop.
    reserved: Vec<u16>,
    child: Option<Child>,
    watchdog: Option<Child>,
}

impl ZooKeeperServer {
    /// Starts a standalone server on a free loopback port, in a new temporary directory,
    /// and waits until it serves (`srvr` says `Mode: standalone`).
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::NotFound`] if ZooKeeper is not installed; an error quoting the
    /// server's log if it exits or does not serve within 30 seconds. A port taken
    /// meanwhile is retried with a fresh one a few times.
    pub fn start() -> io::Result<ZooKeeperServer> {
        if !zookeeper_available() {
            return Err(not_installed());
        }
        let mut last_err = None;
        for _ in 0..START_ATTEMPTS {
            let port = reserve_free_port()?;
            let mut server = Self::create(port, None, &[], vec![port])?;
            match launch(&server.dir, server.main_class()) {
                Ok(launched) => {
                    server.adopt(launched);
                    server.wait_serving(Instant::now() + READY_TIMEOUT)?;
                    return Ok(server);
                }
                Err(LaunchError::PortTaken(e)) => last_err = Some(e),
                Err(LaunchError::Fatal(e)) => return Err(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("could not start ZooKeeper")))
    }

    /// Makes the directory and configuration of a server; starts nothing. Takes over the
    /// `reserved` ports (released when it fails, or when the server is dropped).
    fn create(
        port: u16,
        myid: Option<u32>,
        peers: &[Peer],
        reserved: Vec<u16>,
    ) -> io::Result<ZooKeeperServer> {
        let dir = match make_temp_dir() {
            Ok(dir) => dir,
            Err(e) => {
                reserved.iter().for_each(|p| release_port(*p));
                return Err(e);
            }
        };
        let server = ZooKeeperServer {
            port,
            pid: 0,
            dir,
            myid,
            reserved,
            child: None,
            watchdog: None,
        };
        // From here on, dropping `server` cleans up.
        server.write_config(peers)?;
        Ok(server)
    }

    fn write_config(&self, peers: &[Peer]) -> io::Result<()> {
        let data = self.dir.join(DATA_DIR);
        fs::create_dir_all(&data)?;
        let mut text = format!(
            "tickTime={TICK_MS}\n\
             initLimit=10\n\
             syncLimit=5\n\
             maxSessionTimeout={}\n\
             dataDir={}\n\
             clientPort={}\n\
             clientPortAddress={HOST}\n\
             admin.enableServer=false\n\
             4lw.commands.whitelist=*\n\
             forceSync=no\n",
            TICK_MS * 120,
            data.display(),
            self.port,
        );
        for peer in peers {
            text.push_str(&format!(
                "server.{}={HOST}:{}:{}\n",
                peer.id, peer.quorum_port, peer.election_port
            ));
        }
        fs::write(self.dir.join(CONFIG_FILE), text)?;
        if let Some(id) = self.myid {
            fs::write(data.join("myid"), format!("{id}\n"))?;
        }
        Ok(())
    }

    fn main_class(&self) -> &'static str {
        if self.myid.is_some() {
            QUORUM_MAIN
        } else {
            STANDALONE_MAIN
        }
    }

    fn adopt(&mut self, launched: Launched) {
        self.pid = launched.child.id();
        self.child = Some(launched.child);
        self.watchdog = launched.watchdog;
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The address the server listens on: always `"127.0.0.1"`.
    pub fn host(&self) -> &str {
        HOST
    }

    /// The connect string for a client: `"127.0.0.1:PORT"`.
    pub fn connect_string(&self) -> String {
        format!("{HOST}:{}", self.port)
    }

    /// The process id of the current (or, after [`kill`](Self::kill), the last) JVM.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The server's temporary directory: `zoo.cfg`, `zookeeper.log` and `data/`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The node's id in its ensemble (`server.N`), or `None` for a standalone server.
    pub fn myid(&self) -> Option<u32> {
        self.myid
    }

    /// Whether the JVM runs (it may be [paused](Self::pause)).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Sends a four-letter word (`srvr`, `ruok`, `envi`, `mntr`, `stat`, …) over a fresh
    /// TCP connection and returns the whole answer.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidInput`] if `word` is not four ASCII lower-case letters;
    /// the connection's error if the server does not answer within a few seconds.
    pub fn four_letter_word(&self, word: &str) -> io::Result<String> {
        four_letter_word(self.port, word)
    }

    /// The server's `Mode:` from `srvr`: `"standalone"`, `"leader"` or `"follower"`;
    /// `None` if it does not answer or does not serve (no quorum, electing).
    pub fn mode(&self) -> Option<String> {
        mode_of(&self.four_letter_word("srvr").ok()?)
    }

    /// Stops the JVM (`SIGSTOP`): its connections stay open but it answers nothing (and
    /// sends no heartbeats) until [`resume`](Self::resume).
    ///
    /// # Errors
    ///
    /// If the server is not running or `kill` fails.
    pub fn pause(&self) -> io::Result<()> {
        self.signal("STOP")
    }

    /// Lets a [paused](Self::pause) JVM run again (`SIGCONT`).
    ///
    /// # Errors
    ///
    /// If the server is not running or `kill` fails.
    pub fn resume(&self) -> io::Result<()> {
        self.signal("CONT")
    }

    fn signal(&self, name: &str) -> io::Result<()> {
        if self.child.is_none() {
            return Err(io::Error::other("the server is not running"));
        }
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid.to_string())
            .stdin(Stdio::null())
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "kill -{name} {}: {status}",
                self.pid
            )))
        }
    }

    /// Kills the JVM with `SIGKILL` and waits for it to exit (a paused one too). Calling
    /// it again is a no-op. The ports and the data stay for [`restart`](Self::restart).
    pub fn kill(&mut self) {
        // The watchdog goes first, so it can never outlive the pid it watches.
        for mut child in [self.watchdog.take(), self.child.take()]
            .into_iter()
            .flatten()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server and starts it again on the same ports with the same data
    /// directory (its znodes and, for a node, its identity survive). A standalone server
    /// is waited for until it serves; an ensemble node only until its JVM answers (it
    /// serves once it has joined a quorum: see [`ZooKeeperEnsemble::restart_node`]).
    ///
    /// # Errors
    ///
    /// An error quoting the log if the JVM exits, cannot bind its ports within about
    /// 5 seconds, or does not come up within 30 seconds.
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill();
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last_err = None;
        for _ in 0..RESTART_ATTEMPTS {
            match launch(&self.dir, self.main_class()) {
                Ok(launched) => {
                    self.adopt(launched);
                    if self.myid.is_none() {
                        self.wait_serving(deadline)?;
                    }
                    return Ok(());
                }
                Err(LaunchError::PortTaken(e)) => {
                    last_err = Some(e);
                    thread::sleep(Duration::from_millis(200));
                }
                Err(LaunchError::Fatal(e)) => return Err(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("restart failed")))
    }

    /// Waits until `srvr` shows a `Mode:`; fails early if the JVM exits.
    fn wait_serving(&mut self, deadline: Instant) -> io::Result<String> {
        loop {
            if let Some(mode) = self.mode() {
                return Ok(mode);
            }
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                return Err(io::Error::other(format!(
                    "ZooKeeper (pid {}, port {}) exited ({status})\n{}",
                    self.pid,
                    self.port,
                    log_tail(&self.dir, 0)
                )));
            }
            if self.child.is_none() {
                return Err(io::Error::other("the server is not running"));
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "ZooKeeper (pid {}, port {}) did not serve in time (`srvr` shows no Mode)\n{}",
                        self.pid,
                        self.port,
                        log_tail(&self.dir, 0)
                    ),
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for ZooKeeperServer {
    fn drop(&mut self) {
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
        for port in &self.reserved {
            release_port(*port);
        }
    }
}

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

/// The value of the `Mode:` line of a `srvr` answer.
fn mode_of(srvr: &str) -> Option<String> {
    srvr.lines()
        .find_map(|l| l.strip_prefix("Mode:"))
        .map(|m| m.trim().to_owned())
}

/// Sends a four-letter word to `127.0.0.1:port` and reads the answer to the end.
fn four_letter_word(port: u16, word: &str) -> io::Result<String> {
    if word.len() != 4 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a four-letter word is four ascii lower-case letters",
        ));
    }
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(3)))?;
    stream.set_write_timeout(Some(Duration::from_secs(3)))?;
    stream.write_all(word.as_bytes())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

fn make_temp_dir() -> io::Result<PathBuf> {
    // Kept (not deleted on drop): the server owns the directory and removes it when it stops.
    let dir = tempfile::Builder::new()
        .prefix(&format!("keylatch-zookeeper-{}-", std::process::id()))
        .tempdir()
        .map(tempfile::TempDir::keep)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create a temp dir: {e}")))?;
    // The JVM reports its working directory resolved; compare like with like.
    Ok(fs::canonicalize(&dir).unwrap_or(dir))
}

fn log_tail(dir: &Path, from: u64) -> String {
    let path = dir.join(LOG_FILE);
    format!("--- {} (tail) ---\n{}", path.display(), tail(&path, from))
}

/// Why one launch attempt failed.
enum LaunchError {
    /// A port was (or became) busy: worth trying again.
    PortTaken(io::Error),
    /// Anything else: report it.
    Fatal(io::Error),
}

struct Launched {
    child: Child,
    watchdog: Option<Child>,
}

/// Spawns the JVM for the server in `dir` and waits until it answers four-letter words
/// as itself (`envi` shows `user.dir` = `dir`, so not another process on the port).
fn launch(dir: &Path, main_class: &str) -> Result<Launched, LaunchError> {
    let fatal = LaunchError::Fatal;
    let config = fs::read_to_string(dir.join(CONFIG_FILE)).map_err(fatal)?;
    let port: u16 = config
        .lines()
        .find_map(|l| l.strip_prefix("clientPort="))
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| fatal(io::Error::other("no clientPort in zoo.cfg")))?;
    let log_path = dir.join(LOG_FILE);
    // Only the part of the log written by this attempt is inspected.
    let log_start = file_len(&log_path);
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(fatal)?;
    let mut class_path = format!("{ZK_CONF_DIR}:{ZK_JAR}");
    if Path::new(SLF4J_SIMPLE_JAR).is_file() {
        class_path.push(':');
        class_path.push_str(SLF4J_SIMPLE_JAR);
    }
    let mut child = Command::new(JAVA_BIN)
        .args([
            "-Xms16m",
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:-UsePerfData",
            "-Djava.net.preferIPv4Stack=true",
            // Reconnect to a restarted peer quickly (default 5 s per attempt).
            "-Dzookeeper.cnxTimeout=1000",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp",
            &class_path,
            main_class,
        ])
        .arg(dir.join(CONFIG_FILE))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(fatal)?)
        .stderr(log)
        .spawn()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => LaunchError::Fatal(not_installed()),
            _ => LaunchError::Fatal(e),
        })?;
    let pid = child.id();
    let own_dir = format!("user.dir={}", dir.display());
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().map_err(fatal)? {
            let logs = log_tail(dir, log_start);
            let msg = format!("ZooKeeper on port {port} exited during startup ({status})\n{logs}");
            return Err(if logs.contains("Address already in use") {
                LaunchError::PortTaken(io::Error::new(io::ErrorKind::AddrInUse, msg))
            } else {
                LaunchError::Fatal(io::Error::other(msg))
            });
        }
        if let Ok(envi) = four_letter_word(port, "envi") {
            if envi.lines().any(|l| l.trim() == own_dir) {
                let watchdog = spawn_watchdog(pid);
                return Ok(Launched { child, watchdog });
            }
            if envi.contains("user.dir=") {
                // Another server holds the port; ours will fail.
                let _ = child.kill();
                let _ = child.wait();
                return Err(LaunchError::PortTaken(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("port {port} is already served by another ZooKeeper"),
                )));
            }
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(LaunchError::Fatal(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "ZooKeeper (pid {pid}) did not answer on port {port} within {}s\n{}",
                    READY_TIMEOUT.as_secs(),
                    log_tail(dir, log_start)
                ),
            )));
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Spawns `sh` that kills `pid` once this process is gone. Best effort: `None` if `sh`
/// is unavailable. It is killed before the server in `kill`.
fn spawn_watchdog(pid: u32) -> Option<Child> {
    if !cfg!(unix) {
        return None;
    }
    Command::new("sh")
        .args([
            "-c",
            r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done; kill -9 "$2" 2>/dev/null"#,
            "keylatch-testkit-watchdog",
            &std::process::id().to_string(),
            &pid.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn expect_port_taken(result: Result<Launched, LaunchError>) -> String {
        match result {
            Err(LaunchError::PortTaken(e)) => e.to_string(),
            Err(LaunchError::Fatal(e)) => panic!("expected PortTaken, got Fatal: {e}"),
            Ok(_) => panic!("expected PortTaken, got a server"),
        }
    }

    #[test]
    fn port_held_by_plain_listener_is_retryable() {
        assert!(zookeeper_available(), "run ./scripts/setup-zookeeper.sh");
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = ZooKeeperServer::create(port, None, &[], Vec::new()).unwrap();
        let msg = expect_port_taken(launch(&server.dir, STANDALONE_MAIN));
        assert!(msg.contains("Address already in use"), "{msg}");
    }

    #[test]
    fn port_held_by_other_zookeeper_is_detected() {
        let other = ZooKeeperServer::start().unwrap();
        let server = ZooKeeperServer::create(other.port(), None, &[], Vec::new()).unwrap();
        let msg = expect_port_taken(launch(&server.dir, STANDALONE_MAIN));
        // Either our JVM lost the bind race visibly, or the user.dir check caught it.
        assert!(
            msg.contains("Address already in use") || msg.contains("already served"),
            "{msg}"
        );
        assert_eq!(other.four_letter_word("ruok").unwrap(), "imok");
    }

    #[test]
    fn bad_four_letter_words_are_refused() {
        for word in ["", "srv", "srvrr", "SRVR", "sr\nr", "rüok"] {
            let err = four_letter_word(1, word).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{word:?}");
        }
    }

    #[test]
    fn mode_is_read_from_srvr() {
        let srvr = "Zookeeper version: 3.8.0\nZxid: 0x0\nMode: follower\nNode count: 5\n";
        assert_eq!(mode_of(srvr).as_deref(), Some("follower"));
        let not_serving = "This ZooKeeper instance is not currently serving requests\n";
        assert_eq!(mode_of(not_serving), None);
    }
}
