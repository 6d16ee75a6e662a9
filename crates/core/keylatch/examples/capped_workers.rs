//! Caps concurrent workers across clients with a permit-expirable semaphore.
//!
//! Three clients (as if on three machines) run twelve workers between them; each job takes a
//! permit of a semaphore with three permits. Inside, a worker counts itself in on a separate
//! Redis counter (`INCR`, whose reply is how many are inside), works a little, and counts
//! itself out. The example prints the highest concurrency seen and fails if it ever exceeded
//! the cap. Permits are in watchdog mode: a worker that crashed would give its permit back
//! within the watchdog timeout.
//!
//! ```text
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p keylatch --example capped_workers
//! ```
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use keylatch::redis::AsyncCommands;

const CAP: u32 = 3;
const CLIENTS: usize = 3;
const WORKERS: usize = 12;
const JOBS: usize = 5;
const SEMAPHORE: &str = "example:capped-workers";
const INSIDE: &str = "example:capped-workers:inside";

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("capped_workers: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<bool, Box<dyn std::error::Error + Send + Sync>> {
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(keylatch::Client::connect_from_env().await?);
    }
    // Start from a clean slate: no semaphore, no counter.
    let semaphore = clients[0].permit_expirable_semaphore(SEMAPHORE);
    let mut redis = clients[0].connection().await?;
    let _: () = redis
        .del(&[
            SEMAPHORE,
            semaphore.timeout_key(),
            semaphore.total_key(),
            INSIDE,
        ])
        .await?;
    semaphore.try_set_permits(CAP).await?;
    println!("{WORKERS} workers on {CLIENTS} clients, {JOBS} jobs each, at most {CAP} at once");

    let highest = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for worker in 0..WORKERS {
        let client = clients[worker % CLIENTS].clone();
        let highest = highest.clone();
        workers.push(tokio::spawn(async move {
            let semaphore = client.permit_expirable_semaphore(SEMAPHORE);
            let mut redis = client.connection().await?;
            for _ in 0..JOBS {
                let permit = semaphore.acquire().await?;
                let inside: u64 = redis.incr(INSIDE, 1).await?;
                highest.fetch_max(inside, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                let _: i64 = redis.decr(INSIDE, 1).await?;
                permit.release().await?;
            }
            Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    for worker in workers {
        worker.await??;
    }
    let highest = highest.load(Ordering::SeqCst);
    let available = semaphore.available_permits().await?;
    println!(
        "{} jobs done; highest concurrency seen: {highest} (cap {CAP}); permits available again: {available}",
        WORKERS * JOBS
    );
    let _: () = redis
        .del(&[
            SEMAPHORE,
            semaphore.timeout_key(),
            semaphore.total_key(),
            INSIDE,
        ])
        .await?;
    if highest > u64::from(CAP) {
        eprintln!("the cap was exceeded: {highest} workers were inside at once");
        return Ok(false);
    }
    if available != u64::from(CAP) {
        eprintln!("permits were lost: {available} of {CAP} available at the end");
        return Ok(false);
    }
    println!("the cap held across {CLIENTS} clients");
    Ok(true)
}
