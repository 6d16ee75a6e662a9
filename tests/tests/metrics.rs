//! With the `metrics` feature, acquisitions (by primitive and outcome), wait and hold times,
//! renewals, lost holds and round trips reach whatever recorder the application installed.
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch_tests::{client_with, raw, server, unique};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_waits_holds_renewals_and_losses_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();

    let server = server();
    let client = client_with(
        &server,
        Duration::from_millis(600),
        Duration::from_millis(100),
    )
    .await;
    let lock = client.lock(&unique("metered"));
    let first = lock.lock().await.unwrap();
    assert!(
        lock.try_lock_for(Duration::from_millis(50), None)
            .await
            .unwrap()
            .is_none()
    );
    first.unlock().await.unwrap();
    let permit = client.permit_expirable_semaphore(&unique("metered-sem"));
    permit.try_set_permits(1).await.unwrap();
    permit.acquire().await.unwrap().release().await.unwrap();
    // A hold that is lost: its key is deleted, the next renewal finds it gone.
    let name = unique("metered-lost");
    let doomed = client.lock(&name).lock().await.unwrap();
    let _: () = raw(&server).await.del(&name).await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), doomed.lost())
        .await
        .unwrap();
    drop(doomed);
    client.wait_idle().await;

    let mut counters = std::collections::HashMap::new();
    let mut histograms = std::collections::HashMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let (kind, key) = key.into_parts();
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let id = format!("{} {}", key.name(), labels.join(","));
        let _ = kind;
        match value {
            DebugValue::Counter(n) => {
                counters.insert(id, n);
            }
            DebugValue::Histogram(samples) => {
                histograms.insert(id, samples.len());
            }
            DebugValue::Gauge(_) => {}
        }
    }
    println!("counters: {counters:#?}\nhistograms: {histograms:#?}");
    let counter = |id: &str| counters.get(id).copied().unwrap_or(0);
    assert!(counter("keylatch_acquisitions_total primitive=reentrant,outcome=acquired") >= 2);
    assert_eq!(
        counter("keylatch_acquisitions_total primitive=reentrant,outcome=timed_out"),
        1
    );
    assert_eq!(
        counter("keylatch_acquisitions_total primitive=expirable_semaphore,outcome=acquired"),
        1
    );
    assert!(counter("keylatch_holds_lost_total ") >= 1);
    assert!(counter("keylatch_renewals_total outcome=gone") >= 1);
    assert!(counter("keylatch_round_trips_total ") > 5);
    assert!(
        histograms
            .get("keylatch_wait_seconds primitive=reentrant")
            .copied()
            .unwrap_or(0)
            >= 3
    );
    assert!(
        histograms
            .get("keylatch_hold_seconds ")
            .copied()
            .unwrap_or(0)
            >= 3
    );
}
