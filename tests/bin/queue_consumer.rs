//! A consumer of a delayed queue in reliable mode, for crash tests.
//!
//! Usage: `keylatch-test-queue-consumer URL NAME VISIBILITY_MS MAX_DELIVERIES WORK_MS`. It takes
//! reliably (UTF-8 values), prints `took <value> <delivery count>`, works `WORK_MS`, acknowledges
//! and prints `acked <value>` (or `late <value>` when the delivery had been given back). The
//! value `poison` makes it exit with 3 at once, unacknowledged. It exits 0 when nothing came
//! for 5 s.
use std::io::Write;
use std::time::Duration;

use keylatch::queue::Utf8;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, name, visibility_ms, max, work_ms] = args.as_slice() else {
        return Err(
            "usage: keylatch-test-queue-consumer URL NAME VISIBILITY_MS MAX_DELIVERIES WORK_MS"
                .into(),
        );
    };
    let config = keylatch::Config::builder().url(url.as_str()).build()?;
    let client = keylatch::Client::connect_with(config).await?;
    let queue = client
        .delayed_queue::<Utf8>(name)?
        .with_visibility_timeout(Duration::from_millis(visibility_ms.parse()?))?
        .with_max_deliveries(max.parse()?)?;
    let work = Duration::from_millis(work_ms.parse()?);
    let mut out = std::io::stdout();
    while let Some(delivery) = queue.poll_reliably_for(Duration::from_secs(5)).await? {
        writeln!(
            out,
            "took {} {}",
            delivery.value(),
            delivery.delivery_count()
        )?;
        out.flush()?;
        if delivery.value() == "poison" {
            std::process::exit(3);
        }
        tokio::time::sleep(work).await;
        let word = if queue.ack(&delivery).await? {
            "acked"
        } else {
            "late"
        };
        writeln!(out, "{word} {}", delivery.value())?;
        out.flush()?;
    }
    client.shutdown().await?;
    Ok(())
}
