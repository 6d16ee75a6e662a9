//! Helpers for the CLI tests: the binary, a server, a scratch dir.
#![allow(dead_code)]

pub mod procs;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

pub use keylatch_testkit::RedisServer;

pub fn server() -> RedisServer {
    RedisServer::start().expect("start redis-server (run ./scripts/setup.sh)")
}

/// `keylatch ARGS` with no connection settings from the test's own environment (URL,
/// credentials, TLS files): what the test passes is all it gets.
pub fn bare(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keylatch"));
    cmd.args(args).stdin(Stdio::null());
    for var in [
        "REDIS_URL",
        "KEYLATCH_URL",
        "KEYLATCH_REDIS_URL",
        "KEYLATCH_REDIS_PASSWORD",
        "KEYLATCH_REDIS_USERNAME",
        "KEYLATCH_TLS_CA",
        "KEYLATCH_TLS_CERT",
        "KEYLATCH_TLS_KEY",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// Waits (20 s at most) until `path` exists: the command under test has started.
pub fn wait_for_file(path: &std::path::Path) {
    let started = std::time::Instant::now();
    while !path.exists() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `keylatch --redis URL ARGS...`, ready to spawn.
pub fn keylatch(server: &RedisServer, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keylatch"));
    cmd.arg("--redis").arg(server.url()).args(args);
    cmd.env_remove("REDIS_URL")
        .env_remove("KEYLATCH_REDIS_URL")
        .env_remove("KEYLATCH_URL");
    cmd.stdin(Stdio::null());
    cmd
}

pub fn output(server: &RedisServer, args: &[&str]) -> Output {
    keylatch(server, args).output().expect("run keylatch")
}

/// `keylatch inspect NAME --json`, which must succeed, parsed.
pub fn inspect(server: &RedisServer, name: &str) -> serde_json::Value {
    json_output(&output(server, &["inspect", name, "--json"]))
}

/// The JSON a run printed, which must have succeeded.
pub fn json_output(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// A fresh scratch directory.
pub fn scratch(prefix: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "keylatch-cli-{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A shell command that enters a critical section detected with `mkdir` (atomic: it fails
/// when another process is inside), stays `millis`, appends `tag` to `log`, and leaves.
/// Exits 99 on overlap.
pub fn critical_section(dir: &std::path::Path, tag: &str, millis: u64) -> String {
    let inside = dir.join("inside");
    let log = dir.join("log");
    format!(
        "mkdir {inside} 2>/dev/null || {{ echo overlap >> {overlaps}; exit 99; }}; \
         echo {tag} >> {log}; sleep {secs}; rmdir {inside}",
        inside = inside.display(),
        overlaps = dir.join("overlaps").display(),
        log = log.display(),
        secs = millis as f64 / 1000.0,
    )
}
