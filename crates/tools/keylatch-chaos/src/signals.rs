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
