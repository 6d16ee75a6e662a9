//! Exclusion sweep: 6 readers and 2 writers on two clients, in loops. A writer's critical
//! section sets a marker with a check-and-set (`SET NX` on an independent key: a second writer
//! inside would find it set) and checks that no reader is inside (an independent counter that
//! readers `INCR` on entry and `DECR` on exit). A reader checks that the marker is absent.
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use keylatch::redis::{self, AsyncCommands};
use keylatch_tests::{client, raw, server, unique};

const READERS: usize = 6;
const WRITERS: usize = 2;
const READS_EACH: u64 = 300;
const WRITES_EACH: u64 = 60;

#[derive(Default)]
struct Tally {
    violations: AtomicU64,
    max_readers: AtomicI64,
    reads: AtomicU64,
    writes: AtomicU64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_readers_and_two_writers_on_two_clients_never_overlap() {
    let server = server();
    let clients = [client(&server).await, client(&server).await];
    let name = unique("rw-exclusion");
    let inside = format!("{name}-readers-inside");
    let marker = format!("{name}-writer-marker");
    let tally = Arc::new(Tally::default());
    let started = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for i in 0..READERS {
        let rw = clients[i % 2].rw_lock(&name);
        let mut conn = raw(&server).await;
        let (inside, marker, tally) = (inside.clone(), marker.clone(), tally.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..READS_EACH {
                let guard = rw.read().await.expect("read");
                let now_inside: i64 = conn.incr(&inside, 1).await.expect("incr");
                tally.max_readers.fetch_max(now_inside, Ordering::Relaxed);
                tokio::task::yield_now().await;
                let writer_inside: bool = conn.exists(&marker).await.expect("exists");
                if writer_inside {
                    eprintln!("violation: a reader saw the writer's marker");
                    tally.violations.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                let _: i64 = conn.decr(&inside, 1).await.expect("decr");
                tally.reads.fetch_add(1, Ordering::Relaxed);
                guard.unlock().await.expect("read unlock");
            }
        }));
    }
    for i in 0..WRITERS {
        let rw = clients[i % 2].rw_lock(&name);
        let mut conn = raw(&server).await;
        let (inside, marker, tally) = (inside.clone(), marker.clone(), tally.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..WRITES_EACH {
                let guard = rw.write().await.expect("write");
                let set: Option<String> = redis::cmd("SET")
                    .arg(&marker)
                    .arg("writer")
                    .arg("NX")
                    .query_async(&mut conn)
                    .await
                    .expect("set nx");
                if set.is_none() {
                    eprintln!("violation: two writers inside");
                    tally.violations.fetch_add(1, Ordering::Relaxed);
                }
                tokio::task::yield_now().await;
                let readers: Option<i64> = conn.get(&inside).await.expect("get");
                if readers.unwrap_or(0) != 0 {
                    eprintln!("violation: a writer found {readers:?} readers inside");
                    tally.violations.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                let _: () = conn.del(&marker).await.expect("del");
                tally.writes.fetch_add(1, Ordering::Relaxed);
                guard.unlock().await.expect("write unlock");
                // Refreshes are occasional: without a pause, two writers alternating would
                // keep readers out (the lock prefers writers).
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    let violations = tally.violations.load(Ordering::Relaxed);
    let max_readers = tally.max_readers.load(Ordering::Relaxed);
    println!(
        "{READERS} readers x {READS_EACH} + {WRITERS} writers x {WRITES_EACH} on 2 clients in \
         {:?}: {} reads, {} writes, {violations} violations, at most {max_readers} readers \
         inside at once",
        started.elapsed(),
        tally.reads.load(Ordering::Relaxed),
        tally.writes.load(Ordering::Relaxed),
    );
    assert_eq!(violations, 0, "readers and writers overlapped");
    assert_eq!(
        tally.reads.load(Ordering::Relaxed),
        READERS as u64 * READS_EACH
    );
    assert_eq!(
        tally.writes.load(Ordering::Relaxed),
        WRITERS as u64 * WRITES_EACH
    );
    assert!(
        max_readers > 1,
        "readers were never inside together: the lock excluded readers from each other"
    );
    let mut conn = raw(&server).await;
    let left: Vec<String> = conn.keys(format!("*{name}")).await.expect("keys");
    assert!(left.is_empty(), "keys left behind: {left:?}");
    let left: Vec<String> = conn.keys(format!("*{name}}}*")).await.expect("keys");
    assert!(left.is_empty(), "keys left behind: {left:?}");
    for c in &clients {
        c.wait_idle().await;
        assert_eq!(c.stats().watchdog.holds, 0);
    }
}
