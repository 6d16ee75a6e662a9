//! A process that takes a read lock and holds it until it is killed, for crash tests.
//!
//! Usage: `keylatch-test-rw-reader URL NAME WATCHDOG_MS [HOLDS]`. Takes `HOLDS` (default 1)
//! reentrant read holds in watchdog mode, prints `locked <owner-id>` once it holds them, then
//! sleeps.
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (url, name, watchdog_ms, holds) = match args.as_slice() {
        [_, url, name, watchdog_ms] => (url, name, watchdog_ms, 1),
        [_, url, name, watchdog_ms, holds] => (url, name, watchdog_ms, holds.parse()?),
        _ => return Err("usage: keylatch-test-rw-reader URL NAME WATCHDOG_MS [HOLDS]".into()),
    };
    let config = keylatch::Config::builder()
        .url(url.as_str())
        .watchdog_timeout(Duration::from_millis(watchdog_ms.parse()?))
        .build()?;
    let client = keylatch::Client::connect_with(config).await?;
    // One reader owner with `holds` read holds.
    let rw = client.rw_lock(name).with_owner(keylatch::Owner::unique());
    let mut guards = Vec::new();
    for _ in 0..holds {
        guards.push(rw.read().await?);
    }
    let owner = guards
        .first()
        .map(|g| g.owner_id().to_string())
        .unwrap_or_default();
    println!("locked {owner}");
    tokio::time::sleep(Duration::from_secs(3600)).await;
    for guard in guards {
        guard.unlock().await?;
    }
    Ok(())
}
