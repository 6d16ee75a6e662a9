//! The real Apache Curator, for interoperability tests: [`CuratorDriver`] runs a small Java
//! program (`curator/CuratorDriver.java`, compiled with `javac` once per test process) that
//! drives Curator's own `InterProcessMutex` (also made revocable, and `Revoker`),
//! `InterProcessReadWriteLock`, `InterProcessSemaphoreV2` and `SharedCount` on a path, one
//! command a line (the commands are listed at the top of the Java file).
//!
//! Curator comes from Debian's `libcurator-recipes-java` (5.4; `./scripts/setup-zookeeper.sh`
//! installs it with a JDK): `/usr/share/java/curator-recipes.jar`, whose manifest names the
//! jars it needs (curator-framework, curator-client, zookeeper, guava, slf4j-api).
//!
//! May import: the standard library, `process`, `support`.

use std::fs;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::Duration;

use crate::find_on_path;
use crate::process::spawn_watchdog;

/// Curator's recipes jar (Debian's `libcurator-recipes-java`).
pub const CURATOR_RECIPES_JAR: &str = "/usr/share/java/curator-recipes.jar";
/// The driver's source, compiled at test time.
const DRIVER_SOURCE: &str = include_str!("curator/CuratorDriver.java");
/// How long the driver may take to start its JVM and connect.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the real Curator cannot run here, or `None` when it can: `java`, `javac` and
/// [`CURATOR_RECIPES_JAR`] are needed (`./scripts/setup-zookeeper.sh` installs them).
pub fn curator_unavailable() -> Option<String> {
    for program in ["java", "javac"] {
        if !find_on_path(program) {
            return Some(format!(
                "`{program}` is not on PATH (run ./scripts/setup-zookeeper.sh)"
            ));
        }
    }
    if !Path::new(CURATOR_RECIPES_JAR).is_file() {
        return Some(format!(
            "{CURATOR_RECIPES_JAR} is missing (run ./scripts/setup-zookeeper.sh: it installs libcurator-recipes-java)"
        ));
    }
    None
}

/// Compiles the driver once per process; the directory of its class.
fn compiled() -> io::Result<&'static Path> {
    static CLASSES: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let result = CLASSES.get_or_init(|| {
        let dir = crate::support::make_temp_dir().map_err(|e| e.to_string())?;
        let source = dir.join("CuratorDriver.java");
        fs::write(&source, DRIVER_SOURCE).map_err(|e| e.to_string())?;
        let out = Command::new("javac")
            .args(["-nowarn", "-cp", "/usr/share/java/*", "-d"])
            .arg(&dir)
            .arg(&source)
            .output()
            .map_err(|e| format!("cannot run javac: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "javac failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(dir)
    });
    match result {
        Ok(dir) => Ok(dir.as_path()),
        Err(e) => Err(io::Error::other(e.clone())),
    }
}

/// One JVM driving Curator's recipes on one path, with its own Curator session
/// (default ACL provider, no namespace). Killed on drop, and by a watchdog if the test process
/// dies first.
#[derive(Debug)]
pub struct CuratorDriver {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    watchdog: Option<Child>,
    log: PathBuf,
}

impl CuratorDriver {
    /// Starts the driver on `connect_string` (`host:port,…`) for the lock at `path`, and waits
    /// until its session is connected.
    ///
    /// # Errors
    /// When Curator is not installed ([`curator_unavailable`]), the driver does not compile,
    /// or it does not connect within 60 s (the error quotes its log).
    pub fn start(connect_string: &str, path: &str) -> io::Result<CuratorDriver> {
        CuratorDriver::start_with_digest(connect_string, path, None)
    }

    /// As [`start`](CuratorDriver::start), the session with digest credentials
    /// (`user:password`) when given.
    ///
    /// # Errors
    /// As [`start`](CuratorDriver::start).
    pub fn start_with_digest(
        connect_string: &str,
        path: &str,
        digest: Option<&str>,
    ) -> io::Result<CuratorDriver> {
        if let Some(why) = curator_unavailable() {
            return Err(io::Error::new(io::ErrorKind::NotFound, why));
        }
        let classes = compiled()?;
        let log = classes.join(format!("driver-{}.log", unique()));
        let mut child = Command::new("java")
            .args([
                "-Xms16m",
                "-Xmx128m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
            ])
            .arg("-cp")
            .arg(format!("{}:{CURATOR_RECIPES_JAR}", classes.display()))
            .args(["CuratorDriver", connect_string, path])
            .args(digest)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(fs::File::create(&log)?)
            .spawn()?;
        let watchdog = spawn_watchdog(child.id());
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (send, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let mut driver = CuratorDriver {
            child,
            stdin,
            lines,
            watchdog,
            log,
        };
        match driver.next_line(READY_TIMEOUT) {
            Some(line) if line == "ready" => Ok(driver),
            other => Err(io::Error::other(format!(
                "the Curator driver did not start ({other:?}): {}",
                driver.log_text()
            ))),
        }
    }

    /// Sends one command (`lock`, `try MILLIS`, `unlock`, `read`, `write`, `sem MAX`,
    /// `acquire`, …, `quit`: see the Java file).
    ///
    /// # Panics
    /// If the driver's stdin is closed (it died).
    pub fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .unwrap_or_else(|e| panic!("the Curator driver died ({e}): {}", self.log_text()));
    }

    /// The driver's next answer, if one comes within `limit`.
    pub fn next_line(&mut self, limit: Duration) -> Option<String> {
        self.lines.recv_timeout(limit).ok()
    }

    /// Sends `command` and returns its answer (waiting at most `limit`).
    ///
    /// # Panics
    /// If no answer comes within `limit`.
    pub fn ask(&mut self, command: &str, limit: Duration) -> String {
        self.send(command);
        self.next_line(limit).unwrap_or_else(|| {
            panic!(
                "the Curator driver did not answer {command:?} within {limit:?}: {}",
                self.log_text()
            )
        })
    }

    /// The JVM's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the JVM now (its session then ends by expiry, as a crashed Curator client's).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for CuratorDriver {
    fn drop(&mut self) {
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
        self.kill();
        let _ = fs::remove_file(&self.log);
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
