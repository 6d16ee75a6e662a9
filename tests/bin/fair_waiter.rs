//! A process that queues for a fair lock and waits until it is killed, for crash tests.
//!
//! Usage: `keylatch-test-fair-waiter URL NAME WAITER_TIMEOUT_MS [grant]`. Prints
//! `queued <waiter-id>` once its id is in the lock's queue, and `locked` if it ever gets the
//! lock (it then holds it until killed). With `grant`, the wait has an owner of its own and
//! accepts the lock handed to it on release (its id is then read from the queue).
use std::time::Duration;

use keylatch::Owner;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (url, name, waiter_timeout_ms, grant) = match args.as_slice() {
        [_, url, name, timeout] => (url, name, timeout, false),
        [_, url, name, timeout, grant] if grant == "grant" => (url, name, timeout, true),
        _ => {
            return Err(
                "usage: keylatch-test-fair-waiter URL NAME WAITER_TIMEOUT_MS [grant]".into(),
            );
        }
    };
    let config = keylatch::Config::builder().url(url.as_str()).build()?;
    let client = keylatch::Client::connect_with(config).await?;
    let owner = Owner::unique();
    let mut id = client.owner_id(owner).to_string();
    let lock = client
        .fair_lock(name)
        .with_waiter_timeout(Duration::from_millis(waiter_timeout_ms.parse()?));
    let lock = if grant { lock } else { lock.with_owner(owner) };
    // A wait without an owner scope gets a new owner of this client: its id starts so.
    let prefix = format!("{}:", client.owner_id(owner).client());
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await }
    });
    for _ in 0..1000 {
        let queue = lock.queue().await?;
        let found = if grant {
            queue.iter().find(|w| w.id.starts_with(&prefix))
        } else {
            queue.iter().find(|w| w.id == id)
        };
        if let Some(waiter) = found {
            id.clone_from(&waiter.id);
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
