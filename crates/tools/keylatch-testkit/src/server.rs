//! Starting, stopping and restarting `redis-server` child processes.

use std::fs::{self, OpenOptions};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::build::{announce, server_program};
use crate::process::{LaunchError, Launched, spawn_watchdog};

mod builder;

use crate::program_exists;
use crate::resp::{self, Reply, Target};
use crate::support::{
    CLUSTER_BUS_OFFSET, LOG_FILE, STDIO_FILE, clear_data_files, file_len, make_temp_dir,
    release_port, reserve_free_cluster_port, reserve_free_port, tail,
};
use crate::tls::{ClientAuth, TlsFiles, write_secret};
pub use builder::RedisServerBuilder;

const HOST: &str = "127.0.0.1";
/// How long one server may take to answer `PING` after being spawned.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Fresh ports tried by [`RedisServerBuilder::start`] before giving up.
const START_ATTEMPTS: usize = 5;
/// Tries (200 ms apart) to re-bind the old port in [`RedisServer::restart`].
const RESTART_ATTEMPTS: usize = 25;
/// Read timeout for [`RedisServer::cli`]; generous so `DEBUG SLEEP` etc. work.
const CLI_IO_TIMEOUT: Duration = Duration::from_secs(30);
/// The configuration file written to the server's directory when there are settings
/// that must stay out of the process arguments (passwords) or that a sentinel rewrites.
const CONFIG_FILE: &str = "keylatch.conf";
/// The unix socket of a TLS server, through which the testkit itself talks to it.
const UNIX_SOCKET: &str = "redis.sock";

/// A string that is never shown by `Debug`.
#[derive(Clone, Default)]
pub(crate) struct Secret(pub(crate) String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"***\"")
    }
}

#[derive(Debug, Clone)]
struct TlsSettings {
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
    auth: ClientAuth,
}

/// A running `redis-server` child process on `127.0.0.1`, for tests.
///
/// Dropping it kills the process (`SIGKILL`) and removes its temporary
/// directory. See the [crate docs](crate) for an example.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    pid: u32,
    dir: PathBuf,
    program: String,
    options: RedisServerBuilder,
    child: Option<Child>,
    watchdog: Option<Child>,
}

impl RedisServer {
    /// Starts a server with default options; same as
    /// `RedisServer::builder().start()`.
    pub fn start() -> io::Result<RedisServer> {
        Self::builder().start()
    }

    /// Returns a builder for a server with non-default options.
    pub fn builder() -> RedisServerBuilder {
        RedisServerBuilder::default()
    }

    /// The TCP port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The address the server listens on: always `"127.0.0.1"`.
    pub fn host(&self) -> &str {
        HOST
    }

    /// The connection URL: `redis://127.0.0.1:PORT`, or `rediss://127.0.0.1:PORT` for a
    /// [TLS](RedisServerBuilder::tls) server. It carries no password.
    pub fn url(&self) -> String {
        let scheme = if self.options.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://{HOST}:{}", self.port)
    }

    /// Whether the server serves TLS only.
    pub fn is_tls(&self) -> bool {
        self.options.tls.is_some()
    }

    /// The process id of the current (or, after [`kill`](Self::kill), the
    /// last) `redis-server` process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The server's temporary working directory (holds `redis.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Sends one command over a fresh connection (raw RESP, no `redis-cli`; TCP, or
    /// the unix socket of a TLS server; logged in with the server's password if it has
    /// one) and returns the reply as text.
    ///
    /// Bulk and simple strings come back as themselves, integers as digits,
    /// nil as `(nil)`, arrays as one element per line (nested arrays are
    /// flattened, an empty array is `""`). An error reply becomes an
    /// [`io::ErrorKind::Other`] error carrying the server's message.
    pub fn cli(&self, args: &[&str]) -> io::Result<String> {
        if args.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cli: empty command",
            ));
        }
        match resp::request_to(
            &self.options.target(self.port, &self.dir),
            self.options.password.as_ref().map(|p| p.0.as_str()),
            args,
            Duration::from_secs(2),
            CLI_IO_TIMEOUT,
        )? {
            Reply::Error(msg) => Err(io::Error::other(msg)),
            reply => Ok(reply.render()),
        }
    }

    /// Stops the server process (`SIGSTOP`): it keeps its connections and answers nothing
    /// until [`resume`](Self::resume). A replica paused this way misses the primary's writes.
    pub fn pause(&self) -> io::Result<()> {
        self.signal("STOP")
    }

    /// Lets a [paused](Self::pause) server run again (`SIGCONT`).
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

    /// Kills the server with `SIGKILL` and waits for it to exit. Calling it
    /// again is a no-op. The port stays reserved for [`restart`](Self::restart).
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

    /// Kills the server and starts a new one on the same port with the same
    /// options, then waits for `PING`. Data is lost: any dump or AOF files in
    /// the server's directory are deleted first. A node of a
    /// [`RedisCluster`](crate::RedisCluster) keeps its cluster configuration file, so it
    /// comes back as the same node and rejoins the cluster.
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill();
        clear_data_files(&self.dir, self.options.cluster_config_file.as_deref())?;
        let mut last_err = None;
        for _ in 0..RESTART_ATTEMPTS {
            match launch(&self.program, &self.options, &self.dir, self.port) {
                Ok(launched) => {
                    self.pid = launched.child.id();
                    self.child = Some(launched.child);
                    self.watchdog = launched.watchdog;
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
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
        self.options.release_port(self.port);
    }
}

/// `text` as a double-quoted Redis configuration argument.
pub(crate) fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                quoted.push('\\');
                quoted.push(c);
            }
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

pub(crate) fn start_with(options: RedisServerBuilder, program: &str) -> io::Result<RedisServer> {
    if !program_exists(program) {
        return Err(not_installed(program));
    }
    let dir = make_temp_dir()?;
    let mut last_err = None;
    for _ in 0..START_ATTEMPTS {
        let port = match options.reserve_port() {
            Ok(port) => port,
            Err(e) => {
                last_err = Some(e);
                break;
            }
        };
        match launch(program, &options, &dir, port) {
            Ok(launched) => {
                announce(program);
                return Ok(RedisServer {
                    port,
                    pid: launched.child.id(),
                    dir,
                    program: program.to_owned(),
                    options,
                    child: Some(launched.child),
                    watchdog: launched.watchdog,
                });
            }
            Err(LaunchError::PortTaken(e)) => {
                options.release_port(port);
                last_err = Some(e);
            }
            Err(LaunchError::Fatal(e)) => {
                options.release_port(port);
                last_err = Some(e);
                break;
            }
        }
    }
    let _ = fs::remove_dir_all(&dir);
    Err(last_err.unwrap_or_else(|| io::Error::other("could not start redis-server")))
}

fn not_installed(program: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "`{program}` was not found; run ./scripts/setup.sh (it installs the Debian \
             package redis-server and puts other server builds under .servers/), or set \
             KEYLATCH_TEST_SERVER to a server executable"
        ),
    )
}

/// Spawns one server on `port` and waits until it answers `PING`.
fn launch(
    program: &str,
    options: &RedisServerBuilder,
    dir: &Path,
    port: u16,
) -> Result<Launched, LaunchError> {
    let log_path = dir.join(LOG_FILE);
    let stdio_path = dir.join(STDIO_FILE);
    // Only the part of the logs written by this attempt is inspected.
    let log_start = file_len(&log_path);
    let stdio_start = file_len(&stdio_path);
    let fatal = LaunchError::Fatal;
    options.write_config_file(dir).map_err(fatal)?;

    let stdio = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&stdio_path)
        .map_err(fatal)?;
    let mut child = Command::new(program)
        .args(options.command_args(port, dir))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(stdio.try_clone().map_err(fatal)?)
        .stderr(stdio)
        .spawn()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => LaunchError::Fatal(not_installed(program)),
            _ => LaunchError::Fatal(e),
        })?;
    let pid = child.id();

    let logs = || {
        format!(
            "--- {} (tail) ---\n{}\n--- {} (tail) ---\n{}",
            log_path.display(),
            tail(&log_path, log_start),
            stdio_path.display(),
            tail(&stdio_path, stdio_start),
        )
    };
    let target = options.target(port, dir);
    let password = options.password.as_ref().map(|p| p.0.as_str());
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().map_err(fatal)? {
            let logs = logs();
            let msg = format!("{program} on port {port} exited during startup ({status})\n{logs}");
            return Err(if logs.contains("Address already in use") {
                LaunchError::PortTaken(io::Error::new(io::ErrorKind::AddrInUse, msg))
            } else {
                LaunchError::Fatal(io::Error::other(msg))
            });
        }
        let short = Duration::from_millis(250);
        if let Ok(Reply::Simple(pong)) =
            resp::request_to(&target, password, &["PING"], short, short)
            && pong == "PONG"
        {
            match server_pid(&target, password) {
                Some(p) if p == pid => {
                    let watchdog = spawn_watchdog(pid);
                    return Ok(Launched { child, watchdog });
                }
                Some(other) => {
                    // Another process's server holds the port; ours will fail.
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(LaunchError::PortTaken(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("port {port} is already served by redis pid {other}"),
                    )));
                }
                None => {}
            }
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(LaunchError::Fatal(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{program} (pid {pid}) did not answer PING on {target:?} within {}s\n{}",
                    READY_TIMEOUT.as_secs(),
                    logs()
                ),
            )));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// The `process_id` from `INFO server`, to make sure we reached our own child.
fn server_pid(target: &Target, password: Option<&str>) -> Option<u32> {
    let t = Duration::from_millis(500);
    let Ok(Reply::Bulk(info)) = resp::request_to(
        target,
        password,
        &["INFO", "server"],
        t,
        Duration::from_secs(2),
    ) else {
        return None;
    };
    String::from_utf8_lossy(&info)
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests;
