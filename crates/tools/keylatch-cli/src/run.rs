//! `keylatch run`: hold a lock for as long as a command runs.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use keylatch::{
    AcquireOptions, Client, Config, DistributedLock, Error, LockGuard, LossReason, RedLock,
    RedLockGuard,
};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::{OnLost, RunArgs};
use crate::failure::{EX_LOST, EX_SOFTWARE, EX_TEMPFAIL, EX_USAGE, Failure};
use crate::reap::Reaper;

mod pg;

/// Runs `args.command` under the lock and returns the exit code.
pub async fn run(mut config: Config, args: RunArgs) -> Result<u8, Failure> {
    if pg::is_postgres_url(config.url.expose_secret()) {
        return pg::run(config, args).await;
    }
    if let Some(watchdog) = args.watchdog {
        config.watchdog_timeout = watchdog;
    }
    // The holder metadata names the command the lock is held for.
    // Operators see which host and process hold the lock (`keylatch top`, `serve`).
    config.holder_metadata = true;
    config.holder_program = Some(args.command.join(" "));
    let client = Client::connect_with(config).await?;
    let lock = match lock_for(&client, &args).await {
        Ok(lock) => lock,
        Err(failure) => {
            let _ = client.shutdown().await;
            return Err(failure);
        }
    };
    let acquire = lock.acquire(options_of(&args));
    let acquired = tokio::select! {
        acquired = acquire => acquired,
        code = interruption() => {
            // The acquisition was dropped, which undoes in the background whatever it had
            // asked for (a queue entry, a hold granted just now); the shutdown waits for that.
            let _ = client.shutdown().await;
            return Ok(code);
        }
    };
    let guard = match acquired {
        Ok(Some(guard)) => guard,
        Ok(None) => {
            let _ = client.shutdown().await;
            return Err(not_acquired(&args));
        }
        Err(err) => {
            let _ = client.shutdown().await;
            return Err(err.into());
        }
    };
    tracing::debug!(lock = %args.name, token = ?guard.fencing_token(), "acquired");
    let (child, reaper) = match spawn(&args, guard.fencing_token()).await {
        Ok(spawned) => spawned,
        Err(failure) => {
            release(&client, guard, &args.name).await;
            return Err(failure);
        }
    };
    let outcome = supervise(child, guard.lost(), || guard.loss_reason(), &args).await;
    reaper.done().await;
    if matches!(outcome, Ok(EX_LOST)) {
        // The hold is gone (or the server does not answer): nothing to wait for.
        guard.forget();
        let _ = client.shutdown().await;
    } else {
        release(&client, guard, &args.name).await;
    }
    outcome
}

/// `run` with `--redis` given 3 or more times: the command runs while a RedLock over those
/// independent servers is held (a plain lock on each, without fencing tokens).
pub async fn run_redlock(mut configs: Vec<Config>, args: RunArgs) -> Result<u8, Failure> {
    if args.fair || args.read || args.write || args.semaphore.is_some() {
        return Err(Failure::new(
            EX_USAGE,
            "a RedLock over several servers takes a plain lock: drop --fair, --read, --write and \
             --semaphore",
        ));
    }
    let servers = configs.len();
    let mut clients = Vec::with_capacity(servers);
    let mut unreachable = None;
    for config in &mut configs {
        if let Some(watchdog) = args.watchdog {
            config.watchdog_timeout = watchdog;
        }
        match Client::connect_with(config.clone()).await {
            Ok(client) => clients.push(client),
            // A minority of the servers may be down: they count as failed in every attempt.
            Err(err) => {
                let failure = Failure::from(err);
                eprintln!("keylatch: warning: {}", failure.message);
                unreachable.get_or_insert(failure);
            }
        }
    }
    if clients.len() < servers / 2 + 1 {
        return Err(unreachable.unwrap_or_else(|| Failure::new(EX_SOFTWARE, "no server")));
    }
    let lock = RedLock::new(
        clients
            .iter()
            .map(|c| Arc::new(c.lock(&args.name)) as Arc<dyn DistributedLock>),
    )?
    .with_servers(servers)?;
    let acquire = lock.acquire(options_of(&args));
    let acquired = tokio::select! {
        acquired = acquire => acquired,
        code = interruption() => {
            shutdown_all(&clients).await;
            return Ok(code);
        }
    };
    let guard = match acquired {
        Ok(Some(guard)) => guard,
        Ok(None) => {
            shutdown_all(&clients).await;
            return Err(not_acquired(&args));
        }
        Err(err) => {
            shutdown_all(&clients).await;
            return Err(err.into());
        }
    };
    tracing::debug!(lock = %args.name, servers = guard.guards().len(), "acquired a RedLock");
    let (child, reaper) = match spawn(&args, None).await {
        Ok(spawned) => spawned,
        Err(failure) => {
            release_redlock(&clients, guard, &args.name).await;
            return Err(failure);
        }
    };
    let outcome = supervise(
        child,
        guard.lost(),
        || guard.guards().iter().find_map(LockGuard::loss_reason),
        &args,
    )
    .await;
    reaper.done().await;
    if matches!(outcome, Ok(EX_LOST)) {
        for part in guard.into_guards() {
            part.forget();
        }
        shutdown_all(&clients).await;
    } else {
        release_redlock(&clients, guard, &args.name).await;
    }
    outcome
}

fn options_of(args: &RunArgs) -> AcquireOptions {
    let mut options = AcquireOptions::new();
    if let Some(wait) = args.wait {
        options = options.with_wait(wait);
    }
    if let Some(lease) = args.lease {
        options = options.with_lease(lease);
    }
    options
}

fn not_acquired(args: &RunArgs) -> Failure {
    Failure::new(
        EX_TEMPFAIL,
        format!(
            "could not acquire {:?} within {}",
            args.name,
            humantime::format_duration(args.wait.unwrap_or_default())
        ),
    )
}

/// Starts the command, watched by a [`Reaper`] that kills it (and every process below it) if
/// keylatch dies before the command ends. The command learns the lock's name and, for the
/// locks that issue one, its fencing token, so it can fence its writes (as `etcdctl lock`
/// exports its key and revision).
async fn spawn(args: &RunArgs, token: Option<u64>) -> Result<(Child, Reaper), Failure> {
    // Started first: no command runs unwatched.
    let mut reaper = Reaper::start().map_err(|err| {
        Failure::new(
            EX_SOFTWARE,
            format!("cannot start the watcher that stops the command if keylatch dies: {err}"),
        )
    })?;
    let mut command = Command::new(&args.command[0]);
    command.args(&args.command[1..]).kill_on_drop(true);
    // Where Redis is, the credentials, the TLS files and the client's settings stay with
    // keylatch: the command gets the lock's name and its token.
    crate::connection::strip_client_vars(&mut command);
    command.env("KEYLATCH_LOCK_NAME", &args.name);
    if let Some(token) = token {
        command.env("KEYLATCH_FENCING_TOKEN", token.to_string());
    }
    let child = command.spawn().map_err(|err| {
        let code = if err.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        };
        Failure::new(code, format!("cannot run {:?}: {err}", args.command[0]))
    });
    let child = match child {
        Ok(child) => child,
        Err(failure) => {
            reaper.done().await;
            return Err(failure);
        }
    };
    if let Some(pid) = child.id()
        && let Err(err) = reaper.watch(pid).await
    {
        // The command runs unwatched: stop it rather than let it outlive keylatch.
        drop(child);
        return Err(Failure::new(
            EX_SOFTWARE,
            format!("cannot hand the command to its watcher: {err}"),
        ));
    }
    Ok((child, reaper))
}

/// The lock handle for the primitive the flags chose.
async fn lock_for(client: &Client, args: &RunArgs) -> Result<Arc<dyn DistributedLock>, Failure> {
    let name = args.name.as_str();
    Ok(if args.fair {
        Arc::new(client.fair_lock(name).with_fencing(true))
    } else if args.read {
        Arc::new(client.rw_lock(name).read_lock())
    } else if args.write {
        Arc::new(client.rw_lock(name).write_lock().with_fencing(true))
    } else if let Some(permits) = args.semaphore {
        // Set up again by an acquire if its keys are lost (a restart without persistence).
        let semaphore = client
            .permit_expirable_semaphore(name)
            .with_permits(permits);
        // Sets the count when the semaphore is new; an existing one keeps its own. On
        // ZooKeeper the maximum is each process's own (Curator's `maxLeases`): `with_permits`.
        if client.store_kind() == keylatch::StoreKind::Redis {
            semaphore.try_set_permits(permits).await?;
        }
        Arc::new(semaphore.as_lock())
    } else {
        Arc::new(client.lock(name).with_fencing(true))
    })
}

/// Waits for the child, forwarding SIGINT/SIGTERM to it and acting on a lost lock.
async fn supervise(
    mut child: Child,
    lost: impl std::future::Future<Output = ()>,
    reason: impl Fn() -> Option<LossReason>,
    args: &RunArgs,
) -> Result<u8, Failure> {
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let mut sigint = signal(SignalKind::interrupt()).map_err(internal)?;
    let mut sigterm = signal(SignalKind::terminate()).map_err(internal)?;
    tokio::pin!(lost);
    let mut watching = true;
    loop {
        tokio::select! {
            status = child.wait() => return Ok(exit_code(status.map_err(internal)?)),
            _ = sigint.recv() => forward(pid, Signal::SIGINT),
            _ = sigterm.recv() => forward(pid, Signal::SIGTERM),
            () = &mut lost, if watching => {
                match reason() {
                    Some(why) => eprintln!(
                        "keylatch: lost the lock {:?} while the command ran: {why}",
                        args.name
                    ),
                    None => {
                        eprintln!("keylatch: lost the lock {:?} while the command ran", args.name);
                    }
                }
                if args.on_lost == OnLost::Ignore {
                    watching = false;
                    continue;
                }
                terminate(&mut child, pid, args.grace).await;
                return Ok(EX_LOST);
            }
        }
    }
}

/// SIGTERM, then SIGKILL after `grace`.
async fn terminate(child: &mut Child, pid: Option<Pid>, grace: Duration) {
    forward(pid, Signal::SIGTERM);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
}

fn forward(pid: Option<Pid>, sig: Signal) {
    if let Some(pid) = pid {
        let _ = kill(pid, sig);
    }
}

/// Completes on SIGINT or SIGTERM (while watching).
pub(crate) async fn interrupted() {
    interruption().await;
}

/// Completes on SIGINT or SIGTERM with the shell's code for a process that signal ended:
/// 130 for SIGINT, 143 for SIGTERM.
pub(crate) async fn interruption() -> u8 {
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    let sig = tokio::select! {
        _ = int.recv() => Signal::SIGINT,
        _ = term.recv() => Signal::SIGTERM,
    };
    u8::try_from(128 + sig as i32).unwrap_or(255)
}

/// Shuts every client down (each waits for its background releases and undos).
async fn shutdown_all(clients: &[Client]) {
    for client in clients {
        let _ = client.shutdown().await;
    }
}

/// The shell's convention: the exit code, or 128 + the signal that ended the process.
fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(255),
        (None, None) => 1,
    }
}

/// Releases the lock (waiting at most the release timeout), then shuts the client down, so no
/// background release is cut off when the process exits.
async fn release(client: &Client, guard: LockGuard, name: &str) {
    match guard.unlock().await {
        Ok(()) | Err(Error::NotHeld { .. }) => {}
        Err(err) => eprintln!(
            "keylatch: releasing {name:?} failed ({}); its lease ends it",
            Failure::from(err).message
        ),
    }
    let _ = client.shutdown().await;
}

/// Releases a RedLock on every server (waiting at most each client's release timeout), then
/// shuts the clients down.
async fn release_redlock(clients: &[Client], guard: RedLockGuard, name: &str) {
    match guard.unlock().await {
        Ok(()) | Err(Error::NotHeld { .. }) => {}
        Err(err) => eprintln!(
            "keylatch: releasing {name:?} failed on a server ({}); its lease ends it there",
            Failure::from(err).message
        ),
    }
    shutdown_all(clients).await;
}

fn internal(err: std::io::Error) -> Failure {
    Failure::new(EX_SOFTWARE, err.to_string())
}
