//! A process that takes one semaphore permit and holds it until it is killed, for crash tests.
//!
//! Usage: `keylatch-test-permit-holder URL NAME WATCHDOG_MS KIND`, where KIND is `expirable`
//! (a permit-expirable semaphore's permit in watchdog mode) or `plain` (one permit of a plain
//! semaphore). Prints `acquired <id>` (`acquired plain` for a plain permit) once it holds it.
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, name, watchdog_ms, kind] = args.as_slice() else {
        return Err("usage: keylatch-test-permit-holder URL NAME WATCHDOG_MS KIND".into());
    };
    let config = keylatch::Config::builder()
        .url(url.as_str())
        .watchdog_timeout(Duration::from_millis(watchdog_ms.parse()?))
        .build()?;
    let client = keylatch::Client::connect_with(config).await?;
    match kind.as_str() {
        "expirable" => {
            let permit = client.permit_expirable_semaphore(name).acquire().await?;
            println!("acquired {}", permit.id());
            tokio::time::sleep(Duration::from_secs(3600)).await;
            permit.release().await?;
        }
        "plain" => {
            let permit = client.semaphore(name).acquire().await?;
            println!("acquired plain");
            tokio::time::sleep(Duration::from_secs(3600)).await;
            permit.release().await?;
        }
        other => return Err(format!("unknown kind {other:?}").into()),
    }
    Ok(())
}
