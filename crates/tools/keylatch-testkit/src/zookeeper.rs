//! Starting, stopping and restarting Apache ZooKeeper servers (JVM child processes):
//! a standalone [`ZooKeeperServer`] and a three-node [`ZooKeeperEnsemble`].
//!
//! The servers come from Debian's `zookeeper` package (`./scripts/setup-zookeeper.sh`
//! installs it): `java -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar …`. Each
//! server listens on free loopback ports, keeps its data in its own temporary directory,
//! has the admin server off and every four-letter word allowed (the testkit talks to it
//! only through those: `srvr`, `envi`, `ruok`, … over a plain TCP connection). Their
//! transaction log is written with `forceSync=no` (no fsync per write), unless
//! [`FORCE_SYNC_ENV`] is `yes` (ZooKeeper's own default), for a benchmark of the fsync's cost.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::find_on_path;
use crate::process::{LaunchError, Launched, spawn_watchdog};

mod ensemble;
mod launch;
mod secure;

use crate::support::{file_len, release_port, reserve_free_port, tail};
pub use ensemble::ZooKeeperEnsemble;
use launch::{four_letter_word, launch, log_tail, make_temp_dir, mode_of};

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

/// Set to `yes`, the servers fsync their transaction log on every write (`forceSync=yes`,
/// ZooKeeper's default); otherwise they do not (`forceSync=no`, faster tests).
pub const FORCE_SYNC_ENV: &str = "KEYLATCH_ZK_FORCE_SYNC";

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
    /// `Some` for a server that serves clients over TLS only ([`ZooKeeperServer::start_tls`]).
    secure: Option<crate::ClientAuth>,
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
            secure: None,
            child: None,
            watchdog: None,
        };
        // From here on, dropping `server` cleans up.
        server.write_config(peers)?;
        Ok(server)
    }

    fn write_config(&self, peers: &[Peer]) -> io::Result<()> {
        fn force_sync() -> &'static str {
            match std::env::var(FORCE_SYNC_ENV) {
                Ok(value) if value == "yes" => "yes",
                _ => "no",
            }
        }
        let data = self.dir.join(DATA_DIR);
        fs::create_dir_all(&data)?;
        let mut text = format!(
            "tickTime={TICK_MS}\n\
             initLimit=10\n\
             syncLimit=5\n\
             maxSessionTimeout={}\n\
             dataDir={}\n\
             admin.enableServer=false\n\
             4lw.commands.whitelist=*\n\
             forceSync={}\n",
            TICK_MS * 120,
            data.display(),
            force_sync(),
        );
        match self.secure {
            None => text.push_str(&format!(
                "clientPort={}\nclientPortAddress={HOST}\n",
                self.port
            )),
            Some(auth) => text.push_str(&secure::config(&self.dir, self.port, auth)),
        }
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
    /// `None` if it does not answer or does not serve (no quorum, electing), and always for
    /// a [TLS server](ZooKeeperServer::start_tls) (its port takes no plain four-letter word).
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
                    // A TLS server was seen serving by `launch` (it answers no plain `srvr`).
                    if self.myid.is_none() && self.secure.is_none() {
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

#[cfg(test)]
mod tests;
