//! The processes a run starts, and the guard that removes everything the run created.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;

use tokio::process::{Child, Command};

use crate::HarnessError;
use crate::net;
pub use crate::signals::{kill_hard, signal};

/// Starts `program args` inside namespace `ns`, with SIGKILL as its parent-death signal (the
/// harness runs on one thread, so that is the harness's death). `ip netns exec` and `setpriv`
/// exec into the program, so the child's pid is the program's.
///
/// `env` adds environment variables (the clock shift's preload library).
pub fn spawn_in(
    ns: &str,
    program: &Path,
    args: &[String],
    stdout: Stdio,
    env: &[(String, String)],
) -> Result<Child, HarnessError> {
    command_in(ns, program, args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(stdout)
        .spawn()
        .map_err(|e| HarnessError::Command(format!("start {} in {ns}: {e}", program.display())))
}

/// As [`spawn_in`], its stdout and stderr appended to the file `log` (a ZooKeeper server's).
pub fn spawn_logged_in(
    ns: &str,
    program: &Path,
    args: &[String],
    log: &Path,
    env: &[(String, String)],
) -> Result<Child, HarnessError> {
    let io = |e: std::io::Error| HarnessError::Io(format!("{}: {e}", log.display()));
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(io)?;
    let err = out.try_clone().map_err(io)?;
    command_in(ns, program, args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| HarnessError::Command(format!("start {} in {ns}: {e}", program.display())))
}

fn command_in(ns: &str, program: &Path, args: &[String]) -> Command {
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", ns, "setpriv", "--pdeathsig", "KILL", "--"])
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Removes what a run created, when dropped (a normal end, an error, a panic) or when
/// [`Cleanup::run`] is called (a signal): its processes, its namespaces (with their veths,
/// bridge and nftables tables) and its temporary directory.
#[derive(Debug)]
pub struct Cleanup {
    pids: Mutex<Vec<i32>>,
    namespaces: Mutex<Vec<String>>,
    dir: Mutex<Option<PathBuf>>,
}

impl Cleanup {
    /// A guard with nothing to remove yet.
    pub fn new() -> Cleanup {
        Cleanup {
            pids: Mutex::new(Vec::new()),
            namespaces: Mutex::new(Vec::new()),
            dir: Mutex::new(None),
        }
    }

    /// Kill `pid` at the end.
    pub fn pid(&self, pid: i32) {
        if let Ok(mut p) = self.pids.lock() {
            p.push(pid);
        }
    }

    /// `pid` was reaped: not to be signalled any more (its number may be reused).
    pub fn forget_pid(&self, pid: i32) {
        if let Ok(mut p) = self.pids.lock() {
            p.retain(|&q| q != pid);
        }
    }

    /// Delete namespace `ns` at the end (register before creating it).
    pub fn namespace(&self, ns: &str) {
        if let Ok(mut n) = self.namespaces.lock() {
            n.push(ns.to_owned());
        }
    }

    /// Remove `dir` at the end.
    pub fn dir(&self, dir: &Path) {
        if let Ok(mut d) = self.dir.lock() {
            *d = Some(dir.to_owned());
        }
    }

    /// Removes everything registered; a second call finds nothing left.
    pub fn run(&self) {
        let pids = self
            .pids
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default();
        for pid in pids {
            kill_hard(pid);
        }
        let namespaces = self
            .namespaces
            .lock()
            .map(|mut n| std::mem::take(&mut *n))
            .unwrap_or_default();
        // Nodes first, the bridge's namespace last.
        for ns in namespaces.iter().rev() {
            net::delete_namespace(ns);
        }
        if let Some(dir) = self.dir.lock().ok().and_then(|mut d| d.take()) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Default for Cleanup {
    fn default() -> Self {
        Cleanup::new()
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.run();
    }
}

/// The temporary directories of runs start with this.
pub const DIR_PREFIX: &str = "keylatch-chaos-";

/// Removes leftovers of earlier runs by their names: namespaces starting with `klc-` (and
/// every process in them) and temporary directories starting with `keylatch-chaos-`; with
/// `run` (the hex id of a run, as in `klc-<id>-net`), only that run's. Returns what it removed.
pub fn cleanup_leftovers(run: Option<&str>) -> Vec<String> {
    let mut removed = Vec::new();
    let ns_prefix = run.map_or_else(
        || net::PREFIX.to_owned(),
        |id| format!("{}{id}-", net::PREFIX),
    );
    let dir_prefix = run.map_or_else(|| DIR_PREFIX.to_owned(), |id| format!("{DIR_PREFIX}{id}"));
    let mut namespaces = net::namespaces_with_prefix(&ns_prefix);
    // Nodes before the bridge namespaces.
    namespaces.sort_by_key(|n| n.ends_with("-net"));
    for ns in namespaces {
        net::delete_namespace(&ns);
        removed.push(format!("namespace {ns}"));
    }
    if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let ours = match run {
                Some(_) => name == dir_prefix,
                None => name.starts_with(&dir_prefix),
            };
            if ours && e.path().is_dir() {
                let _ = std::fs::remove_dir_all(e.path());
                removed.push(format!("directory {}", e.path().display()));
            }
        }
    }
    removed
}
