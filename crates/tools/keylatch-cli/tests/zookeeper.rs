//! The CLI on a `zk://` URL: `run` excludes across processes (plain and fair locks) and exports
//! the node's zxid as the fencing token, `--read` and `--write` share and exclude as on Redis,
//! `inspect` lists the contenders with their owner ids, what ZooKeeper has no form of (a
//! latch) exits 64 writing nothing, and a run whose server pauses stops its command while the
//! server is still paused (exit 76).
mod common;

use std::process::Command;

use common::{bare, critical_section, json_output, scratch, wait_for_file};
use keylatch_testkit::{ZooKeeperServer, zookeeper_available};

fn zookeeper() -> ZooKeeperServer {
    assert!(
        zookeeper_available(),
        "ZooKeeper is not installed: run ./scripts/setup-zookeeper.sh"
    );
    ZooKeeperServer::start().expect("start ZooKeeper")
}

/// `keylatch --url URL ARGS`, with no connection settings from the test's environment.
fn keylatch(url: &str, args: &[&str]) -> Command {
    let mut cmd = bare(&["--url", url]);
    cmd.args(args);
    cmd
}

#[test]
fn run_with_a_semaphore_on_zookeeper_lets_its_permits_in_and_no_more() {
    let server = zookeeper();
    let url = format!("zk://{}", server.connect_string());
    let dir = scratch("zookeeper-semaphore");
    // Each command marks itself as holding, counts the holders, and notes when it saw more
    // than 2 (a violation) or exactly 2 (the permits used).
    let body = format!(
        "touch {d}/held.$$; n=$(ls {d} | grep -c '^held'); \
         [ \"$n\" -gt 2 ] && touch {d}/over; [ \"$n\" -eq 2 ] && touch {d}/two; \
         echo ran >> {d}/log; sleep 0.5; rm {d}/held.$$",
        d = dir.display()
    );
    let children: Vec<_> = (0..5)
        .map(|_| {
            keylatch(
                &url,
                &[
                    "run",
                    "cli-zk-sem",
                    "--semaphore",
                    "2",
                    "--",
                    "sh",
                    "-c",
                    &body,
                ],
            )
            .spawn()
            .unwrap()
        })
        .collect();
    for mut child in children {
        let status = child.wait().unwrap();
        assert!(status.success(), "a run failed: {status}");
    }
    let log = std::fs::read_to_string(dir.join("log")).unwrap();
    assert_eq!(log.lines().count(), 5, "every command ran once");
    assert!(!dir.join("over").exists(), "more than 2 holders at once");
    assert!(
        dir.join("two").exists(),
        "2 permits: two commands ran side by side"
    );
    let out = keylatch(&url, &["inspect", "cli-zk-sem", "--json"])
        .output()
        .unwrap();
    println!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn run_read_and_write_on_zookeeper_share_and_exclude() {
    let server = zookeeper();
    let url = format!("zk://{}", server.connect_string());
    let dir = scratch("zookeeper-rw");
    let marker = dir.join("reading");
    // A reader holds for 3 s.
    let mut reader = keylatch(
        &url,
        &[
            "run",
            "--read",
            "cli-zk-rw",
            "--",
            "sh",
            "-c",
            &format!("touch {}; sleep 3", marker.display()),
        ],
    )
    .spawn()
    .unwrap();
    wait_for_file(&marker);
    // A second reader shares the lock at once.
    let out = keylatch(
        &url,
        &["run", "--read", "--wait", "1s", "cli-zk-rw", "--", "true"],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "a second reader: {out:?}");
    // A writer is excluded while the reader holds: 75 once its wait passed.
    let out = keylatch(
        &url,
        &[
            "run",
            "--write",
            "--wait",
            "300ms",
            "cli-zk-rw",
            "--",
            "true",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(75),
        "a writer beside a reader: {out:?}"
    );
    assert!(reader.wait().unwrap().success());
    // Once the reader is gone the writer gets the lock, and a fencing token (a zxid).
    let out = keylatch(
        &url,
        &[
            "run",
            "--write",
            "--wait",
            "5s",
            "cli-zk-rw",
            "--",
            "sh",
            "-c",
            "echo $KEYLATCH_FENCING_TOKEN",
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "the writer: {out:?}");
    let token: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(token > 0);
}

#[test]
fn run_inspect_and_refusals_on_zookeeper() {
    let server = zookeeper();
    let url = format!("zk://{}", server.connect_string());

    // Exclusion: 4 processes on each of a plain and a fair lock.
    let dir = scratch("zookeeper");
    let mut children = Vec::new();
    for (name, fair) in [("cli-zk-plain", false), ("cli-zk-fair", true)] {
        let part = dir.join(name);
        std::fs::create_dir_all(&part).unwrap();
        for i in 0..4 {
            let body = critical_section(&part, &format!("{name}-{i}"), 40);
            let mut args = vec!["run", name];
            if fair {
                args.push("--fair");
            }
            args.extend(["--", "sh", "-c", &body]);
            children.push(keylatch(&url, &args).spawn().unwrap());
        }
    }
    for mut child in children {
        let status = child.wait().unwrap();
        assert!(status.success(), "a run failed: {status}");
    }
    for name in ["cli-zk-plain", "cli-zk-fair"] {
        let part = dir.join(name);
        let log = std::fs::read_to_string(part.join("log")).unwrap();
        assert_eq!(log.lines().count(), 4, "every command ran once");
        assert!(!part.join("overlaps").exists(), "two commands overlapped");
    }

    // The fencing token: the node's creation zxid, increasing run after run.
    let token = |name: &str| -> u64 {
        let out = keylatch(
            &url,
            &[
                "run",
                name,
                "--",
                "sh",
                "-c",
                "echo $KEYLATCH_FENCING_TOKEN",
            ],
        )
        .output()
        .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    let first = token("cli-zk-token");
    assert!(token("cli-zk-token") > first);

    // inspect while one process holds and another waits: the holder first, owner ids shown.
    let marker = dir.join("running");
    let mut holder = keylatch(
        &url,
        &[
            "run",
            "cli-zk-job",
            "--",
            "sh",
            "-c",
            &format!("touch {}; sleep 3", marker.display()),
        ],
    )
    .spawn()
    .unwrap();
    wait_for_file(&marker);
    let mut waiter = keylatch(&url, &["run", "cli-zk-job", "--", "true"])
        .spawn()
        .unwrap();
    let mut report = serde_json::Value::Null;
    for _ in 0..100 {
        let out = keylatch(&url, &["inspect", "cli-zk-job", "--json"])
            .output()
            .unwrap();
        report = json_output(&out);
        if report["nodes_total"] == 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    println!("{report}");
    assert_eq!(report["store"], "zookeeper", "{report}");
    assert_eq!(report["kind"], "mutex", "{report}");
    assert_eq!(report["path"], "/keylatch/cli-zk-job", "{report}");
    assert_eq!(
        report["nodes_total"], 2,
        "the holder and the waiter: {report}"
    );
    for node in report["nodes"].as_array().unwrap() {
        let owner = node["owner"].as_str().unwrap_or_default();
        assert!(
            owner.parse::<keylatch::OwnerId>().is_ok(),
            "an owner id: {report}"
        );
    }
    assert!(holder.wait().unwrap().success());
    assert!(waiter.wait().unwrap().success());
    let out = keylatch(&url, &["inspect", "cli-zk-job", "--json"])
        .output()
        .unwrap();
    assert_eq!(json_output(&out)["kind"], "free");

    // A latch has no ZooKeeper form: a usage error, and nothing is written.
    let out = keylatch(&url, &["latch", "set", "cli-zk-latch", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    let out = keylatch(&url, &["inspect", "cli-zk-latch", "--json"])
        .output()
        .unwrap();
    assert_eq!(json_output(&out)["kind"], "free");
}

/// Sends `signal` (`STOP`, `CONT`) to `pid`.
fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

#[test]
fn a_run_paused_past_its_session_stops_its_command_and_exits_76() {
    let server = zookeeper();
    let url = format!("zk://{}", server.connect_string());
    let dir = scratch("zookeeper-paused");
    let started = dir.join("started");
    let stopped = dir.join("stopped");
    // The command notes SIGTERM (sent when the lock is lost) and otherwise runs long.
    let body = format!(
        "trap 'touch {stopped}; exit 0' TERM; touch {started}; for i in $(seq 300); do sleep 0.1; done",
        stopped = stopped.display(),
        started = started.display(),
    );
    // --watchdog is the session timeout on ZooKeeper: a paused holder keeps the lock that long.
    let mut holder = keylatch(
        &url,
        &[
            "run",
            "cli-zk-paused",
            "--watchdog",
            "2s",
            "--",
            "sh",
            "-c",
            &body,
        ],
    )
    .spawn()
    .unwrap();
    wait_for_file(&started);
    signal(holder.id(), "STOP");
    // Another process gets the lock once the paused one's 2 s session has expired (within
    // 8 s: with ZooKeeper's default 10 s session it would not).
    let other = keylatch(
        &url,
        &["run", "cli-zk-paused", "--wait", "8s", "--", "true"],
    )
    .output()
    .unwrap();
    signal(holder.id(), "CONT");
    assert!(other.status.success(), "the other run: {other:?}");
    // Woken, the paused one learns its session is gone: its command is stopped, exit 76.
    let status = holder.wait().unwrap();
    assert_eq!(status.code(), Some(76), "{status}");
    assert!(stopped.exists(), "the command got SIGTERM");
}

#[test]
fn a_run_whose_server_pauses_stops_its_command_before_the_session_could_expire() {
    let server = zookeeper();
    let url = format!("zk://{}", server.connect_string());
    let dir = scratch("zookeeper-server-paused");
    let started = dir.join("started");
    let stopped = dir.join("stopped");
    let body = format!(
        "trap 'touch {stopped}; exit 0' TERM; touch {started}; for i in $(seq 600); do sleep 0.1; done",
        stopped = stopped.display(),
        started = started.display(),
    );
    // A 6 s session: the server cannot expire it, nor hand the lock on, sooner than 6 s
    // after its last contact with the holder, which is before the pause.
    let session = std::time::Duration::from_secs(6);
    let mut holder = KillOnDrop(
        keylatch(
            &url,
            &[
                "run",
                "cli-zk-server-paused",
                "--watchdog",
                "6s",
                "--",
                "sh",
                "-c",
                &body,
            ],
        )
        .spawn()
        .unwrap(),
    );
    wait_for_file(&started);
    let paused = std::time::Instant::now();
    server.pause().unwrap();
    // The command must be stopped while the server is paused: by then no other session can
    // have been granted the lock. Bounded by the session timeout from the pause.
    while !stopped.exists() && paused.elapsed() < session {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let stopped_after = paused.elapsed();
    server.resume().unwrap();
    eprintln!("zookeeper: the command was stopped {stopped_after:?} after the server paused");
    assert!(
        stopped.exists(),
        "the command was not stopped within the session timeout of the pause"
    );
    let status = holder.0.wait().unwrap();
    assert_eq!(status.code(), Some(76), "{status}");
    // Once the server runs again another process gets the lock.
    let other = keylatch(
        &url,
        &["run", "cli-zk-server-paused", "--wait", "30s", "--", "true"],
    )
    .output()
    .unwrap();
    assert!(other.status.success(), "the other run: {other:?}");
}

/// A child process killed (and reaped) when the test ends, also by a failed assertion.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_password_file_on_zookeeper_is_digest_credentials_or_refused_with_64() {
    let server = zookeeper();
    let dir = scratch("zookeeper-password");
    let file = dir.join("password");
    let password = "zk-Secret-pw";
    std::fs::write(&file, format!("{password}\n")).unwrap();
    let file = file.display().to_string();
    // Without a user name the password cannot be used: refused, never dropped.
    let url = format!("zk://{}/cli-pw", server.connect_string());
    let refused = keylatch(
        &url,
        &["--password-file", &file, "run", "cli-zk-pw", "--", "true"],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("user name"), "{stderr}");
    assert!(!stderr.contains(password), "{stderr}");
    // With a user (--user, or in the URL): digest credentials. Under acl=creator another
    // user is then refused (exit 77) while the same credentials lock.
    let creator = format!("zk://{}/cli-pw?acl=creator", server.connect_string());
    let dir_file = dir.join("ran");
    let ok = keylatch(
        &creator,
        &[
            "--user",
            "app",
            "--password-file",
            &file,
            "run",
            "cli-zk-pw",
            "--",
            "touch",
            &dir_file.display().to_string(),
        ],
    )
    .output()
    .unwrap();
    assert!(ok.status.success(), "{ok:?}");
    assert!(dir_file.exists());
    let other = keylatch(
        &format!("zk://other:Pw0ther@{}/cli-pw", server.connect_string()),
        &["run", "/keylatch/cli-zk-pw", "--", "true"],
    )
    .output()
    .unwrap();
    assert_eq!(other.status.code(), Some(77), "{other:?}");
    let same = keylatch(
        &format!("zk://app@{}/cli-pw", server.connect_string()),
        &["run", "cli-zk-pw", "--", "true"],
    )
    .env("KEYLATCH_REDIS_PASSWORD", password)
    .output()
    .unwrap();
    assert!(same.status.success(), "{same:?}");
}
