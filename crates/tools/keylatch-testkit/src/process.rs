//! What starting a server process needs, whatever the server: why a launch attempt failed,
//! what it left running, and a watchdog that kills the server once this process is gone.
//!
//! May import: the standard library only.

use std::io;
use std::process::{Child, Command, Stdio};

/// Why one launch attempt failed.
pub(crate) enum LaunchError {
    /// A port was (or became) busy: worth trying again.
    PortTaken(io::Error),
    /// Anything else: report it.
    Fatal(io::Error),
}

/// A server process that answered, and its watchdog.
pub(crate) struct Launched {
    pub(crate) child: Child,
    pub(crate) watchdog: Option<Child>,
}

/// Spawns `sh` that kills `pid` once this process is gone. Best effort: `None` if `sh` is
/// unavailable. Kill it before the server.
pub(crate) fn spawn_watchdog(pid: u32) -> Option<Child> {
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

/// For tests: the message of a launch that found its port taken (panics on any other outcome).
#[cfg(test)]
pub(crate) fn expect_port_taken(result: Result<Launched, LaunchError>) -> String {
    match result {
        Err(LaunchError::PortTaken(e)) => e.to_string(),
        Err(LaunchError::Fatal(e)) => panic!("expected PortTaken, got Fatal: {e}"),
        Ok(_) => panic!("expected PortTaken, got a server"),
    }
}
