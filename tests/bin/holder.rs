//! A process that takes a lock and holds it until it is killed, for crash tests.
//!
//! Usage: `keylatch-test-holder URL NAME WATCHDOG_MS`. Prints `locked` once it holds the lock.
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, name, watchdog_ms] = args.as_slice() else {
        return Err("usage: keylatch-test-holder URL NAME WATCHDOG_MS".into());
    };
    let config = keylatch::Config::builder()
        .url(url.as_str())
        .watchdog_timeout(Duration::from_millis(watchdog_ms.parse()?))
        .build()?;
    let client = keylatch::Client::connect_with(config).await?;
    let guard = client.lock(name).lock().await?;
    println!("locked");
    tokio::time::sleep(Duration::from_secs(3600)).await;
    guard.unlock().await?;
    Ok(())
}
