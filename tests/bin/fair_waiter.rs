//! A process that queues for a fair lock and waits until it is killed, for crash tests.
//!
//! Usage: `keylatch-test-fair-waiter URL NAME WAITER_TIMEOUT_MS`. Prints `queued <waiter-id>`
//! once its id is in the lock's queue, and `locked` if it ever gets the lock (it then holds it
//! until killed).
use std::time::Duration;

use keylatch::Owner;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, name, waiter_timeout_ms] = args.as_slice() else {
        return Err("usage: keylatch-test-fair-waiter URL NAME WAITER_TIMEOUT_MS".into());
    };
    let config = keylatch::Config::builder().url(url.as_str()).build()?;
    let client = keylatch::Client::connect_with(config).await?;
    let owner = Owner::unique();
    let id = client.owner_id(owner).to_string();
    let lock = client
        .fair_lock(name)
        .with_owner(owner)
        .with_waiter_timeout(Duration::from_millis(waiter_timeout_ms.parse()?));
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await }
    });
    for _ in 0..1000 {
        if lock.queue().await?.iter().any(|w| w.id == id) {
            println!("queued {id}");
            break;
        }
        if waiting.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let guard = waiting.await??;
    println!("locked");
    tokio::time::sleep(Duration::from_secs(3600)).await;
    guard.unlock().await?;
    Ok(())
}
