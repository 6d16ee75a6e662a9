//! `keylatch run` with `--redis` given 3 times: a RedLock over those servers. Concurrent runs
//! never overlap, also with one server dead; 2 URLs, or several for another subcommand, are
//! usage errors.
mod common;

use std::process::{Command, Stdio};

use common::{critical_section, scratch, server};

fn redlock_run(urls: &[String], name: &str, shell: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keylatch"));
    for url in urls {
        cmd.arg("--redis").arg(url);
    }
    cmd.args(["run", "--wait", "30s", name, "--", "sh", "-c", shell])
        .env_remove("REDIS_URL")
        .env_remove("KEYLATCH_REDIS_URL")
        .stdin(Stdio::null());
    cmd
}

#[test]
fn runs_under_a_redlock_never_overlap_even_with_a_server_dead() {
    let mut servers = [server(), server(), server()];
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    for round in ["all up", "one dead"] {
        if round == "one dead" {
            servers[0].kill();
        }
        let dir = scratch("redlock");
        let mut children = Vec::new();
        for i in 0..6 {
            let tag = format!("w{i}");
            children.push(
                redlock_run(&urls, "cli-redlock", &critical_section(&dir, &tag, 30))
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap(),
            );
        }
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{round}: a run failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let log = std::fs::read_to_string(dir.join("log")).unwrap();
        println!(
            "{round}: {} commands ran, one at a time",
            log.lines().count()
        );
        assert_eq!(log.lines().count(), 6);
        assert!(
            !dir.join("overlaps").exists(),
            "{round}: two commands overlapped"
        );
    }
    for server in &servers[1..] {
        assert_eq!(server.cli(&["EXISTS", "cli-redlock"]).unwrap(), "0");
    }
}

#[test]
fn two_servers_or_several_for_inspect_are_usage_errors() {
    let (a, b) = (server(), server());
    let out = redlock_run(&[a.url(), b.url()], "x", "true")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("3 or more"), "{stderr}");
    let out = Command::new(env!("CARGO_BIN_EXE_keylatch"))
        .args([
            "--redis",
            &a.url(),
            "--redis",
            &b.url(),
            "--redis",
            &a.url(),
        ])
        .args(["inspect", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let c = server();
    let out = Command::new(env!("CARGO_BIN_EXE_keylatch"))
        .args([
            "--redis",
            &a.url(),
            "--redis",
            &b.url(),
            "--redis",
            &c.url(),
        ])
        .args(["run", "--fair", "x", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("plain lock"), "{stderr}");
}
