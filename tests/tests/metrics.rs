//! With the `metrics` feature, acquisitions (by primitive and outcome), wait and hold times,
//! renewals, lost holds and round trips reach whatever recorder the application installed.
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch_tests::{client_via, client_with, pause, raw, server, unique};
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
    // A fair lock taken at the first try, then by a waiter after its holder released it.
    let fair = client.fair_lock(&unique("metered-fair"));
    let held = fair.lock().await.unwrap();
    let waiting = tokio::spawn({
        let fair = fair.clone();
        async move { fair.lock().await }
    });
    let queued = keylatch_tests::eventually(Duration::from_secs(5), || async {
        fair.queue().await.unwrap().len() == 1
    })
    .await;
    assert!(queued, "the fair lock's waiter queued");
    held.unlock().await.unwrap();
    waiting.await.unwrap().unwrap().unlock().await.unwrap();
    // A hold kept over renewals (a third of the 600 ms watchdog): renewed.
    let kept = client.lock(&unique("metered-kept")).lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!kept.is_lost());
    kept.unlock().await.unwrap();
    // The server answers nothing for longer than a client's response timeout: its renewals
    // fail, and the hold is lost once its deadline passes unrenewed.
    let impatient = client_via(
        server.url(),
        Duration::from_millis(600),
        Duration::from_millis(100),
    )
    .await;
    let unrenewed = impatient
        .lock(&unique("metered-unrenewed"))
        .lock()
        .await
        .unwrap();
    pause(&mut raw(&server).await, 1500).await;
    tokio::time::timeout(Duration::from_secs(5), unrenewed.lost())
        .await
        .expect("the unrenewed hold is lost");
    // The watchdog reports the loss, and forgets the hold, at its next tick (a guard dropped
    // before that would deregister the hold first).
    let forgotten = keylatch_tests::eventually(Duration::from_secs(5), || async {
        impatient.stats().watchdog.holds == 0
    })
    .await;
    assert!(forgotten, "the watchdog dropped the lost hold");
    drop(unrenewed);
    impatient.wait_idle().await;
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
    assert_eq!(
        counter("keylatch_acquisitions_total primitive=fair,outcome=acquired"),
        1
    );
    assert_eq!(
        counter("keylatch_acquisitions_total primitive=fair,outcome=acquired_after_waiting"),
        1
    );
    assert!(counter("keylatch_renewals_total outcome=renewed") >= 1);
    assert!(counter("keylatch_renewals_total outcome=failed") >= 1);
    assert!(counter("keylatch_holds_lost_total ") >= 2);
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
