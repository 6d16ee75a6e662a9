//! Keeps `keylatch run`'s command from outliving keylatch.
//!
//! The lock is held by keylatch, not by the command: once keylatch is gone (a `kill -9`, the
//! OOM killer, a crash) nobody renews or releases the lock, and the next holder can start while
//! an orphaned command still runs. So before it starts the command, `run` starts a watcher:
//! this same executable with [`REAPER_ARG`], in its own process group (a terminal's Ctrl-C does
//! not reach it) and with an empty environment (nothing of the client's settings or secrets).
//! Its standard input is a pipe whose only writer is keylatch. `run` writes the command's pid
//! and start time to it; when the command has ended and keylatch has waited for it, it writes
//! [`DONE`] and the watcher exits. If the pipe closes without [`DONE`] — keylatch died, however
//! it died — the watcher kills the command and every process below it (`SIGSTOP` on each one
//! found, so that none forks while the tree is walked, then `SIGKILL` on all), at once: well
//! before the lock can pass on, which takes a lease, a watchdog timeout or a session timeout.
//!
//! What it cannot reach: a process that left the tree before keylatch died (a daemon that
//! double-forked, whose parent is then init), and the command if the watcher itself is killed
//! too (a `kill -9` of both; a process-group kill of keylatch's group does not reach it).
//!
//! Linux only (it reads `/proc`); elsewhere `run` works as before, with the command killed when
//! keylatch exits normally.

use std::collections::HashSet;
use std::io::Read;
use std::process::{ExitCode, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};

/// The first argument that makes the executable a watcher (not a user command: it is not in
/// the CLI's help, and nothing else starts with it).
pub(crate) const REAPER_ARG: &str = "__keylatch-reap";

/// What `run` writes once the command has ended normally: nothing to kill.
const DONE: u8 = b'.';

/// The most rounds of the tree walk (each finds the children of the processes found before).
const MAX_ROUNDS: usize = 64;

/// A started watcher; [`watch`](Reaper::watch) names the command, [`done`](Reaper::done) lets
/// it go. Dropped (or keylatch killed) before `done`, it kills the command's tree.
#[derive(Debug)]
pub(crate) struct Reaper {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Reaper {
    /// Starts the watcher (before the command, so that no command runs unwatched).
    pub(crate) fn start() -> std::io::Result<Reaper> {
        let exe = std::env::current_exe()?;
        let mut child = Command::new(exe)
            .arg(REAPER_ARG)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()?;
        let stdin = child.stdin.take();
        Ok(Reaper { child, stdin })
    }

    /// Names the command to kill if keylatch dies.
    pub(crate) async fn watch(&mut self, pid: u32) -> std::io::Result<()> {
        let start = start_time(pid as i32).unwrap_or(0);
        let Some(stdin) = self.stdin.as_mut() else {
            return Ok(());
        };
        stdin
            .write_all(format!("{pid} {start}\n").as_bytes())
            .await?;
        stdin.flush().await
    }

    /// The command has ended and was waited for: the watcher exits without killing anything.
    pub(crate) async fn done(mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(&[DONE]).await;
            drop(stdin);
        }
        let _ = self.child.wait().await;
    }
}

/// Runs the watcher when the process was started as one; `None` otherwise.
pub(crate) fn main_if_reaper() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != REAPER_ARG {
        return None;
    }
    let mut input = Vec::new();
    let mut byte = [0u8; 1];
    let mut stdin = std::io::stdin().lock();
    // Reads until DONE or the end of the pipe; the command's pid and start time come first.
    let done = loop {
        match stdin.read(&mut byte) {
            Ok(0) => break false,
            Ok(_) if byte[0] == DONE => break true,
            Ok(_) => input.push(byte[0]),
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break false,
        }
    };
    if !done {
        let text = String::from_utf8_lossy(&input);
        let mut words = text.split_whitespace();
        if let (Some(Ok(pid)), Some(Ok(start))) = (
            words.next().map(str::parse::<i32>),
            words.next().map(str::parse::<u64>),
        ) {
            let killed = kill_tree(pid, start);
            if killed > 0 {
                eprintln!(
                    "keylatch: the supervising keylatch is gone: killed its command and \
                     {} process(es) below it",
                    killed - 1
                );
            }
        }
    }
    Some(ExitCode::SUCCESS)
}

/// Stops `root` (if it is still the process that started at `start`) and every process below
/// it, then kills them all. Returns how many were killed.
fn kill_tree(root: i32, start: u64) -> usize {
    if root <= 0 || start_time(root) != Some(start) {
        return 0;
    }
    let mut found: Vec<i32> = vec![root];
    let mut seen: HashSet<i32> = found.iter().copied().collect();
    let _ = kill(Pid::from_raw(root), Signal::SIGSTOP);
    for _ in 0..MAX_ROUNDS {
        let new: Vec<i32> = processes()
            .into_iter()
            .filter(|(pid, ppid)| seen.contains(ppid) && !seen.contains(pid))
            .map(|(pid, _)| pid)
            .collect();
        if new.is_empty() {
            break;
        }
        for pid in new {
            // Stopped, it forks no more; what it forked already is found next round.
            let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
            seen.insert(pid);
            found.push(pid);
        }
    }
    for pid in &found {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    found.len()
}

/// Every process's pid and parent pid, from `/proc`.
fn processes() -> Vec<(i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let pid: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let fields = stat_fields(pid)?;
        Some((pid, fields.get(1)?.parse().ok()?))
    })
    .collect()
}

/// A process's start time (clock ticks since boot), which tells it apart from a later process
/// that reused its pid.
fn start_time(pid: i32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// The fields of `/proc/PID/stat` after the command name (state, ppid, …): the name is in
/// parentheses and may hold spaces and parentheses itself.
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_parent_and_start_time() {
        let me = std::process::id() as i32;
        let parent = std::os::unix::process::parent_id() as i32;
        let fields = stat_fields(me).unwrap();
        assert_eq!(fields[1].parse::<i32>().unwrap(), parent);
        assert!(start_time(me).is_some());
        assert!(processes().contains(&(me, parent)));
    }

    #[test]
    fn a_pid_with_another_start_time_is_left_alone() {
        let me = std::process::id() as i32;
        let start = start_time(me).unwrap();
        assert_eq!(kill_tree(me, start + 1), 0);
        assert_eq!(kill_tree(-1, start), 0);
        assert_eq!(kill_tree(0, start), 0);
    }
}
