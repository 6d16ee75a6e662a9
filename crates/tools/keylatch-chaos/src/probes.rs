//! The probes that a fault took effect: a paused process is stopped, a stepped clock reads
//! back. A fault that did not reach its target fails the harness (exit 2).

use std::time::Duration;

use crate::HarnessError;
use crate::servers::{Redis, helper};

/// The probe that a SIGSTOP took effect: `pid` is stopped within 1 s, else the harness fails
/// (exit 2): a fault that did not reach its target must not count as injected.
pub(crate) async fn verify_stopped(pid: i32, name: &str) -> Result<(), HarnessError> {
    if crate::signals::stopped_within(pid, Duration::from_secs(1)).await {
        Ok(())
    } else {
        Err(HarnessError::Command(format!(
            "the pause did not take effect: {name} (pid {pid}) is not stopped"
        )))
    }
}

/// How far `server`'s wall clock is off the host's, in ms, read with TIME from namespace `ns`.
pub(crate) async fn clock_offset_ms(
    server: &Redis,
    ns: &str,
    me: &std::path::Path,
) -> Result<i64, HarnessError> {
    let out = helper(ns, me, &["server-time", "--url", &server.url()]).await?;
    let theirs: i64 = out
        .trim()
        .parse()
        .map_err(|_| HarnessError::Io(format!("server-time: {out:?}")))?;
    let ours = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    Ok(theirs - ours)
}
