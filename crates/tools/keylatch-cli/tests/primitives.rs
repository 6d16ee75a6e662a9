//! `keylatch run` with each primitive, across processes; `inspect --json` for each.
mod common;

use std::time::Duration;

use common::{critical_section, inspect, keylatch, scratch, server};

/// `--fair`: commands run in the order the processes started waiting.
#[test]
fn fair_runs_commands_in_arrival_order() {
    let server = server();
    let dir = scratch("fair");
    let log = dir.join("order");
    let mut gate = keylatch(
        &server,
        &["run", "--fair", "cli-fair", "--", "sleep", "1.5"],
    )
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let mut children = Vec::new();
    for id in 0..5 {
        let script = format!("echo {id} >> {}; sleep 0.05", log.display());
        children.push(
            keylatch(
                &server,
                &["run", "--fair", "cli-fair", "--", "sh", "-c", &script],
            )
            .spawn()
            .unwrap(),
        );
        // Each waiter is queued before the next one starts.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let queue = inspect(&server, "cli-fair");
            if queue["queue"].as_array().map_or(0, Vec::len) > id {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "waiter {id} never queued"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let queued = inspect(&server, "cli-fair");
    assert_eq!(queued["primitive"], "fair");
    assert_eq!(queued["queue"].as_array().unwrap().len(), 5);
    assert!(queued["queue"][0]["deadline_in_ms"].as_i64().unwrap() > 0);
    gate.wait().unwrap();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let order: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(order, ["0", "1", "2", "3", "4"], "not run in arrival order");
}

/// `--semaphore 3`: never more than 3 commands at once (and more than one).
#[test]
fn semaphore_caps_concurrent_commands() {
    let server = server();
    let dir = scratch("semaphore");
    // Each command takes a free slot directory 0..=2 with mkdir; a fourth would find none.
    let script = format!(
        "for s in 0 1 2; do if mkdir {d}/slot$s 2>/dev/null; then echo $s >> {d}/log; sleep 0.2; rmdir {d}/slot$s; exit 0; fi; done; echo over >> {d}/overs; exit 99",
        d = dir.display()
    );
    let mut children = Vec::new();
    for _ in 0..8 {
        children.push(
            keylatch(
                &server,
                &[
                    "run",
                    "--semaphore",
                    "3",
                    "cli-sem",
                    "--",
                    "sh",
                    "-c",
                    &script,
                ],
            )
            .spawn()
            .unwrap(),
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    let report = inspect(&server, "cli-sem");
    assert_eq!(report["primitive"], "permit_expirable_semaphore");
    for mut child in children {
        assert!(
            child.wait().unwrap().success(),
            "a command found no free slot: more than 3 ran"
        );
    }
    assert!(!dir.join("overs").exists());
    let slots: std::collections::HashSet<String> = std::fs::read_to_string(dir.join("log"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(slots.len() > 1, "never more than one at a time: {slots:?}");
    let after = inspect(&server, "cli-sem");
    assert_eq!(after["available_permits"], 3, "permits not all returned");
    // With no permit held, Redisson's layout of a permit-expirable semaphore is the plain
    // semaphore's: one integer string (the total is available + held).
    assert_eq!(after["primitive"], "semaphore");
}

/// `--read` commands share; `--write` excludes them.
#[test]
fn readers_share_and_writers_exclude() {
    let server = server();
    let dir = scratch("rw");
    // Two readers that each wait until both are inside: only possible if they share.
    let both_inside = format!(
        "touch {d}/r$0; for i in $(seq 1 100); do [ -e {d}/r1 ] && [ -e {d}/r2 ] && exit 0; sleep 0.02; done; exit 1",
        d = dir.display()
    );
    let mut readers: Vec<_> = (1..=2)
        .map(|i| {
            keylatch(
                &server,
                &[
                    "run",
                    "--read",
                    "cli-rw",
                    "--",
                    "sh",
                    "-c",
                    &both_inside,
                    &i.to_string(),
                ],
            )
            .spawn()
            .unwrap()
        })
        .collect();
    for reader in &mut readers {
        assert!(
            reader.wait().unwrap().success(),
            "readers did not share the lock"
        );
    }
    // Writers and readers never overlap (mkdir detector shared by both kinds).
    let mut children = Vec::new();
    for i in 0..6 {
        let flag = if i % 3 == 0 { "--write" } else { "--read" };
        let script = if flag == "--write" {
            critical_section(&dir, "w", 40)
        } else {
            // A reader only checks that no writer is inside.
            format!(
                "[ -e {d}/inside ] && {{ echo overlap >> {d}/overlaps; exit 99; }}; sleep 0.04; [ -e {d}/inside ] && {{ echo overlap >> {d}/overlaps; exit 99; }}; exit 0",
                d = dir.display()
            )
        };
        children.push(
            keylatch(
                &server,
                &["run", flag, "cli-rw2", "--", "sh", "-c", &script],
            )
            .spawn()
            .unwrap(),
        );
    }
    for mut child in children {
        assert!(
            child.wait().unwrap().success(),
            "a reader saw a writer inside"
        );
    }
    assert!(!dir.join("overlaps").exists());
}

/// `inspect --json` reports read holders of the read-write lock.
#[test]
fn inspect_reports_read_holders() {
    let server = server();
    let mut reader = keylatch(
        &server,
        &["run", "--read", "cli-inspect-rw", "--", "sleep", "30"],
    )
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let report = inspect(&server, "cli-inspect-rw");
    reader.kill().unwrap();
    reader.wait().unwrap();
    assert_eq!(report["mode"], "read");
    let readers = report["readers"].as_array().unwrap();
    assert_eq!(readers.len(), 1);
    assert_eq!(readers[0]["count"], 1);
    let holds = readers[0]["holds"].as_array().unwrap();
    assert_eq!(holds.len(), 1);
    assert!(holds[0]["ttl_ms"].as_i64().unwrap() > 0);
}
