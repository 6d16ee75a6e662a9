//! The worker process of the fault tests: the test binary started again with `KLZ_WORKER`
//! set runs [`main`] instead of its tests. It takes a named [`ZkMutex`](keylatch_zookeeper)
//! in a loop and, inside the critical section, does a read-modify-write increment of a
//! counter file shared by every worker, so an overlap shows as a lost increment.
//!
//! Files in the shared directory (`KLZ_DIR`):
//! - `counter`: the shared counter (replaced atomically by a rename);
//! - `inside/<pid>`: present while the process is in its section. On entry and before its
//!   write, a worker looks for another live, running process's entry and logs `overlap`
//!   (entries of dead or stopped processes cannot act and are only noted as `stale`);
//! - `log-<id>`: one event a line: `ready`, `acquired <token>`, `write <value>` (after the
//!   write: an acknowledged increment), `lost`, `retry <error>`, `overlap <pid>`, `stale
//!   <pid>`, `unlock-error <error>`, `done`;
//! - `stop`: when it appears, workers stop after their current section.
//!
//! Settings (environment): `KLZ_URL`, `KLZ_DIR`, `KLZ_NAME`, `KLZ_ID`, `KLZ_ITER`,
//! `KLZ_HOLD_MS`, `KLZ_SESSION_MS`, `KLZ_RUN_MS`. Exit code 0 after `done`, 3 after `lost`,
//! 2 on a setup error. Every loop is bounded (iterations and a run deadline).
//!
//! May import: keylatch-core, keylatch-zookeeper, tokio, std.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use keylatch_core::{DistributedLock, LockGuard};
use keylatch_zookeeper::{DisconnectLoss, ZkClient, ZkConfig, ZkMutex};
use tokio::time::Instant;

/// Set to start the test binary as a worker.
pub const WORKER_ENV: &str = "KLZ_WORKER";

struct Settings {
    url: String,
    dir: PathBuf,
    name: String,
    id: String,
    iterations: u64,
    hold: Duration,
    session: Duration,
    run: Duration,
}

fn var(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

fn millis(name: &str, default: u64) -> Duration {
    Duration::from_millis(var(name, "").parse().unwrap_or(default))
}

fn settings() -> Settings {
    Settings {
        url: var("KLZ_URL", ""),
        dir: PathBuf::from(var("KLZ_DIR", ".")),
        name: var("KLZ_NAME", "faults"),
        id: var("KLZ_ID", "0"),
        iterations: var("KLZ_ITER", "1").parse().unwrap_or(1),
        hold: millis("KLZ_HOLD_MS", 50),
        session: millis("KLZ_SESSION_MS", 10_000),
        run: millis("KLZ_RUN_MS", 120_000),
    }
}

struct Log(PathBuf);

impl Log {
    fn emit(&self, line: &str) {
        if let Ok(mut file) = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.0)
        {
            let _ = writeln!(file, "{line}");
            let _ = file.sync_data();
        }
    }
}

/// The state of process `pid` from `/proc`: `None` when it is gone.
fn process_state(pid: &str) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.trim_start().chars().next()
}

/// Logs `overlap` for every other process in its section that is alive and running.
fn check_others(dir: &Path, log: &Log) {
    let me = std::process::id().to_string();
    let Ok(entries) = fs::read_dir(dir.join("inside")) else {
        return;
    };
    for entry in entries.flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if pid == me {
            continue;
        }
        match process_state(&pid) {
            None | Some('Z' | 'X' | 'T' | 't') => log.emit(&format!("stale {pid}")),
            Some(_) => log.emit(&format!("overlap {pid}")),
        }
    }
}

fn read_counter(dir: &Path) -> u64 {
    fs::read_to_string(dir.join("counter"))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

fn write_counter(dir: &Path, value: u64) {
    let tmp = dir.join(format!("counter.{}", std::process::id()));
    fs::write(&tmp, value.to_string()).expect("write the counter");
    fs::rename(&tmp, dir.join("counter")).expect("replace the counter");
}

enum Section {
    Wrote,
    Lost,
}

/// Before a write: a round trip on the session (it fails once the session has expired, and
/// the watcher then marks the hold lost), then the guard's own state.
async fn still_held(lock: &ZkMutex, guard: &LockGuard, session: Duration) -> bool {
    let deadline = Instant::now() + session * 2;
    loop {
        if guard.is_lost() {
            return false;
        }
        let checked = tokio::time::timeout(Duration::from_secs(2), lock.is_locked()).await;
        if matches!(checked, Ok(Ok(true))) && !guard.is_lost() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::select! {
            () = guard.lost() => return false,
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}

async fn section(s: &Settings, log: &Log, lock: &ZkMutex, guard: &LockGuard) -> Section {
    let marker = s.dir.join("inside").join(std::process::id().to_string());
    fs::write(&marker, "").expect("enter");
    check_others(&s.dir, log);
    let value = read_counter(&s.dir);
    let outcome = tokio::select! {
        () = guard.lost() => Section::Lost,
        () = tokio::time::sleep(s.hold) => {
            if still_held(lock, guard, s.session).await {
                check_others(&s.dir, log);
                write_counter(&s.dir, value + 1);
                log.emit(&format!("write {}", value + 1));
                Section::Wrote
            } else {
                Section::Lost
            }
        }
    };
    let _ = fs::remove_file(&marker);
    outcome
}

async fn stop_requested(dir: &Path, deadline: Instant) {
    while !dir.join("stop").exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn run(s: Settings) -> i32 {
    let log = Log(s.dir.join(format!("log-{}", s.id)));
    let _ = fs::create_dir_all(s.dir.join("inside"));
    // A hold survives a short disconnection (a leader's failover) within a bound that keeps
    // loss ahead of the session's expiry: 5 s of detection + T/2 < T for T = 20 s.
    let config = ZkConfig::default()
        .with_session_timeout(s.session)
        .with_disconnect_loss(DisconnectLoss::After(s.session / 2));
    let client = match ZkClient::connect_with(&s.url, config).await {
        Ok(client) => client,
        Err(err) => {
            log.emit(&format!("error {err}"));
            return 2;
        }
    };
    let lock = client.lock(&s.name).expect("lock name");
    log.emit("ready");
    let deadline = Instant::now() + s.run;
    let mut done = 0;
    while done < s.iterations && Instant::now() < deadline && !s.dir.join("stop").exists() {
        let acquired = tokio::select! {
            acquired = lock.lock() => acquired,
            () = stop_requested(&s.dir, deadline) => break,
        };
        let guard = match acquired {
            Ok(guard) => guard,
            Err(err) => {
                let mut why = err.to_string();
                let mut source = std::error::Error::source(&err);
                while let Some(cause) = source {
                    why.push_str(&format!(": {cause}"));
                    source = cause.source();
                }
                log.emit(&format!("retry {why}"));
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        log.emit(&format!("acquired {}", guard.fencing_token().unwrap_or(0)));
        match section(&s, &log, &lock, &guard).await {
            Section::Wrote => done += 1,
            Section::Lost => {
                log.emit("lost");
                drop(guard);
                let _ = client.shutdown().await;
                return 3;
            }
        }
        if let Err(err) = guard.unlock().await {
            log.emit(&format!("unlock-error {err}"));
        }
    }
    let _ = client.shutdown().await;
    log.emit("done");
    0
}

/// Runs the worker and exits the process with its code.
pub fn main() -> ! {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let code = runtime.block_on(run(settings()));
    drop(runtime);
    std::process::exit(code)
}
