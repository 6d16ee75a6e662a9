//! `keylatch run` on PostgreSQL (`--url postgres://…`): the command runs while a session-level
//! advisory lock is held (keylatch-postgres's reentrant lock, or with `--read`/`--write` a side
//! of its read-write lock; the fencing token of an exclusive hold exported);
//! when the holding session ends (`pg_terminate_backend`, a restart), the command is stopped
//! and `run` exits with 76.

use keylatch::postgres::{PgClient, PgConfig};
use keylatch::{Config, DistributedLock, Error, LockGuard};

use super::{interruption, not_acquired, options_of, spawn, supervise};
use crate::cli::RunArgs;
use crate::failure::{EX_LOST, Failure};

/// Whether `url` names a PostgreSQL server.
pub(crate) fn is_postgres_url(url: &str) -> bool {
    ["postgres://", "postgresql://"].iter().any(|scheme| {
        url.get(..scheme.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(scheme))
    })
}

/// Runs `args.command` under the advisory lock `args.name` and returns the exit code.
pub(crate) async fn run(config: Config, args: RunArgs) -> Result<u8, Failure> {
    if args.fair || args.semaphore.is_some() {
        return Err(Error::Unsupported {
            primitive: "postgres",
            operation: "--fair or --semaphore",
            reason: "only the reentrant lock and the read-write lock run on PostgreSQL so far",
        }
        .into());
    }
    let settings = PgConfig::default()
        .with_release_timeout(config.release_timeout)
        .with_shutdown_timeout(config.shutdown_timeout);
    let client = PgClient::connect_with(config.url.expose_secret(), settings).await?;
    let lock = if args.read || args.write {
        client.read_write_lock(&args.name).map(|rw| {
            if args.read {
                rw.read_lock()
            } else {
                rw.write_lock()
            }
        })
    } else {
        client.lock(&args.name)
    };
    let lock = match lock {
        Ok(lock) => lock,
        Err(err) => {
            let _ = client.shutdown().await;
            return Err(err.into());
        }
    };
    let acquired = tokio::select! {
        acquired = lock.acquire(options_of(&args)) => acquired,
        code = interruption() => {
            // The dropped acquisition's session is closed in the background; the shutdown
            // waits for that.
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
        guard.forget();
        let _ = client.shutdown().await;
    } else {
        release(&client, guard, &args.name).await;
    }
    outcome
}

/// Releases the lock (waiting at most the release timeout), then shuts the client down.
async fn release(client: &PgClient, guard: LockGuard, name: &str) {
    match guard.unlock().await {
        Ok(()) | Err(Error::NotHeld { .. }) => {}
        Err(err) => eprintln!(
            "keylatch: releasing {name:?} failed ({}); closing its session frees it",
            Failure::from(err).message
        ),
    }
    let _ = client.shutdown().await;
}
