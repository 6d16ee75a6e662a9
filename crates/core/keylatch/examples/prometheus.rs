//! keylatch's metrics in Prometheus' text format: install the exporter's recorder, take and
//! release a few locks, render what was recorded.
//!
//! `cargo run -p keylatch --features metrics --example prometheus` (REDIS_URL or
//! KEYLATCH_REDIS_URL names the server). In a service, serve the rendered text on `/metrics`
//! (or use the exporter's own HTTP listener, its `http-listener` feature).
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prometheus = PrometheusBuilder::new().install_recorder()?;
    let client = keylatch::Client::connect_from_env().await?;
    let lock = client.lock("prometheus-example");
    for _ in 0..5 {
        let guard = lock.lock().await?;
        tokio::time::sleep(Duration::from_millis(10)).await;
        guard.unlock().await?;
    }
    // A wait that gives up: counted with outcome="timed_out".
    let held = lock.lock().await?;
    let none = lock.try_lock_for(Duration::from_millis(50), None).await?;
    assert!(none.is_none());
    held.unlock().await?;
    client.shutdown().await?;

    let text = prometheus.render();
    println!("{text}");
    for metric in [
        "keylatch_acquisitions_total",
        "keylatch_wait_seconds",
        "keylatch_hold_seconds",
        "keylatch_round_trips_total",
    ] {
        if !text.contains(metric) {
            return Err(format!("{metric} was not recorded").into());
        }
    }
    println!("ok: keylatch's metrics reach a Prometheus exporter");
    Ok(())
}
