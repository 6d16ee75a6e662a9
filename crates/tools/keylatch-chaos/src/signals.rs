//! Signals to the run's processes.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Sends `signal` to `pid`, ignoring a process that is gone. Never to a pid of 0 or less (a
/// process group).
pub fn signal(pid: i32, signal: Signal) {
    if pid > 0 {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

/// SIGCONT (a stopped process would not die) then SIGKILL.
pub fn kill_hard(pid: i32) {
    signal(pid, Signal::SIGCONT);
    signal(pid, Signal::SIGKILL);
}

/// Whether `pid` is stopped (state `T` in `/proc/<pid>/stat`), asked until it is, at most
/// `within`: the probe that a SIGSTOP took effect.
pub async fn stopped_within(pid: i32, within: std::time::Duration) -> bool {
    let start = std::time::Instant::now();
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state follows the command name's closing parenthesis.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        if matches!(state, Some('T' | 't')) {
            return true;
        }
        if start.elapsed() >= within {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
