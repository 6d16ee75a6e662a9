//! `keylatch latch`: the exit codes of `set`, `count-down`, `count` and `wait`, a waiting
//! process released by another's count-down, and `inspect` showing a latch's count.
mod common;

use std::time::Duration;

use common::{inspect, keylatch, output, server};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn set_exits_0_when_set_and_1_when_the_latch_exists() {
    let server = server();
    let set = output(&server, &["latch", "set", "cli-latch-set", "3"]);
    assert_eq!(
        set.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    let again = output(&server, &["latch", "set", "cli-latch-set", "5"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists (count 3)"));
    let count = output(&server, &["latch", "count", "cli-latch-set"]);
    assert_eq!(stdout(&count), "3", "the existing latch was changed");
    let report = inspect(&server, "cli-latch-set");
    assert_eq!(report["latch_count"], 3);
    // Bad input: usage errors.
    let zero = output(&server, &["latch", "set", "cli-latch-zero", "0"]);
    assert_eq!(zero.status.code(), Some(64));
    let missing = output(&server, &["latch", "set", "cli-latch-zero"]);
    assert_eq!(missing.status.code(), Some(64));
    let name = output(&server, &["latch", "count-down", "a{b}"]);
    assert_eq!(name.status.code(), Some(64));
}

#[test]
fn wait_exits_75_when_wait_passes_and_0_once_the_count_is_zero() {
    let server = server();
    assert!(
        output(&server, &["latch", "set", "cli-latch-wait", "2"])
            .status
            .success()
    );
    let timed_out = output(
        &server,
        &["latch", "wait", "--wait", "300ms", "cli-latch-wait"],
    );
    assert_eq!(timed_out.status.code(), Some(75));
    assert!(String::from_utf8_lossy(&timed_out.stderr).contains("still at count 2"));

    let mut waiter = keylatch(&server, &["latch", "wait", "cli-latch-wait"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let down = output(&server, &["latch", "count-down", "cli-latch-wait"]);
    assert_eq!(stdout(&down), "1");
    std::thread::sleep(Duration::from_millis(500));
    assert!(waiter.try_wait().unwrap().is_none(), "released at count 1");
    let down = output(&server, &["latch", "count-down", "cli-latch-wait"]);
    assert_eq!(stdout(&down), "0");
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = waiter.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the waiter was not released"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    // Open now (the key is gone): waits return at once, a count-down leaves it at 0.
    let open = output(
        &server,
        &["latch", "wait", "--wait", "0s", "cli-latch-wait"],
    );
    assert_eq!(open.status.code(), Some(0));
    assert_eq!(
        stdout(&output(&server, &["latch", "count-down", "cli-latch-wait"])),
        "0"
    );
    assert_eq!(inspect(&server, "cli-latch-wait")["primitive"], "none");
}

#[test]
fn an_interrupted_wait_exits_130() {
    let server = server();
    assert!(
        output(&server, &["latch", "set", "cli-latch-int", "1"])
            .status
            .success()
    );
    let mut waiter = keylatch(&server, &["latch", "wait", "cli-latch-int"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let sent = std::process::Command::new("kill")
        .args(["-INT", &waiter.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    assert_eq!(waiter.wait().unwrap().code(), Some(130));
}
