//! The binary: a run removes everything it created on every exit path (the end of the run,
//! SIGINT, a panic), exit statuses, `check` on a history file. The tests that create network
//! namespaces need root, iproute2 and nftables and are ignored by default:
//! `scripts/chaos.sh --ci` runs them (`cargo test -p keylatch-chaos -- --include-ignored`).

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const BIN: &str = env!("CARGO_BIN_EXE_keylatch-chaos");

/// The run's output lines, as they come.
fn start(args: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start keylatch-chaos");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Waits for a line containing `needle`, at most `within`; returns it.
fn wait_for(rx: &mpsc::Receiver<String>, needle: &str, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return line,
            Ok(_) => {}
            Err(e) => panic!("no line with {needle:?} within {within:?}: {e}"),
        }
    }
}

/// `klc-<id>` from the line `network: namespaces klc-<id>-*, …`.
fn prefix_of(line: &str) -> String {
    let start = line.find("klc-").expect("a prefix");
    let rest = &line[start..];
    rest[..rest.find("-*").expect("a prefix")].to_owned()
}

fn namespaces(prefix: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("{prefix}-")))
        .map(str::to_owned)
        .collect()
}

/// The processes whose command line mentions `needle`.
fn processes(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) {
                found.push(cmd);
            }
        }
    }
    found
}

/// Waits for `child` at most `within`; kills it and fails past that.
fn exit_code(child: &mut Child, within: Duration) -> i32 {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("keylatch-chaos did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_nothing_left(prefix: &str) {
    // Namespaces are deleted before the harness exits; give exiting processes a moment.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(namespaces(prefix), Vec::<String>::new(), "namespaces left");
    let id = prefix.trim_start_matches("klc-");
    let dir = std::env::temp_dir().join(format!("keylatch-chaos-{id}"));
    assert!(!dir.exists(), "{} left", dir.display());
    assert_eq!(
        processes(&dir.to_string_lossy()),
        Vec::<String>::new(),
        "servers left"
    );
    let workers = processes(&format!("--run={prefix} "));
    assert!(workers.is_empty(), "workers left: {workers:?}");
}

#[test]
#[ignore = "needs root, iproute2 and nftables; scripts/chaos.sh --ci runs it"]
fn sigint_midway_removes_everything() {
    let (mut child, rx) = start(&["--seed", "11", "--minutes", "1", "--topology", "single"]);
    let prefix = prefix_of(&wait_for(
        &rx,
        "network: namespaces",
        Duration::from_secs(60),
    ));
    wait_for(&rx, "workers started", Duration::from_secs(60));
    assert!(!namespaces(&prefix).is_empty());
    // Into the nemesis's first fault.
    wait_for(&rx, "nemesis:", Duration::from_secs(30));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).expect("SIGINT");
    assert_eq!(exit_code(&mut child, Duration::from_secs(30)), 2);
    assert_nothing_left(&prefix);
}

#[test]
#[ignore = "needs root, iproute2 and nftables; scripts/chaos.sh --ci runs it"]
fn sigint_during_a_clock_jump_on_sentinel_removes_everything() {
    // Sentinels, replicas and the clock shift's files: all of it goes.
    let (mut child, rx) = start(&[
        "--seed",
        "12",
        "--minutes",
        "1",
        "--topology",
        "sentinel",
        "--nemesis",
        "clock-jump",
        "--workers",
        "2",
    ]);
    let prefix = prefix_of(&wait_for(
        &rx,
        "network: namespaces",
        Duration::from_secs(60),
    ));
    wait_for(&rx, "workers started", Duration::from_secs(60));
    assert!(namespaces(&prefix).len() >= 9, "{:?}", namespaces(&prefix));
    wait_for(&rx, "nemesis: clock-jump", Duration::from_secs(30));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).expect("SIGINT");
    assert_eq!(exit_code(&mut child, Duration::from_secs(30)), 2);
    assert_nothing_left(&prefix);
}

#[test]
#[ignore = "needs root, iproute2 and nftables; scripts/chaos.sh --ci runs it"]
fn a_panic_midway_removes_everything() {
    let (mut child, rx) = start(&[
        "--seed",
        "12",
        "--minutes",
        "1",
        "--topology",
        "single-aof",
        "--panic-after",
        "3",
    ]);
    let prefix = prefix_of(&wait_for(
        &rx,
        "network: namespaces",
        Duration::from_secs(60),
    ));
    assert_eq!(exit_code(&mut child, Duration::from_secs(90)), 2);
    assert_nothing_left(&prefix);
}

#[test]
#[ignore = "needs root, iproute2 and nftables; scripts/chaos.sh --ci runs it"]
fn a_run_without_faults_finds_nothing_and_removes_everything() {
    let out = std::env::temp_dir().join(format!("klc-test-summary-{}.json", std::process::id()));
    let (mut child, rx) = start(&[
        "--seed",
        "13",
        "--minutes",
        "0.2",
        "--nemesis",
        "none",
        "--workers",
        "3",
        "--out",
        &out.to_string_lossy(),
    ]);
    let prefix = prefix_of(&wait_for(
        &rx,
        "network: namespaces",
        Duration::from_secs(60),
    ));
    let last = wait_for(&rx, "violations in", Duration::from_secs(90));
    assert_eq!(exit_code(&mut child, Duration::from_secs(30)), 0, "{last}");
    assert!(last.starts_with("0 violations in "), "{last}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("the summary")).expect("json");
    let _ = std::fs::remove_file(&out);
    assert_eq!(summary["violations"], 0);
    assert!(
        summary["acquisitions"].as_u64().unwrap_or(0) > 0,
        "{summary}"
    );
    assert_eq!(summary["writes_accepted"], summary["register_log_entries"]);
    assert_nothing_left(&prefix);
}

#[test]
#[ignore = "needs root, iproute2 and nftables; scripts/chaos.sh --ci runs it"]
fn a_cluster_with_acknowledgement_keeps_readers_and_writers_apart_across_failovers() {
    let history =
        std::env::temp_dir().join(format!("klc-test-history-{}.jsonl", std::process::id()));
    let (mut child, rx) = start(&[
        "--seed",
        "2",
        "--minutes",
        "0.3",
        "--topology",
        "cluster-ack",
        "--workload",
        "rwlock",
        "--nemesis",
        "failover",
        "--workers",
        "3",
        "--history",
        &history.to_string_lossy(),
    ]);
    let prefix = prefix_of(&wait_for(
        &rx,
        "network: namespaces",
        Duration::from_secs(60),
    ));
    let last = wait_for(&rx, "violations in", Duration::from_secs(120));
    assert_eq!(exit_code(&mut child, Duration::from_secs(30)), 0, "{last}");
    let text = std::fs::read_to_string(&history).expect("the history");
    let _ = std::fs::remove_file(&history);
    assert!(text.contains("CLUSTER FAILOVER on "), "no failover ran");
    assert!(text.contains(r#""mode":"read""#) && text.contains(r#""mode":"write""#));
    assert_nothing_left(&prefix);
}

#[test]
#[ignore = "needs root, iproute2, nftables and ZooKeeper; scripts/chaos.sh --ci runs it"]
fn a_zookeeper_ensemble_keeps_the_lock_across_kills_of_its_leader() {
    let history = std::env::temp_dir().join(format!("klc-zk3-{}.jsonl", std::process::id()));
    let (mut child, rx) = start(&[
        "--seed",
        "1",
        "--minutes",
        "0.4",
        "--topology",
        "zk3",
        "--nemesis",
        "kill",
        "--workers",
        "3",
        "--history",
        &history.to_string_lossy(),
    ]);
    let prefix = prefix_of(&wait_for(
        &rx,
        "network: namespaces",
        Duration::from_secs(60),
    ));
    wait_for(&rx, "zk://", Duration::from_secs(120));
    let last = wait_for(&rx, "violations in", Duration::from_secs(120));
    assert_eq!(exit_code(&mut child, Duration::from_secs(30)), 0, "{last}");
    let text = std::fs::read_to_string(&history).expect("the history");
    let _ = std::fs::remove_file(&history);
    // Seed 1 aims a kill at the leader, which the harness found by asking `srvr`.
    assert!(
        text.contains("the leader is s"),
        "no kill aimed at the leader"
    );
    assert!(text.contains(r#""type":"ok","f":"acquire""#));
    assert_nothing_left(&prefix);
}

#[test]
fn zk3_refuses_the_lease_mode_and_the_redlock_workload() {
    for (args, says) in [
        (["--mode", "lease"], "zk3 has no fixed lease"),
        (
            ["--workload", "redlock"],
            "the redlock workload runs on the redlock5 topology",
        ),
    ] {
        let workload = args[1];
        let out = Command::new(BIN)
            .args(["--seed", "1", "--minutes", "0.01", "--topology", "zk3"])
            .args(args)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{workload}: {stderr}");
        assert!(stderr.contains(says), "{workload}: {stderr}");
    }
}

#[test]
fn bad_arguments_exit_with_2() {
    for args in [
        &["--seed", "1", "--minutes", "0"][..],
        &["--seed", "1", "--nemesis", "clock"],
        // Failovers are for the cluster topologies.
        &["--seed", "1", "--nemesis", "failover"],
        // No fixed lease and no RedLock on ZooKeeper.
        &["--seed", "1", "--topology", "zk3", "--mode", "lease"],
        &["--seed", "1", "--topology", "zk3", "--workload", "redlock"],
        &["--seed", "x"],
        &["--minutes", "1"],
    ] {
        let out = Command::new(BIN).args(args).output().expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn check_reads_a_history_file_and_exits_1_on_an_overlap() {
    let path = std::env::temp_dir().join(format!("klc-test-history-{}.jsonl", std::process::id()));
    let line = |p: &str, ms: u64, kind: &str, f: &str, extra: &str| {
        format!(
            r#"{{"process":"{p}","time":{},"type":"{kind}","f":"{f}"{extra}}}"#,
            ms * 1_000_000
        )
    };
    let mut lines = vec![
        line("c1", 0, "invoke", "acquire", r#","lease_ms":1000"#),
        line("c1", 2, "ok", "acquire", r#","token":1"#),
        line("c2", 1, "invoke", "acquire", r#","lease_ms":1000"#),
        line("c2", 12, "ok", "acquire", r#","token":2"#),
        line("c1", 10, "invoke", "release", ""),
        line("c1", 11, "ok", "release", ""),
        line("c2", 20, "invoke", "release", ""),
        line("c2", 21, "ok", "release", ""),
    ];
    let run = |lines: &[String]| {
        std::fs::write(&path, lines.join("\n") + "\n").expect("write the history");
        Command::new(BIN)
            .arg("check")
            .arg(&path)
            .output()
            .expect("run")
    };
    let out = run(&lines);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).ends_with("0 violations in 4 operations\n"));
    // c1 releases after c2 got in.
    lines[4] = line("c1", 15, "invoke", "release", "");
    lines[5] = line("c1", 16, "ok", "release", "");
    let out = run(&lines);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("mutual-exclusion: 1"), "{stdout}");
    // The linearizability search agrees.
    assert!(stdout.contains("1 not linearizable"), "{stdout}");
    assert!(
        stdout.ends_with("2 violations in 4 operations\n"),
        "{stdout}"
    );
    // Not a history.
    std::fs::write(&path, "{\n").expect("write");
    let out = Command::new(BIN)
        .arg("check")
        .arg(&path)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_file(&path);
}

#[test]
#[ignore = "needs root, iproute2 and nftables; scripts/chaos.sh --ci runs it"]
fn a_sigkilled_harness_leaves_no_process_and_cleanup_removes_its_namespaces() {
    let (mut child, rx) = start(&["--seed", "14", "--minutes", "1", "--topology", "single"]);
    let prefix = prefix_of(&wait_for(
        &rx,
        "network: namespaces",
        Duration::from_secs(60),
    ));
    wait_for(&rx, "workers started", Duration::from_secs(60));
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    // The servers and workers die with the harness (their parent-death signal).
    let deadline = Instant::now() + Duration::from_secs(10);
    let left = loop {
        let left: Vec<String> = namespaces(&prefix)
            .iter()
            .flat_map(|ns| {
                let out = Command::new("ip").args(["netns", "pids", ns]).output();
                out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default()
                    .lines()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        if left.is_empty() || Instant::now() > deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        left,
        Vec::<String>::new(),
        "processes left in the namespaces"
    );
    // The namespaces stay until `cleanup` removes them.
    assert!(!namespaces(&prefix).is_empty());
    let out = Command::new(BIN)
        .args(["cleanup", "--run", &prefix])
        .output()
        .expect("cleanup");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("removed namespace {prefix}-net")),
        "{text}"
    );
    assert_nothing_left(&prefix);
    // A bad id is refused.
    let out = Command::new(BIN)
        .args(["cleanup", "--run", "klc-zz"])
        .output()
        .expect("cleanup");
    assert_eq!(out.status.code(), Some(2));
}
