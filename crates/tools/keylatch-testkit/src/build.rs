//! Which server build the testkit runs, and what that build can do.
//!
//! Every server the testkit starts (single servers, sentinels, cluster nodes) runs the
//! same executable: `KEYLATCH_TEST_SERVER` if set (a path, or a name looked up on
//! `PATH`), else `redis-server`. Its name and version come from `--version`, and its
//! capabilities from asking the binary itself (see [`ServerBuild::tls`]).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use crate::support::{make_temp_dir, release_port, reserve_free_port};

/// Environment variable naming the server executable the testkit runs.
pub const SERVER_ENV: &str = "KEYLATCH_TEST_SERVER";

/// The executable run when [`SERVER_ENV`] is not set.
pub(crate) const DEFAULT_SERVER: &str = "redis-server";

/// How long the TLS probe may take before the build is taken as lacking TLS support.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server executable every testkit server runs: `$KEYLATCH_TEST_SERVER` if set and
/// not empty, else `redis-server` (looked up on `PATH`).
pub fn server_program() -> String {
    match std::env::var(SERVER_ENV) {
        Ok(program) if !program.trim().is_empty() => program,
        _ => DEFAULT_SERVER.to_owned(),
    }
}

/// A server build, as its binary describes itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerBuild {
    program: String,
    flavor: String,
    version: String,
    tls: bool,
}

impl ServerBuild {
    /// The executable (as given: a path or a name on `PATH`).
    pub fn program(&self) -> &str {
        &self.program
    }

    /// `"redis"` or `"valkey"` (lower case, from the `--version` banner), or
    /// `"unknown"` if the banner says neither.
    pub fn flavor(&self) -> &str {
        &self.flavor
    }

    /// The version from the `--version` banner (`v=…`), e.g. `"9.0.1"`; empty if the
    /// banner has none.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// `(major, minor)` of [`version`](Self::version); `(0, 0)` if it does not parse.
    pub fn major_minor(&self) -> (u32, u32) {
        let mut parts = self.version.split('.').map(|p| p.parse().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
    }

    /// Whether the build serves TLS. Found by starting it on a TLS port with
    /// certificate files that do not exist: a build with TLS refuses the files, one
    /// without TLS says it has no TLS support (or, before Redis 7.2, does not know
    /// `tls-port`).
    pub fn tls(&self) -> bool {
        self.tls
    }

    /// A one-line description, e.g. `valkey-server 9.0.1 (/path/to/valkey-server)`.
    pub fn describe(&self) -> String {
        format!(
            "{}-server {} ({}{})",
            self.flavor,
            self.version,
            self.program,
            if self.tls { "" } else { ", no TLS" }
        )
    }
}

/// The build every testkit server runs, probed once per process.
///
/// # Errors
///
/// Fails if the executable cannot be run (not installed, or `KEYLATCH_TEST_SERVER`
/// names nothing runnable).
pub fn server_build() -> io::Result<&'static ServerBuild> {
    static BUILD: OnceLock<Result<ServerBuild, String>> = OnceLock::new();
    BUILD
        .get_or_init(|| probe(&server_program()).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|msg| io::Error::new(io::ErrorKind::NotFound, msg.clone()))
}

/// Returns `true`, after printing `skipped: <reason>`, if the server build lacks TLS;
/// a TLS test returns early on it. A build that cannot be probed is not skipped: the
/// test then fails starting its server, with the reason.
///
/// The line goes straight to stderr, past the test harness's capture, so that a run
/// shows every skip (with the test's name) and not only those of failed tests.
pub fn skip_without_tls() -> bool {
    match server_build() {
        Ok(build) if !build.tls() => {
            report_skip(&format!(
                "the server build has no TLS support: {}",
                build.describe()
            ));
            true
        }
        _ => false,
    }
}

/// Prints `<test>: skipped: <reason>` (the test's name is its thread's) to stderr, uncaptured:
/// the line shows in a passing test's output, where `scripts/test.sh`'s summary counts it. (The
/// harness captures `println!` and `eprintln!` alike, so a skip printed with them is lost.)
pub fn report_skip(reason: &str) {
    use std::io::Write;
    let thread = thread::current();
    let test = thread.name().unwrap_or("a test");
    let _ = writeln!(io::stderr(), "{test}: skipped: {reason}");
}

/// Prints (to stderr, once per server start) which build a server runs.
pub(crate) fn announce(program: &str) {
    match server_build() {
        Ok(build) if build.program == program => eprintln!("testkit: {}", build.describe()),
        _ => eprintln!("testkit: {program}"),
    }
}

fn probe(program: &str) -> io::Result<ServerBuild> {
    let out = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot run `{program} --version` ({e}); run ./scripts/setup.sh, or set \
                     {SERVER_ENV} to a server executable"
                ),
            )
        })?;
    let banner = String::from_utf8_lossy(&out.stdout).into_owned();
    let (flavor, version) = parse_banner(&banner);
    Ok(ServerBuild {
        program: program.to_owned(),
        flavor,
        version,
        tls: probe_tls(program)?,
    })
}

/// `(flavor, version)` from a `--version` banner such as
/// `Valkey server v=9.0.1 sha=… malloc=… bits=64 build=…`.
pub(crate) fn parse_banner(banner: &str) -> (String, String) {
    let lower = banner.to_ascii_lowercase();
    let flavor = if lower.starts_with("valkey") {
        "valkey"
    } else if lower.starts_with("redis") {
        "redis"
    } else {
        "unknown"
    };
    let version = banner
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .unwrap_or("")
        .to_owned();
    (flavor.to_owned(), version)
}

/// Whether `program` has TLS support: starts it with a TLS port and certificate files
/// that do not exist, and reads why it refused to start.
fn probe_tls(program: &str) -> io::Result<bool> {
    let dir = make_temp_dir()?;
    let port = reserve_free_port()?;
    let result = run_tls_probe(program, &dir, port);
    release_port(port);
    let _ = fs::remove_dir_all(&dir);
    Ok(!says_no_tls(&result?))
}

fn run_tls_probe(program: &str, dir: &Path, port: u16) -> io::Result<String> {
    let missing: PathBuf = dir.join("missing.pem");
    let missing = missing.to_string_lossy();
    let stdio = dir.join("probe.log");
    let file = fs::File::create(&stdio)?;
    let port = port.to_string();
    let mut child = Command::new(program)
        .args(["--port", "0", "--bind", "127.0.0.1", "--tls-port", &port])
        .args(["--tls-cert-file", &missing, "--tls-key-file", &missing])
        .args(["--tls-ca-cert-file", &missing])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .arg("--dir")
        .arg(dir)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()?;
    let deadline = Instant::now() + PROBE_TIMEOUT;
    while child.try_wait()?.is_none() {
        if Instant::now() >= deadline {
            // It came up although the files do not exist: not a refusal for lack of TLS.
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    fs::read_to_string(&stdio)
}

/// Whether a server's startup output says it was built without TLS.
pub(crate) fn says_no_tls(output: &str) -> bool {
    // Redis 7.2+ and Valkey: TLS is a connection type that may be missing.
    output.contains("Failed finding TLS support")
        || output.contains("Missing implement of connection type tls")
        // Redis 7.0 and older without TLS: the option does not exist.
        || (output.contains("Bad directive") && output.contains("tls-"))
}
