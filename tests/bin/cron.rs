//! A cron-style program: takes a lock, plain and expirable semaphore permits and a read hold,
//! then ends as told, for the shutdown tests.
//!
//! Usage: `keylatch-test-cron URL NAME MODE` with MODE `shutdown` (calls `Client::shutdown`
//! and returns from `main`) or `hang` (waits to be killed). Prints `held` once it holds
//! everything.
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, name, mode] = args.as_slice() else {
        return Err("usage: keylatch-test-cron URL NAME MODE".into());
    };
    let config = keylatch::Config::builder()
        .url(url.as_str())
        .watchdog_timeout(Duration::from_millis(1500))
        .build()?;
    let client = keylatch::Client::connect_with(config).await?;
    let plain = client.semaphore(&format!("{name}-plain"));
    plain.try_set_permits(2).await?;
    let expirable = client.permit_expirable_semaphore(&format!("{name}-exp"));
    expirable.try_set_permits(2).await?;
    let _lock = client.lock(&format!("{name}-lock")).lock().await?;
    let _fair = client.fair_lock(&format!("{name}-fair")).lock().await?;
    let _read = client.rw_lock(&format!("{name}-rw")).read().await?;
    let _permit = plain.acquire().await?;
    let _leased = expirable.acquire().await?;
    println!("held");
    match mode.as_str() {
        "shutdown" => client.shutdown().await?,
        "hang" => tokio::time::sleep(Duration::from_secs(3600)).await,
        other => return Err(format!("unknown mode {other:?}").into()),
    }
    Ok(())
}
