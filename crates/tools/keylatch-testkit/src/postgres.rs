//! Starting and stopping a throwaway PostgreSQL server: [`PostgresServer`].
//!
//! The server comes from Debian's `postgresql` package (`./scripts/setup.sh` installs it):
//! `initdb` and `pg_ctl` from `/usr/lib/postgresql/<major>/bin` (or `PATH`). It runs as an
//! unprivileged user (`postgres` when the tests run as root, else the current user), keeps its
//! data in its own temporary directory, listens on a free port of `127.0.0.1` only (and on a
//! Unix socket in its data directory), and trusts every connection (`trust` on `127.0.0.1/32`
//! and the socket only). The superuser is `postgres`, the database `postgres`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::process::spawn_watchdog;
use crate::support::{release_port, reserve_free_port};

/// Where Debian's `postgresql` packages put the server's programs, newest first.
const DEBIAN_BIN_DIRS: [&str; 4] = [
    "/usr/lib/postgresql/17/bin",
    "/usr/lib/postgresql/16/bin",
    "/usr/lib/postgresql/15/bin",
    "/usr/lib/postgresql/14/bin",
];
/// The unprivileged user the server runs as when the tests run as root.
const SERVER_USER: &str = "postgres";
/// How long `pg_ctl start` and `pg_ctl stop` may take.
const PG_CTL_WAIT: Duration = Duration::from_secs(30);
/// Fresh ports tried by a start before giving up.
const START_ATTEMPTS: usize = 3;

/// The directory holding `initdb`, `pg_ctl` and `postgres`, if PostgreSQL is installed.
pub fn postgres_bin_dir() -> Option<PathBuf> {
    DEBIAN_BIN_DIRS
        .iter()
        .map(PathBuf::from)
        .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
}

/// Whether a PostgreSQL server can be started (`initdb` and `pg_ctl` are installed). If not,
/// run `./scripts/setup.sh` (it installs the Debian package `postgresql`).
pub fn postgres_available() -> bool {
    postgres_bin_dir().is_some()
}

/// A running PostgreSQL server on `127.0.0.1`, for tests.
///
/// Dropping it stops the server (`pg_ctl stop -m immediate`, then `SIGKILL`) and removes its
/// data directory. A small `sh` watchdog kills the server within about a second if the test
/// process dies first.
#[derive(Debug)]
pub struct PostgresServer {
    port: u16,
    dir: PathBuf,
    bin: PathBuf,
    /// The uid and gid the server runs as (`None`: this process's).
    user: Option<(u32, u32)>,
    pid: Option<u32>,
    watchdog: Option<Child>,
}

impl PostgresServer {
    /// Initialises a cluster in a new temporary directory and starts it on a free loopback
    /// port; returns once it accepts connections.
    ///
    /// # Errors
    /// [`io::ErrorKind::NotFound`] when PostgreSQL is not installed; an error quoting the
    /// program's output when `initdb` or `pg_ctl start` fail (a port taken meanwhile is
    /// retried with a fresh one a few times).
    pub fn start() -> io::Result<PostgresServer> {
        let bin = postgres_bin_dir().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "PostgreSQL is not installed (initdb and pg_ctl under /usr/lib/postgresql/*/bin); \
                 run ./scripts/setup.sh (it installs the Debian package postgresql)",
            )
        })?;
        let user = server_user()?;
        let mut last_err = None;
        for _ in 0..START_ATTEMPTS {
            let port = reserve_free_port()?;
            let dir = make_data_dir(user)?;
            let mut server = PostgresServer {
                port,
                dir,
                bin: bin.clone(),
                user,
                pid: None,
                watchdog: None,
            };
            server.initdb()?;
            match server.pg_ctl_start() {
                Ok(()) => return Ok(server),
                // Dropped: stops whatever started, removes the directory, frees the port.
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("could not start PostgreSQL")))
    }

    /// The port on `127.0.0.1`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The postmaster's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// A `psql` command for this server (`-X -A -t -q`, no password, `ON_ERROR_STOP`), to which
    /// the caller adds `-c <sql>` or pipes a script.
    pub fn psql_command(&self) -> Command {
        let mut cmd = Command::new(self.bin.join("psql"));
        cmd.args(["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "postgres", "-d", "postgres"]);
        cmd
    }

    /// Runs `sql` through `psql` and returns its output, trimmed.
    ///
    /// # Errors
    /// When `psql` cannot run or fails (the error quotes its stderr).
    pub fn psql(&self, sql: &str) -> io::Result<String> {
        let out = self
            .psql_command()
            .args(["-c", sql])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(failed("psql", &out));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Stops the server at once (`pg_ctl stop -m immediate`): every session ends, as in a
    /// crash; the data directory stays for [`restart`](PostgresServer::restart).
    ///
    /// # Errors
    /// When the server is still running after the stop and a `SIGKILL`.
    pub fn stop(&mut self) -> io::Result<()> {
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
        let Some(pid) = self.pid.take() else {
            return Ok(());
        };
        let stopped = self
            .as_server_user(self.bin.join("pg_ctl"))
            .args(["stop", "-m", "immediate", "-w", "-t"])
            .arg(PG_CTL_WAIT.as_secs().to_string())
            .arg("-D")
            .arg(self.dir.join("data"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !stopped {
            kill9(pid);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while process_alive(pid) {
            if Instant::now() > deadline {
                return Err(io::Error::other(format!("postgres {pid} did not stop")));
            }
            thread::sleep(Duration::from_millis(50));
        }
        if !stopped {
            // A killed postmaster leaves its lock file; its pid may linger as a zombie where
            // nothing reaps it, which the next start would take for a running server.
            let _ = fs::remove_file(self.dir.join("data/postmaster.pid"));
        }
        Ok(())
    }

    /// Starts the server again on the same port and data directory, after
    /// [`stop`](PostgresServer::stop).
    ///
    /// # Errors
    /// As [`start`](PostgresServer::start).
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop()?;
        self.pg_ctl_start()
    }

    fn as_server_user(&self, program: PathBuf) -> Command {
        let mut cmd = Command::new(program);
        #[cfg(unix)]
        if let Some((uid, gid)) = self.user {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(gid).env("HOME", &self.dir);
        }
        cmd.current_dir(&self.dir);
        cmd
    }

    fn initdb(&self) -> io::Result<()> {
        let out = self
            .as_server_user(self.bin.join("initdb"))
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"])
            .args(["--locale", "C", "-D"])
            .arg(self.dir.join("data"))
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(failed("initdb", &out));
        }
        // Trust on the socket and on 127.0.0.1 only.
        fs::write(
            self.dir.join("data/pg_hba.conf"),
            "local all all trust\nhost all all 127.0.0.1/32 trust\n",
        )?;
        Ok(())
    }

    fn pg_ctl_start(&mut self) -> io::Result<()> {
        let data = self.dir.join("data");
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c max_connections=200",
            self.port,
            self.dir.display()
        );
        let out = self
            .as_server_user(self.bin.join("pg_ctl"))
            .args(["start", "-w", "-t"])
            .arg(PG_CTL_WAIT.as_secs().to_string())
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(self.dir.join("postgres.log"))
            .args(["-o", &options])
            .stdin(Stdio::null())
            .output()?;
        // The postmaster's pid, whether or not pg_ctl saw it ready: stopped on failure.
        self.pid = fs::read_to_string(data.join("postmaster.pid"))
            .ok()
            .and_then(|text| text.lines().next()?.trim().parse().ok());
        if let Some(pid) = self.pid {
            self.watchdog = spawn_watchdog(pid);
        }
        if !out.status.success() {
            let log = fs::read_to_string(self.dir.join("postgres.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            let _ = self.stop();
            return Err(io::Error::other(format!(
                "{}\nserver log (last lines, newest first):\n{}",
                failed("pg_ctl start", &out),
                tail.join("\n")
            )));
        }
        Ok(())
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        let _ = self.stop();
        let _ = fs::remove_dir_all(&self.dir);
        release_port(self.port);
    }
}

fn failed(what: &str, out: &Output) -> io::Error {
    io::Error::other(format!(
        "{what} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout).trim(),
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// The uid and gid of the `postgres` user when this process is root (the server refuses to
/// run as root); `None` otherwise (the server runs as this user).
fn server_user() -> io::Result<Option<(u32, u32)>> {
    let out = Command::new("id").arg("-u").output()?;
    if String::from_utf8_lossy(&out.stdout).trim() != "0" {
        return Ok(None);
    }
    let passwd = fs::read_to_string("/etc/passwd")?;
    passwd
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 3 && f[0] == SERVER_USER)
        .and_then(|f| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
        .map(Some)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "running as root and there is no `postgres` user to run the server as \
                 (the Debian package postgresql creates it)",
            )
        })
}

/// A new temporary directory owned by the server's user.
fn make_data_dir(user: Option<(u32, u32)>) -> io::Result<PathBuf> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("keylatch-pg-{}-", std::process::id()))
        .tempdir()
        .map(tempfile::TempDir::keep)?;
    #[cfg(unix)]
    if let Some((uid, gid)) = user {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid))?;
    }
    Ok(dir)
}

fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.split(") ").nth(1).is_some_and(|r| r.starts_with('Z')))
}

fn kill9(pid: u32) {
    let _ = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
