//! Two processes contend for one reentrant lock.
//!
//! Run without arguments, it starts two copies of itself (`--worker A`, `--worker B`); each
//! increments a shared counter 50 times under the lock, reading it, pausing, then writing it
//! back. Without the lock, increments would be lost; with it the counter ends at exactly 100.
//!
//! ```text
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p keylatch --example two_processes
//! ```
use std::process::ExitCode;
use std::time::Duration;

use keylatch::redis::AsyncCommands;

const ROUNDS: u64 = 50;
const LOCK: &str = "example:two-processes";
const COUNTER: &str = "example:two-processes:counter";

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.iter().position(|a| a == "--worker") {
        Some(i) => match args.get(i + 1) {
            Some(name) => worker(name).await,
            None => {
                eprintln!("usage: two_processes [--worker NAME]");
                return ExitCode::from(64);
            }
        },
        None => parent().await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("two_processes: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn worker(name: &str) -> Result<(), Box<dyn std::error::Error>> {
    let client = keylatch::Client::connect_from_env().await?;
    let lock = client.lock(LOCK);
    let mut redis = client.connection().await?;
    for round in 1..=ROUNDS {
        let guard = lock.lock().await?;
        let value: u64 = redis.get::<_, Option<u64>>(COUNTER).await?.unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(2)).await;
        let _: () = redis.set(COUNTER, value + 1).await?;
        guard.unlock().await?;
        if round % 10 == 0 {
            println!("worker {name}: {round} increments done");
        }
    }
    Ok(())
}

async fn parent() -> Result<(), Box<dyn std::error::Error>> {
    let client = keylatch::Client::connect_from_env().await?;
    let mut redis = client.connection().await?;
    let _: () = redis.del(COUNTER).await?;
    let exe = std::env::current_exe()?;
    println!("starting two worker processes, {ROUNDS} locked increments each");
    let mut children = Vec::new();
    for name in ["A", "B"] {
        children.push(
            tokio::process::Command::new(&exe)
                .args(["--worker", name])
                .spawn()?,
        );
    }
    for mut child in children {
        let status = child.wait().await?;
        if !status.success() {
            return Err(format!("a worker failed: {status}").into());
        }
    }
    let total: u64 = redis.get(COUNTER).await?;
    println!("counter = {total} (expected {})", 2 * ROUNDS);
    if total != 2 * ROUNDS {
        return Err("increments were lost: the lock did not exclude".into());
    }
    let _: () = redis.del(COUNTER).await?;
    println!("no increment lost: the lock excluded the two processes");
    Ok(())
}
