//! Failover safety on a sentinel set: worker processes take one lock in a loop, with replica
//! acknowledgement from both replicas, while the sentinels are forced to fail over again and
//! again. The exclusion checker (validity windows from every worker's log, and a fenced
//! oracle counter on a separate server) finds 0 overlapping holds, and every call ends.
//!
//! 2 forced failovers by default; 20 with `scripts/test.sh --full` (`KEYLATCH_FULL=1`).
use std::time::{Duration, Instant};

use keylatch_testkit::SentinelSet;
use keylatch_tests::checker;
use keylatch_tests::server;
use keylatch_tests::workers::{Worker, args};

const WORKER: &str = env!("CARGO_BIN_EXE_keylatch-test-fault-worker");
const WORKERS: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_overlapping_holds_across_forced_failovers_with_replica_acknowledgement() {
    let failovers = if std::env::var_os("KEYLATCH_FULL").is_some() {
        20
    } else {
        2
    };
    let set = tokio::task::spawn_blocking(SentinelSet::start)
        .await
        .unwrap()
        .expect("start a sentinel set");
    let oracle = server();
    let name = "app:failover-job";
    // Long enough for every failover; the workers stop on their own afterwards.
    let run = Duration::from_secs(5 + 6 * failovers);
    let workers: Vec<Worker> = (0..WORKERS)
        .map(|id| {
            let pairs = [
                ("url", set.url()),
                ("oracle", oracle.url()),
                ("name", name.to_owned()),
                ("id", id.to_string()),
                ("watchdog-ms", "2000".to_owned()),
                ("response-timeout-ms", "2000".to_owned()),
                ("poll-ms", "200".to_owned()),
                ("hold-ms", "5".to_owned()),
                ("replicas", "2".to_owned()),
                ("replicas-timeout-ms", "500".to_owned()),
                ("run-ms", run.as_millis().to_string()),
            ];
            Worker::spawn(WORKER, &args(&pairs, &[]))
        })
        .collect();
    for worker in &workers {
        assert!(
            worker
                .wait_for(Duration::from_secs(20), |e| e["ev"] == "ready")
                .await
                .is_some(),
            "a worker did not start"
        );
    }

    let started = Instant::now();
    let (set, switches) = tokio::task::spawn_blocking(move || {
        let mut switches = Vec::new();
        for _ in 0..failovers {
            std::thread::sleep(Duration::from_millis(500));
            switches.push(set.failover().expect("failover"));
        }
        (set, switches)
    })
    .await
    .unwrap();
    let mut sorted = switches.clone();
    sorted.sort();
    println!(
        "{failovers} forced failovers in {:?}; switch p50 {:?}, max {:?}",
        started.elapsed(),
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1]
    );

    let mut events = Vec::new();
    for worker in workers {
        let (status, mut worker_events) = worker.finish(run + Duration::from_secs(30)).await;
        assert!(
            worker_events.iter().any(|e| e["ev"] == "done"),
            "a worker did not finish ({status:?}): every call ends"
        );
        events.append(&mut worker_events);
    }
    let windows = checker::windows(&events);
    let overlaps = checker::overlaps(&windows);
    let errors: Vec<&serde_json::Value> = events.iter().filter(|e| e["ev"] == "error").collect();
    let not_replicated = errors
        .iter()
        .filter(|e| e["error"].as_str().is_some_and(|m| m.contains("replica")))
        .count();
    println!(
        "{} holds by {WORKERS} workers, {} fenced writes accepted, {overlaps} overlapping holds; \
         {} acquire errors ({not_replicated} not acknowledged by the replicas), {} losses seen",
        windows.len(),
        checker::accepted_writes(&events),
        errors.len(),
        events
            .iter()
            .filter(|e| e["ev"] == "check" && e["lost"] == true)
            .count()
    );
    assert!(windows.len() > 10, "the workers made progress");
    assert_eq!(overlaps, 0, "two workers held the lock at once");
    assert_eq!(
        checker::accepted_writes(&events),
        events.iter().filter(|e| e["ev"] == "write").count(),
        "the fenced oracle refused a write: a stale holder wrote"
    );
    // The oracle counter counts every accepted increment exactly once.
    let counter = oracle.cli(&["GET", &format!("{name}:counter")]).unwrap();
    println!("oracle counter {counter}");
    assert_eq!(
        counter.parse::<usize>().unwrap_or(0),
        checker::accepted_writes(&events),
        "an increment was lost: two holders read the same value"
    );
    drop(set);
}
