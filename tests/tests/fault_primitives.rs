//! Fault suite, primitive scenarios: worker processes killed while queued on the fair lock,
//! while holding a read lock, while holding permits.
use std::time::Duration;

use keylatch_tests::checker;
use keylatch_tests::workers::{Worker, args};
use keylatch_tests::{client, server, unique};
use tokio::time::Instant;

const WORKER: &str = env!("CARGO_BIN_EXE_keylatch-test-fault-worker");

fn worker(
    server: &keylatch_tests::RedisServer,
    oracle: &keylatch_tests::RedisServer,
    name: &str,
    id: u64,
    extra: &[(&str, &str)],
    flags: &[&str],
) -> Worker {
    let mut pairs = vec![
        ("url", server.url()),
        ("oracle", oracle.url()),
        ("name", name.to_owned()),
        ("id", id.to_string()),
        ("watchdog-ms", "1000".to_owned()),
        ("poll-ms", "200".to_owned()),
    ];
    pairs.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    Worker::spawn(WORKER, &args(&pairs, flags))
}

/// 10. Fair lock: the queue's head waiter is SIGKILLed; the queue moves on within
/// waiter_timeout + 1 s and the others keep their order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s10_fair_head_waiter_killed() {
    let server = server();
    let oracle = keylatch_tests::server();
    let name = unique("s10");
    let client = client(&server).await;
    let lock = client.fair_lock(&name);
    let holder = lock.lock().await.unwrap();
    let waiter_timeout = Duration::from_millis(1000);
    let mut workers = Vec::new();
    for id in 0..3 {
        workers.push(worker(
            &server,
            &oracle,
            &name,
            id,
            &[
                ("mode", "fair"),
                ("iterations", "1"),
                ("hold-ms", "50"),
                ("waiter-timeout-ms", "1000"),
            ],
            &[],
        ));
        let queued = keylatch_tests::eventually(Duration::from_secs(20), || async {
            lock.queue().await.unwrap().len() > id as usize
        })
        .await;
        assert!(queued, "waiter {id} never queued");
    }
    workers[0].signal("KILL");
    let killed = Instant::now();
    let killed_us = keylatch_tests::now_us();
    holder.unlock().await.unwrap();
    let mut acquired = Vec::new();
    for w in workers.drain(1..) {
        let (status, events) = w.finish(Duration::from_secs(30)).await;
        assert!(status.is_some_and(|s| s.success()));
        let t = events
            .iter()
            .find(|e| e["ev"] == "acquired")
            .and_then(|e| e["t"].as_u64())
            .expect("acquired");
        acquired.push(u128::from(t));
    }
    let moved_on = acquired[0].saturating_sub(killed_us);
    println!(
        "s10: the next waiter acquired {} ms after the head was killed (bound {} ms)",
        moved_on / 1000,
        (waiter_timeout + Duration::from_secs(1)).as_millis()
    );
    assert!(
        moved_on <= (waiter_timeout + Duration::from_secs(1)).as_micros(),
        "the queue did not move on in time"
    );
    assert!(
        acquired[0] < acquired[1],
        "the surviving waiters lost their order"
    );
    assert!(killed.elapsed() < Duration::from_secs(30));
    assert!(
        lock.queue().await.unwrap().is_empty(),
        "the dead waiter stayed in the queue"
    );
}

/// 11. Read-write lock: a reader SIGKILLed while holding; a writer gets in within lease + 1 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_reader_killed() {
    let server = server();
    let oracle = keylatch_tests::server();
    let name = unique("s11");
    let reader = worker(
        &server,
        &oracle,
        &name,
        0,
        &[("mode", "read")],
        &["hold-forever"],
    );
    reader
        .wait_for(Duration::from_secs(20), |e| e["ev"] == "check")
        .await
        .expect("the reader holds");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    reader.signal("KILL");
    let killed = Instant::now();
    let client = client(&server).await;
    let guard = client
        .rw_lock(&name)
        .write_lock()
        .try_lock_for(Duration::from_millis(2000), None)
        .await
        .unwrap();
    println!(
        "s11: writer acquired {:?} after the reader's SIGKILL (bound 2 s)",
        killed.elapsed()
    );
    assert!(guard.is_some(), "no writer within lease + 1 s");
    let _ = reader.finish(Duration::from_secs(5)).await;
}

/// 12. Permit-expirable semaphore, P = 2: both holders SIGKILLed; their permits return within
/// lease + 1 s, and never more than P holders are valid at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s12_permit_holders_killed() {
    let server = server();
    let oracle = keylatch_tests::server();
    let name = unique("s12");
    let permit = [("mode", "permit"), ("permits", "2")];
    let holders: Vec<Worker> = (0..2)
        .map(|id| worker(&server, &oracle, &name, id, &permit, &["hold-forever"]))
        .collect();
    for h in &holders {
        h.wait_for(Duration::from_secs(20), |e| e["ev"] == "check")
            .await
            .expect("a holder holds");
    }
    let mut extra = permit.to_vec();
    extra.extend([("iterations", "1"), ("hold-ms", "100")]);
    let waiters: Vec<Worker> = (2..4)
        .map(|id| worker(&server, &oracle, &name, id, &extra, &[]))
        .collect();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    for w in &waiters {
        assert!(
            w.events().iter().all(|e| e["ev"] != "acquired"),
            "a third holder got a permit"
        );
    }
    let killed_us = keylatch_tests::now_us();
    for h in &holders {
        h.signal("KILL");
    }
    let mut events = Vec::new();
    for h in holders {
        events.extend(h.finish(Duration::from_secs(5)).await.1);
    }
    let mut windows = checker::held_windows(&events);
    let mut slowest = 0;
    for w in waiters {
        let (status, evs) = w.finish(Duration::from_secs(30)).await;
        assert!(status.is_some_and(|s| s.success()));
        let t = evs
            .iter()
            .find(|e| e["ev"] == "acquired")
            .and_then(|e| e["t"].as_u64())
            .expect("acquired");
        slowest = slowest.max(u128::from(t).saturating_sub(killed_us));
        windows.extend(checker::windows(&evs));
    }
    let max = checker::max_concurrent(&windows);
    println!(
        "s12: permits back {} ms after the kill (bound 2000 ms); at most {max} holders at once (P = 2)",
        slowest / 1000
    );
    assert!(
        slowest <= 2_000_000,
        "permits were not reclaimed within lease + 1 s"
    );
    assert!(max <= 2, "more than P holders were valid at once");
}
