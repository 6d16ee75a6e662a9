//! `keylatch run`: exclusion across processes, exit codes, a killed holder.
mod common;

use std::time::{Duration, Instant};

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;

use common::{bare, critical_section, keylatch, output, scratch, server, wait_for_file};

#[test]
fn two_runs_never_overlap_and_both_finish() {
    let server = server();
    let dir = scratch("exclusion");
    let rounds = 8;
    let spawn = |tag: &'static str| {
        let dir = dir.clone();
        let url_server = &server;
        let mut children = Vec::new();
        for _ in 0..rounds {
            children.push(
                keylatch(
                    url_server,
                    &[
                        "run",
                        "cli-exclusion",
                        "--",
                        "sh",
                        "-c",
                        &critical_section(&dir, tag, 30),
                    ],
                )
                .spawn()
                .unwrap(),
            );
        }
        children
    };
    let mut children = spawn("a");
    children.extend(spawn("b"));
    for mut child in children {
        let status = child.wait().unwrap();
        assert!(status.success(), "a run failed: {status}");
    }
    let log = std::fs::read_to_string(dir.join("log")).unwrap();
    assert_eq!(log.lines().count(), 2 * rounds, "every command ran once");
    assert!(!dir.join("overlaps").exists(), "two commands overlapped");
}

#[test]
fn exit_codes_follow_the_contract() {
    let server = server();
    // The command's own code.
    let out = output(&server, &["run", "cli-codes", "--", "sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3));
    // 64 on bad arguments.
    for args in [
        vec!["run", "--bogus", "cli-codes", "--", "true"],
        vec!["run", "cli-codes"],
        vec!["run", "--lease", "soon", "cli-codes", "--", "true"],
        vec![
            "run",
            "--lease",
            "1s",
            "--watchdog",
            "1s",
            "cli-codes",
            "--",
            "true",
        ],
        vec!["run", "", "--", "true"],
    ] {
        let out = output(&server, &args);
        assert_eq!(
            out.status.code(),
            Some(64),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // 75 when --wait passes: hold it from another run.
    let mut holder = keylatch(&server, &["run", "cli-codes", "--", "sleep", "3"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let out = output(
        &server,
        &["run", "--wait", "200ms", "cli-codes", "--", "true"],
    );
    assert_eq!(
        out.status.code(),
        Some(75),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("could not acquire"));
    holder.kill().unwrap();
    holder.wait().unwrap();
    // 69 when Redis cannot be reached.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_keylatch"))
        .args(["--redis", "redis://127.0.0.1:1", "run", "x", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69));
    assert!(String::from_utf8_lossy(&out.stderr).contains("redis://127.0.0.1:1"));
}

#[test]
fn lost_lock_terminates_the_command_with_76() {
    let server = server();
    let dir = scratch("lost");
    let marker = dir.join("finished");
    let script = format!("sleep 10; touch {}", marker.display());
    let started = Instant::now();
    let child = keylatch(
        &server,
        &[
            "run",
            "--watchdog",
            "900ms",
            "cli-lost",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(
        server.cli(&["DEL", "cli-lost"]).unwrap(),
        "1",
        "the lock was held"
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(76));
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "the command was not stopped"
    );
    assert!(!marker.exists(), "the command ran to the end");
}

#[test]
fn killed_holder_frees_the_lock_within_its_watchdog_timeout() {
    let server = server();
    let mut holder = keylatch(
        &server,
        &["run", "--watchdog", "1s", "cli-killed", "--", "sleep", "30"],
    )
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        server.cli(&["EXISTS", "cli-killed"]).unwrap(),
        "1",
        "held and renewed"
    );
    holder.kill().unwrap(); // SIGKILL: no release
    holder.wait().unwrap();
    let killed = Instant::now();
    let out = output(
        &server,
        &["run", "--wait", "2s", "cli-killed", "--", "true"],
    );
    println!(
        "acquired {:?} after the holder was killed",
        killed.elapsed()
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "not acquired within 2 s: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sigterm_is_forwarded_and_the_lock_released() {
    let server = server();
    let mut child = keylatch(&server, &["run", "cli-signal", "--", "sleep", "30"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(server.cli(&["EXISTS", "cli-signal"]).unwrap(), "1");
    nix_kill(child.id(), "TERM");
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(128 + 15),
        "the command ended by SIGTERM"
    );
    assert_eq!(
        server.cli(&["EXISTS", "cli-signal"]).unwrap(),
        "0",
        "the lock was released"
    );
}

fn nix_kill(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn the_command_gets_the_lock_name_and_an_increasing_fencing_token() {
    let server = server();
    let mut tokens = Vec::new();
    for primitive in [&[][..], &["--fair"][..], &["--write"][..]] {
        let mut args = vec!["run"];
        args.extend_from_slice(primitive);
        args.extend_from_slice(&[
            "cli-fenced",
            "--",
            "sh",
            "-c",
            "echo \"$KEYLATCH_LOCK_NAME ${KEYLATCH_FENCING_TOKEN:-none}\"",
        ]);
        let out = output(&server, &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = String::from_utf8(out.stdout).unwrap();
        let (name, token) = line.trim().split_once(' ').unwrap();
        assert_eq!(name, "cli-fenced");
        tokens.push(token.parse::<u64>().expect("a fencing token"));
    }
    println!("fencing tokens of three runs: {tokens:?}");
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    // A read hold and a semaphore permit have no token.
    let out = output(
        &server,
        &[
            "run",
            "--read",
            "cli-fenced",
            "--",
            "sh",
            "-c",
            "echo ${KEYLATCH_FENCING_TOKEN:-none}",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "none");
}

#[test]
fn durations_and_counts_too_large_are_usage_errors() {
    let server = server();
    for args in [
        vec![
            "run",
            "--wait",
            "99999999999999999999s",
            "cli-big",
            "--",
            "true",
        ],
        vec!["run", "--lease", "999999999d", "cli-big", "--", "true"],
        vec!["run", "--watchdog", "999999999d", "cli-big", "--", "true"],
        vec![
            "run",
            "--grace",
            "99999999999999999999999d",
            "cli-big",
            "--",
            "true",
        ],
        vec!["run", "--semaphore", "4294967296", "cli-big", "--", "true"],
        vec!["run", "--semaphore", "0", "cli-big", "--", "true"],
    ] {
        let out = output(&server, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // The longest wait is accepted: it means "as long as it takes".
    let out = output(
        &server,
        &["run", "--wait", "500000000y", "cli-big", "--", "true"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_lock_lost_while_the_server_is_paused_ends_the_run_at_once() {
    let server = server();
    let child = keylatch(
        &server,
        &[
            "run",
            "--watchdog",
            "600ms",
            "cli-paused",
            "--",
            "sleep",
            "30",
        ],
    )
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(server.cli(&["EXISTS", "cli-paused"]).unwrap(), "1");
    let paused = Instant::now();
    server.cli(&["CLIENT", "PAUSE", "8000", "ALL"]).unwrap();
    let out = child.wait_with_output().unwrap();
    let after = paused.elapsed();
    println!(
        "lost under a paused server: exit {:?} after {after:?}",
        out.status.code()
    );
    assert_eq!(
        out.status.code(),
        Some(76),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // It did not wait for the server: the pause was still in force.
    assert!(
        after < Duration::from_secs(8),
        "waited for the paused server"
    );
}

#[test]
fn a_restart_without_persistence_stops_the_command_at_once() {
    let mut server = server();
    // A 60 s watchdog: renewed every 20 s. Only the check made when the connection comes back
    // can see the loss well before that.
    let child = keylatch(
        &server,
        &[
            "run",
            "--watchdog",
            "60s",
            "cli-restart",
            "--",
            "sleep",
            "60",
        ],
    )
    .spawn()
    .unwrap();
    wait_for_key(&server, "cli-restart");
    server.restart().unwrap();
    let answering = Instant::now();
    let out = child.wait_with_output().unwrap();
    let after = answering.elapsed();
    println!(
        "restart without persistence: run exited {:?} {after:?} after the server answered",
        out.status.code()
    );
    assert_eq!(
        out.status.code(),
        Some(76),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Not at the next renewal (about 19 s later): the hold was checked on reconnect.
    assert!(
        after < Duration::from_secs(8),
        "the loss waited for the next renewal ({after:?})"
    );
}

#[test]
fn replica_acknowledgement_without_replicas_exits_69_and_leaves_nothing() {
    let server = server();
    let out = output(
        &server,
        &[
            "--replicas",
            "1",
            "--replicas-timeout",
            "200ms",
            "run",
            "acked-job",
            "--",
            "true",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("exit {:?}: {}", out.status.code(), stderr.trim());
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    assert!(stderr.contains("0 of 1 replica"), "{stderr}");
    assert_eq!(server.cli(&["EXISTS", "acked-job"]).unwrap(), "0");
    // KEYLATCH_REPLICAS reaches the library too; a bad value is a usage error.
    let out = keylatch(&server, &["run", "acked-job", "--", "true"])
        .env("KEYLATCH_REPLICAS", "many")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("KEYLATCH_REPLICAS"), "{stderr}");
}

#[test]
fn a_semaphore_run_sets_the_semaphore_up_again_after_a_restart() {
    let mut server = server();
    let dir = scratch("sem-restart");
    let ran = dir.join("waiter-ran");
    // One permit, taken by a holder; a second run waits for it.
    let holder = keylatch(
        &server,
        &[
            "run",
            "--semaphore",
            "1",
            "cli-sem-restart",
            "--",
            "sleep",
            "30",
        ],
    )
    .spawn()
    .unwrap();
    let started = Instant::now();
    while server.cli(&["EXISTS", "cli-sem-restart"]).unwrap() != "1" {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "never acquired"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let waiter = keylatch(
        &server,
        &[
            "run",
            "--semaphore",
            "1",
            "--wait",
            "20s",
            "cli-sem-restart",
            "--",
            "touch",
            &ran.to_string_lossy(),
        ],
    )
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(!ran.exists(), "the waiter ran while the permit was held");
    // A restart without persistence loses the semaphore's keys: the waiter's next attempt sets
    // the semaphore up again (1 permit) instead of waiting for permits that no longer exist.
    server.restart().unwrap();
    let answering = Instant::now();
    let holder = holder.wait_with_output().unwrap();
    let waiter = waiter.wait_with_output().unwrap();
    println!(
        "after the restart: holder exited {:?}, waiter exited {:?} {:?} after the server answered",
        holder.status.code(),
        waiter.status.code(),
        answering.elapsed()
    );
    assert_eq!(
        holder.status.code(),
        Some(76),
        "the holder's permit was lost"
    );
    assert!(
        waiter.status.success(),
        "{}",
        String::from_utf8_lossy(&waiter.stderr)
    );
    assert!(ran.exists(), "the waiter's command ran");
    // The permit is back: one available, none held.
    assert_eq!(server.cli(&["GET", "cli-sem-restart"]).unwrap(), "1");
    assert_eq!(
        server.cli(&["ZCARD", "{cli-sem-restart}:timeout"]).unwrap(),
        "0"
    );
}

/// Waits (20 s at most) until `key` exists on `server`.
fn wait_for_key(server: &common::RedisServer, key: &str) {
    let started = Instant::now();
    while server.cli(&["EXISTS", key]).unwrap() != "1" {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{key} never held"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `child` at most `bound`; kills it (and reports) if it is still running then,
/// with the command it ran, whose pid is in `command_pid` (if that file exists), so that no
/// process is left behind.
fn wait_within(
    child: &mut Child,
    bound: Duration,
    what: &str,
    command_pid: Option<&std::path::Path>,
) -> ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            if let Some(pid) = command_pid.and_then(|p| std::fs::read_to_string(p).ok()) {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", pid.trim()])
                    .status();
            }
            panic!("{what}: keylatch still ran after {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The lines of `child`'s stderr, as they come (read on a thread); `child` must have been
/// spawned with `stderr(Stdio::piped())`.
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stderr = child.stderr.take().expect("stderr piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits (20 s at most) for a line of `lines` that contains `text`; returns every line seen.
fn wait_for_line(lines: &mpsc::Receiver<String>, text: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                let found = line.contains(text);
                seen.push(line);
                if found {
                    return seen;
                }
            }
            Err(_) => panic!("no line with {text:?} on stderr: {seen:?}"),
        }
    }
}

/// Whether a process with this pid exists (and is not a zombie of ours).
fn alive(pid: &str) -> bool {
    std::process::Command::new("kill")
        .args(["-0", pid])
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

#[test]
fn on_lost_ignore_lets_the_command_finish_with_its_own_code() {
    let server = server();
    let dir = scratch("ignore");
    let (started, go, finished) = (dir.join("started"), dir.join("go"), dir.join("finished"));
    // The command runs until the test says so, after keylatch has reported the loss.
    let script = format!(
        "touch {started}; while [ ! -e {go} ]; do sleep 0.05; done; touch {finished}; exit 7",
        started = started.display(),
        go = go.display(),
        finished = finished.display(),
    );
    let mut child = keylatch(
        &server,
        &[
            "run",
            "--watchdog",
            "900ms",
            "--on-lost",
            "ignore",
            "cli-ignore",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let lines = stderr_lines(&mut child);
    wait_for_file(&started);
    assert_eq!(server.cli(&["DEL", "cli-ignore"]).unwrap(), "1", "held");
    let seen = wait_for_line(&lines, "lost the lock");
    println!("stderr: {seen:?}");
    assert!(
        seen.last()
            .is_some_and(|l| l.ends_with(": the server no longer has it")),
        "the message names why: {seen:?}"
    );
    // The loss is known; the command still runs and ends when it will.
    std::fs::write(&go, "").unwrap();
    let status = wait_within(
        &mut child,
        Duration::from_secs(20),
        "--on-lost ignore",
        None,
    );
    assert_eq!(status.code(), Some(7), "the command's own code");
    assert!(finished.exists(), "the command ran to its end");
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_after_the_grace() {
    let server = server();
    let dir = scratch("grace");
    let (pid_file, terms) = (dir.join("pid"), dir.join("terms"));
    // SIGTERM is noted and survived; only SIGKILL ends it.
    let script = format!(
        "trap 'echo term >> {terms}' TERM; echo $$ > {pid}.tmp; mv {pid}.tmp {pid}; \
         while :; do sleep 0.05; done",
        terms = terms.display(),
        pid = pid_file.display(),
    );
    let mut child = keylatch(
        &server,
        &[
            "run",
            "--watchdog",
            "900ms",
            "--grace",
            "1s",
            "cli-grace",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .spawn()
    .unwrap();
    wait_for_file(&pid_file);
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_owned();
    assert_eq!(server.cli(&["DEL", "cli-grace"]).unwrap(), "1", "held");
    let lost = Instant::now();
    let ended = (|| {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            if let Some(status) = child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    })();
    let still_alive = alive(&pid);
    if still_alive {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status();
    }
    let Some(status) = ended else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("keylatch did not end a command that ignores SIGTERM within 30 s");
    };
    println!(
        "exit {:?} {:?} after the loss",
        status.code(),
        lost.elapsed()
    );
    assert_eq!(status.code(), Some(76));
    assert!(!still_alive, "the command outlived keylatch");
    let terms = std::fs::read_to_string(&terms).unwrap_or_default();
    assert!(terms.contains("term"), "the command never got SIGTERM");
    // It was killed after the grace, not before: the grace is a lower bound.
    assert!(
        lost.elapsed() >= Duration::from_secs(1),
        "killed before the grace"
    );
}

#[test]
fn sigint_is_forwarded_to_the_command() {
    let server = server();
    let dir = scratch("sigint");
    let (pid_file, got) = (dir.join("pid"), dir.join("got-int"));
    let script = format!(
        "trap 'touch {got}; exit 42' INT; echo $$ > {pid}.tmp; mv {pid}.tmp {pid}; \
         while :; do sleep 0.05; done",
        got = got.display(),
        pid = pid_file.display(),
    );
    let mut child = keylatch(&server, &["run", "cli-sigint", "--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    wait_for_file(&pid_file);
    assert_eq!(server.cli(&["EXISTS", "cli-sigint"]).unwrap(), "1");
    nix_kill(child.id(), "INT");
    let status = wait_within(
        &mut child,
        Duration::from_secs(20),
        "SIGINT",
        Some(&pid_file),
    );
    assert!(got.exists(), "the command never got SIGINT");
    assert_eq!(status.code(), Some(42), "the command's own code");
    assert_eq!(
        server.cli(&["EXISTS", "cli-sigint"]).unwrap(),
        "0",
        "the lock was released"
    );
}

#[test]
fn an_interrupt_while_waiting_leaves_nothing_behind() {
    let server = server();
    let dir = scratch("interrupt-wait");
    let started = dir.join("started");
    let name = "cli-int-wait";
    let holder_script = format!("touch {}; sleep 30", started.display());
    let mut holder = keylatch(
        &server,
        &["run", "--fair", name, "--", "sh", "-c", &holder_script],
    )
    .spawn()
    .unwrap();
    wait_for_file(&started);
    let queue = format!("redisson_lock_queue:{{{name}}}");
    for (signal, code) in [("INT", 130), ("TERM", 143)] {
        let mut waiter = keylatch(&server, &["run", "--fair", name, "--", "true"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let queued = Instant::now();
        while server.cli(&["LLEN", &queue]).unwrap() != "1" {
            assert!(queued.elapsed() < Duration::from_secs(20), "never queued");
            std::thread::sleep(Duration::from_millis(20));
        }
        nix_kill(waiter.id(), signal);
        let status = wait_within(
            &mut waiter,
            Duration::from_secs(20),
            "interrupted wait",
            None,
        );
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut waiter.stderr.take().unwrap(), &mut stderr).unwrap();
        println!(
            "SIG{signal} while waiting: exit {:?} {stderr}",
            status.code()
        );
        assert_eq!(status.code(), Some(code), "SIG{signal}: {stderr}");
        // No queue entry, waiter deadline or grant offer is left; the holder still holds.
        for (command, key) in [
            ("LLEN", queue.clone()),
            ("ZCARD", format!("redisson_lock_timeout:{{{name}}}")),
            ("ZCARD", format!("{{{name}}}:keylatch_waiters")),
            ("HLEN", format!("{{{name}}}:keylatch_grants")),
        ] {
            assert_eq!(
                server.cli(&[command, &key]).unwrap(),
                "0",
                "SIG{signal}: {command} {key}"
            );
        }
        assert_eq!(
            server.cli(&["HLEN", name]).unwrap(),
            "1",
            "the holder holds"
        );
    }
    nix_kill(holder.id(), "TERM");
    holder.wait().unwrap();
    assert_eq!(server.cli(&["EXISTS", name]).unwrap(), "0", "released");
}

#[test]
fn run_help_groups_the_options_under_headings() {
    let out = bare(&["run", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    println!("{help}");
    // The long options listed under each heading, in order.
    let options_under = |heading: &str| -> Vec<String> {
        let title = format!("{heading}:");
        let mut lines = help.lines().skip_while(|l| *l != title);
        assert!(lines.next().is_some(), "no {heading:?} heading");
        lines
            .take_while(|l| l.is_empty() || l.starts_with(' '))
            .filter_map(|l| {
                let l = l.trim_start();
                let l = l
                    .split_once(", ")
                    .filter(|_| l.starts_with('-'))
                    .map_or(l, |p| p.1);
                l.starts_with("--")
                    .then(|| l.split_whitespace().next().unwrap().to_owned())
            })
            .collect()
    };
    assert_eq!(
        options_under("Connection"),
        [
            "--redis",
            "--user",
            "--password-file",
            "--tls",
            "--cacert",
            "--cert",
            "--key",
            "--insecure",
            "--replicas",
            "--replicas-timeout",
        ]
    );
    assert_eq!(
        options_under("Lock"),
        [
            "--fair",
            "--read",
            "--write",
            "--semaphore",
            "--wait",
            "--lease",
            "--watchdog"
        ]
    );
    assert_eq!(options_under("Command"), ["--on-lost", "--grace"]);
    assert_eq!(options_under("Options"), ["--verbose...", "--help"]);
}

/// Kills the processes named by pid when dropped (a test that fails leaves none behind).
struct KillOnDrop(Vec<String>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in &self.0 {
            if running(pid) {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", pid])
                    .status();
            }
        }
    }
}

/// Whether the process runs (exists and is not a zombie waiting for its parent).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|end| stat[end + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

#[test]
fn a_killed_keylatch_takes_its_command_and_its_children_with_it() {
    let server = server();
    killed_keylatch_takes_its_command(|args| keylatch(&server, args), "orphans");
}

#[test]
fn a_killed_keylatch_takes_its_command_and_its_children_with_it_on_zookeeper() {
    assert!(
        keylatch_testkit::zookeeper_available(),
        "ZooKeeper is not installed: run ./scripts/setup-zookeeper.sh"
    );
    let server = keylatch_testkit::ZooKeeperServer::start().expect("start ZooKeeper");
    let url = format!("zk://{}", server.connect_string());
    killed_keylatch_takes_its_command(
        |args| {
            let mut cmd = bare(&["--url", &url]);
            cmd.args(args);
            cmd
        },
        "orphans-zk",
    );
}

/// SIGKILLs a `keylatch run` whose command started a child of its own; the next run gets the
/// lock once the hold ends (the watchdog timeout, or on ZooKeeper the session timeout: both
/// 2 s), and by then the command and its child must be gone.
fn killed_keylatch_takes_its_command(keylatch: impl Fn(&[&str]) -> Command, tag: &str) {
    let dir = scratch(tag);
    let name = format!("cli-{tag}");
    // The command starts a child of its own, then waits for it.
    let script = format!(
        "sleep 300 & echo $! > {d}/child.tmp; mv {d}/child.tmp {d}/child; echo $$ > {d}/command; wait",
        d = dir.display()
    );
    let mut holder = keylatch(&["run", "--watchdog", "2s", &name, "--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    wait_for_file(&dir.join("command"));
    let command = std::fs::read_to_string(dir.join("command")).unwrap();
    let child = std::fs::read_to_string(dir.join("child")).unwrap();
    let (command, child) = (command.trim(), child.trim());
    // Whatever the outcome, nothing this test started outlives it.
    let _cleanup = KillOnDrop(vec![command.to_owned(), child.to_owned()]);
    assert!(running(command) && running(child), "the command runs");

    holder.kill().unwrap(); // SIGKILL, as the OOM killer sends: no release, no clean-up
    holder.wait().unwrap();
    // The lock passes on once the hold ends; by then the command and its child must be gone
    // (they are killed at once, not at the hand-over).
    let out = keylatch(&["run", "--wait", "20s", &name, "--", "true"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "the next holder got the lock: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !running(command),
        "the command {command} outlived its keylatch into the next holder's turn"
    );
    assert!(
        !running(child),
        "the command's child {child} outlived its keylatch into the next holder's turn"
    );
}
