//! Jobs served in arrival order across several clients, with the fair lock.
//!
//! Twelve jobs arrive one after another at three "nodes" (three clients). Each job needs a
//! shared resource (say, the one printer) for 40 ms, longer than the 10 ms between arrivals,
//! so a queue builds up. With the fair lock the jobs are served in the order they arrived;
//! with the plain reentrant lock, shown for contrast, whichever retries first wins.
//!
//! Runs with no arguments against `REDIS_URL` (or `KEYLATCH_REDIS_URL`, or
//! `redis://127.0.0.1:6379`); exits non-zero if the fair lock served a job out of order or two
//! jobs used the printer at once.
//!
//! ```text
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p keylatch --example fifo_jobs
//! ```
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch::{DistributedLock, Owner};

const JOBS: usize = 12;
const NODES: usize = 3;
const ARRIVAL: Duration = Duration::from_millis(10);
const WORK: Duration = Duration::from_millis(40);

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("fifo_jobs: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<bool, Error> {
    let mut nodes = Vec::new();
    for _ in 0..NODES {
        nodes.push(keylatch::Client::connect_from_env().await?);
    }
    let name = format!("example:fifo-jobs:{}", std::process::id());
    println!(
        "{JOBS} jobs arrive {ARRIVAL:?} apart at {NODES} nodes; each needs the printer for {WORK:?}"
    );

    let (fair_order, fair_overlaps) = serve(&nodes, &format!("{name}:fair"), true).await?;
    let fair_ok = fair_order == (0..JOBS).collect::<Vec<_>>() && fair_overlaps == 0;
    println!(
        "fair lock:      served {}  -> {}",
        show(&fair_order),
        if fair_ok {
            "in arrival order".to_owned()
        } else {
            format!(
                "{} pairs out of order, {fair_overlaps} overlaps",
                inversions(&fair_order)
            )
        }
    );

    let (plain_order, plain_overlaps) = serve(&nodes, &format!("{name}:plain"), false).await?;
    println!(
        "reentrant lock: served {}  -> {} pairs out of order (no fairness promised), {plain_overlaps} overlaps",
        show(&plain_order),
        inversions(&plain_order)
    );

    if !fair_ok {
        eprintln!("fifo_jobs: the fair lock did not serve the jobs in arrival order");
    }
    Ok(fair_ok && plain_overlaps == 0)
}

/// Runs the jobs under the fair lock (or the reentrant one) named `name`; returns the order in
/// which they got the printer and how many times two used it at once.
async fn serve(
    nodes: &[keylatch::Client],
    name: &str,
    fair: bool,
) -> Result<(Vec<usize>, usize), Error> {
    let order = Arc::new(Mutex::new(Vec::new()));
    let busy_key = format!("{name}:printer-busy");
    let overlaps = Arc::new(Mutex::new(0));
    let mut jobs = Vec::new();
    for job in 0..JOBS {
        let node = &nodes[job % NODES];
        let owner = Owner::unique();
        let id = node.owner_id(owner).to_string();
        let lock: Arc<dyn DistributedLock> = if fair {
            Arc::new(node.fair_lock(name).with_owner(owner))
        } else {
            Arc::new(node.lock(name).with_owner(owner))
        };
        let mut redis = node.connection().await?;
        let (served, overlaps, busy_key) = (order.clone(), overlaps.clone(), busy_key.clone());
        jobs.push(tokio::spawn(async move {
            let guard = lock.lock().await?;
            served.lock().expect("order").push(job);
            // The printer: a flag nobody else may hold while a job prints.
            let free: bool = redis.set_nx(&busy_key, job).await?;
            if !free {
                *overlaps.lock().expect("overlaps") += 1;
            }
            tokio::time::sleep(WORK).await;
            let _: () = redis.del(&busy_key).await?;
            guard.unlock().await?;
            Ok::<(), Error>(())
        }));
        // The next job arrives once this one has taken its place (so a slow scheduler cannot
        // swap two arrivals), and at least ARRIVAL later.
        let arrived = tokio::time::Instant::now();
        if fair {
            let lock = node.fair_lock(name);
            for _ in 0..500 {
                let queued = lock.queue().await?.iter().any(|w| w.id == id);
                if queued || order.lock().expect("order").contains(&job) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        tokio::time::sleep_until(arrived + ARRIVAL).await;
    }
    for job in jobs {
        job.await??;
    }
    let order = order.lock().expect("order").clone();
    let overlaps = *overlaps.lock().expect("overlaps");
    Ok((order, overlaps))
}

fn show(order: &[usize]) -> String {
    order
        .iter()
        .map(|j| j.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Pairs of jobs served in the opposite order to their arrival.
fn inversions(order: &[usize]) -> usize {
    let mut count = 0;
    for (a, x) in order.iter().enumerate() {
        count += order[a + 1..].iter().filter(|y| *y < x).count();
    }
    count
}
