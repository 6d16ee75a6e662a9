//! `keylatch --url postgres://… run` against a real PostgreSQL server: exclusion across
//! processes with fencing tokens, a terminated holding session stops the command (exit 76), a
//! killed holder process frees the lock at once.
mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{critical_section, scratch, wait_for_file};
use keylatch_testkit::PostgresServer;

fn pg() -> PostgresServer {
    PostgresServer::start().expect("start PostgreSQL (run ./scripts/setup.sh)")
}

/// `keylatch --url <server> ARGS`.
fn keylatch(server: &PostgresServer, args: &[&str]) -> Command {
    let mut cmd = common::bare(&["--url", &server.url()]);
    cmd.args(args);
    cmd
}

/// A child killed (and reaped) when dropped: a failing test leaves no process behind.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits at most `limit` for the child's exit code.
fn exit_within(child: &mut Running, limit: Duration) -> Option<i32> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Some(status) = child.0.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn runs_exclude_each_other_and_export_increasing_tokens() {
    let server = pg();
    let dir = scratch("pg-exclusion");
    let tokens = dir.join("tokens");
    let mut children = Vec::new();
    for tag in ["a", "b"].iter().cycle().take(12) {
        let script = format!(
            "{} && echo $KEYLATCH_FENCING_TOKEN >> {}",
            critical_section(&dir, tag, 30),
            tokens.display()
        );
        children.push(Running(
            keylatch(&server, &["run", "pg-exclusion", "--", "sh", "-c", &script])
                .spawn()
                .unwrap(),
        ));
    }
    for mut child in children {
        assert_eq!(exit_within(&mut child, Duration::from_secs(60)), Some(0));
    }
    assert!(!dir.join("overlaps").exists(), "two commands overlapped");
    let log = std::fs::read_to_string(dir.join("log")).unwrap();
    assert_eq!(log.lines().count(), 12, "every command ran once");
    let tokens: Vec<u64> = std::fs::read_to_string(&tokens)
        .unwrap()
        .lines()
        .map(|l| l.parse().expect("a token"))
        .collect();
    // Appended in lock order: strictly increasing.
    assert_eq!(tokens, (1..=12).collect::<Vec<_>>());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_terminated_holding_session_stops_the_command_with_76() {
    let server = pg();
    let dir = scratch("pg-terminated");
    let started = dir.join("started");
    let mut run = Running(
        keylatch(
            &server,
            &[
                "run",
                "pg-terminated",
                "--",
                "sh",
                "-c",
                &format!("touch {}; sleep 30", started.display()),
            ],
        )
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    wait_for_file(&started);
    let ended = server
        .psql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' \
             AND granted AND ((classid::int8 << 32) | objid::int8) = hashtextextended('pg-terminated', 0)",
        )
        .unwrap();
    assert_eq!(ended, "1");
    let terminated = Instant::now();
    let code = exit_within(&mut run, Duration::from_secs(15));
    println!(
        "run exited {:?} after the session was terminated",
        terminated.elapsed()
    );
    assert_eq!(code, Some(76), "exit code after the hold was lost");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_killed_holder_process_frees_the_lock_at_once() {
    let server = pg();
    let dir = scratch("pg-killed");
    let started = dir.join("started");
    let mut holder = Running(
        keylatch(
            &server,
            &[
                "run",
                "pg-killed",
                "--",
                "sh",
                "-c",
                &format!("touch {}; sleep 30", started.display()),
            ],
        )
        .spawn()
        .unwrap(),
    );
    wait_for_file(&started);
    let mut waiter = Running(
        keylatch(
            &server,
            &["run", "--wait", "20s", "pg-killed", "--", "true"],
        )
        .spawn()
        .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    holder.0.kill().unwrap(); // SIGKILL: no release is sent
    let killed = Instant::now();
    let _ = holder.0.wait();
    assert_eq!(exit_within(&mut waiter, Duration::from_secs(20)), Some(0));
    println!(
        "the waiter ran {:?} after the holder was killed",
        killed.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--read` runs share the lock: each waits (10 s at most) to see the other inside.
#[test]
fn read_runs_share_the_lock() {
    let server = pg();
    let dir = scratch("pg-readers");
    let script = |me: &str, other: &str| {
        format!(
            "touch {me}; i=0; while [ ! -e {other} ]; do i=$((i+1)); [ $i -gt 200 ] && exit 9; \
             sleep 0.05; done",
            me = dir.join(me).display(),
            other = dir.join(other).display()
        )
    };
    let mut children: Vec<Running> = [("a", "b"), ("b", "a")]
        .iter()
        .map(|(me, other)| {
            Running(
                keylatch(
                    &server,
                    &[
                        "run",
                        "--read",
                        "pg-readers",
                        "--",
                        "sh",
                        "-c",
                        &script(me, other),
                    ],
                )
                .spawn()
                .unwrap(),
            )
        })
        .collect();
    for child in &mut children {
        assert_eq!(exit_within(child, Duration::from_secs(30)), Some(0));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The facade's `Client` does not run on PostgreSQL yet: a command that needs it (`inspect`)
/// exits 64 (`Error::Unsupported`) and says so, without the password of the URL.
#[test]
fn commands_on_the_facade_refuse_postgres_urls() {
    let server = pg();
    let url = format!(
        "postgres://postgres:S3cretPw@127.0.0.1:{}/postgres",
        server.port()
    );
    let out = common::bare(&["--url", &url, "inspect", "pg-inspect"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("postgres"), "{stderr}");
    assert!(!stderr.contains("S3cretPw"), "{stderr}");
}
