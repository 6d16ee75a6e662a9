//! `keylatch top` in a real terminal: tmux runs it, the test reads the screen
//! (`capture-pane`) while `keylatch run` processes hold and wait, and quits it with a key.
mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::procs::Procs;
use common::{keylatch, server};

/// A tmux server of the test's own (its own socket), killed on drop.
struct Tmux(String);

impl Tmux {
    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.0)
            .args(args)
            .output()
            .expect("tmux")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

#[test]
fn top_shows_holders_with_their_process_and_waiters_in_order() {
    if Command::new("tmux").arg("-V").output().is_err() {
        keylatch_testkit::report_skip(
            "tmux is not installed (scripts/setup.sh --browser installs it)",
        );
        return;
    }
    let server = server();
    let mut procs = Procs::default();
    let holder = procs
        .spawn(&mut keylatch(
            &server,
            &["run", "top-plain", "--", "sleep", "300"],
        ))
        .id();
    procs.spawn(&mut keylatch(
        &server,
        &["run", "--fair", "top-fair", "--", "sleep", "300"],
    ));
    assert!(eventually(Duration::from_secs(20), || {
        server.cli(&["EXISTS", "top-fair"]).unwrap().trim() == "1"
    }));
    procs.spawn(&mut keylatch(
        &server,
        &["run", "--fair", "top-fair", "--", "sleep", "300"],
    ));
    assert!(eventually(Duration::from_secs(20), || {
        server
            .cli(&["LLEN", "redisson_lock_queue:{top-fair}"])
            .unwrap()
            .trim()
            == "1"
    }));
    let waiter = server
        .cli(&["LINDEX", "redisson_lock_queue:{top-fair}", "0"])
        .unwrap()
        .trim()
        .to_owned();
    let owner = server
        .cli(&["HKEYS", "top-plain"])
        .unwrap()
        .trim()
        .to_owned();

    let tmux = Tmux(format!("keylatch-top-{}", std::process::id()));
    let command = format!(
        "{} --redis {} top --pattern 'top-*' --every 300ms",
        env!("CARGO_BIN_EXE_keylatch"),
        server.url()
    );
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "220",
        "-y",
        "40",
        &command,
    ]);
    assert!(started.status.success(), "{started:?}");

    let mut screen = String::new();
    let shown = eventually(Duration::from_secs(20), || {
        screen = tmux.screen();
        let plain = screen
            .lines()
            .find(|l| l.starts_with("top-plain"))
            .unwrap_or("");
        plain.contains(&owner)
            && plain.contains(&holder.to_string())
            && plain.contains("sleep 300")
            && screen
                .lines()
                .any(|l| l.starts_with("top-fair") && l.contains("waits #1") && l.contains(&waiter))
    });
    assert!(shown, "the screen:\n{screen}");

    // `q` quits: the session ends with it.
    tmux.run(&["send-keys", "-t", "top", "q"]);
    assert!(
        eventually(Duration::from_secs(10), || !tmux
            .run(&["has-session", "-t", "top"])
            .status
            .success()),
        "top did not quit on q:\n{}",
        tmux.screen()
    );
}
