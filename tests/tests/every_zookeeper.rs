//! The shared every-primitive suites on ZooKeeper, through the facade on a `zk://` client
//! (one standalone server from the testkit): every primitive holds, makes a waiter wait and
//! hands over; exclusion across processes; the fair lock's FIFO order; a writer is not starved
//! by readers; a semaphore of N never has more than N holders; a cancellation storm leaves no
//! node behind.
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use keylatch::Client;
use keylatch::redis::AsyncCommands;
use keylatch_testkit::ZooKeeperServer;
use keylatch_tests::every::{cancellation_storm, exercise_every_primitive, zookeeper_names};
use keylatch_tests::workers::{Worker, args};
use keylatch_tests::zk::children;
use keylatch_tests::{checker, eventually, raw, server, unique};
use zookeeper_client as zk;

const WORKER: &str = env!("CARGO_BIN_EXE_keylatch-test-fault-worker");

fn zookeeper() -> &'static ZooKeeperServer {
    keylatch_tests::zk::server()
}

fn zk_url() -> String {
    keylatch_tests::zk::url()
}

async fn zk_client() -> Client {
    Client::connect(&zk_url())
        .await
        .expect("connect to ZooKeeper")
}

/// Every contender node left under the locks of `names` (a semaphore's `leases` and `locks`
/// directories are looked into), read through a raw session.
async fn nodes_left(names: &[String]) -> Vec<String> {
    let raw = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(&zookeeper().connect_string())
        .await
        .expect("raw connect");
    let mut left = Vec::new();
    for name in names {
        let path = format!("/keylatch/{name}");
        for child in children(&raw, &path).await {
            if child == "leases" || child == "locks" {
                let dir = format!("{path}/{child}");
                for node in children(&raw, &dir).await {
                    left.push(format!("{dir}/{node}"));
                }
            } else {
                left.push(format!("{path}/{child}"));
            }
        }
    }
    left
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_primitive_holds_makes_a_waiter_wait_and_hands_over() {
    let (holder, waiter) = (zk_client().await, zk_client().await);
    let name = unique("every-zk");
    let ran = exercise_every_primitive(&holder, &waiter, &name).await;
    // Reentrant, fair, read behind a writer, write, semaphore, permit-expirable semaphore.
    assert_eq!(ran, 6, "every primitive on ZooKeeper passed");
    holder.wait_idle().await;
    waiter.wait_idle().await;
    let left = nodes_left(&zookeeper_names(&name)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
    holder.shutdown().await.unwrap();
    waiter.shutdown().await.unwrap();
}

/// `workers` fault-worker processes on `name` in `mode` (extra flags in `extra`), each taking
/// it `iterations` times and holding `hold_ms`; their events, all workers' together, once each
/// exited successfully.
async fn run_workers(
    oracle: &keylatch_tests::RedisServer,
    name: &str,
    mode: &str,
    workers: u64,
    extra: &[(&str, String)],
) -> Vec<checker::Event> {
    let mut running = Vec::new();
    for id in 0..workers {
        let mut pairs = vec![
            ("url", zk_url()),
            ("oracle", oracle.url()),
            ("name", name.to_owned()),
            ("id", id.to_string()),
            ("mode", mode.to_owned()),
        ];
        pairs.extend(extra.iter().cloned());
        running.push(Worker::spawn(WORKER, &args(&pairs, &[])));
    }
    let mut events = Vec::new();
    for worker in running {
        let (status, mut more) = worker.finish(Duration::from_secs(120)).await;
        assert!(
            status.is_some_and(|s| s.success()),
            "{mode}: a worker failed: {status:?}, {more:?}"
        );
        assert_eq!(checker::count(&more, "error"), 0, "{mode}: {more:?}");
        assert_eq!(checker::count(&more, "done"), 1, "{mode}: {more:?}");
        events.append(&mut more);
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_lock_excludes_across_processes() {
    const WORKERS: u64 = 3;
    const ITERATIONS: u64 = 15;
    let oracle = server();
    let mut conn = raw(&oracle).await;
    for mode in ["reentrant", "fair", "write"] {
        let name = unique(&format!("every-zk-procs-{mode}"));
        let extra = [
            ("iterations", ITERATIONS.to_string()),
            ("hold-ms", "2".to_owned()),
        ];
        let events = run_workers(&oracle, &name, mode, WORKERS, &extra).await;
        let windows = checker::windows(&events);
        let overlaps = checker::overlaps(&windows);
        let accepted = checker::accepted_writes(&events);
        // Each critical section read the counter and wrote it plus one: an overlap loses one.
        let counter: Option<u64> = conn.get(format!("{name}:counter")).await.unwrap();
        println!(
            "{mode}: {} critical sections in {WORKERS} processes, {overlaps} overlaps, \
             {accepted} fenced writes accepted, counter {counter:?}",
            windows.len()
        );
        let total = usize::try_from(WORKERS * ITERATIONS).unwrap();
        assert_eq!(windows.len(), total, "{mode}: every section ran");
        assert_eq!(overlaps, 0, "{mode}: two processes held it at once");
        assert!(
            checker::tokens_strictly_increase(&windows),
            "{mode}: the creation zxids did not increase in acquisition order"
        );
        assert_eq!(accepted, total, "{mode}: a fenced write was refused");
        assert_eq!(
            counter,
            Some(WORKERS * ITERATIONS),
            "{mode}: an increment was lost"
        );
        let left = nodes_left(&[name]).await;
        assert!(left.is_empty(), "{mode}: left behind: {left:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_of_n_never_has_more_than_n_holders_across_processes() {
    const PERMITS: usize = 2;
    const WORKERS: u64 = 4;
    const ITERATIONS: u64 = 10;
    let oracle = server();
    let name = unique("every-zk-permits");
    let extra = [
        ("iterations", ITERATIONS.to_string()),
        ("hold-ms", "20".to_owned()),
        ("permits", PERMITS.to_string()),
    ];
    let events = run_workers(&oracle, &name, "zk-permit", WORKERS, &extra).await;
    let windows = checker::windows(&events);
    let most = checker::max_concurrent(&windows);
    println!(
        "{} permits taken by {WORKERS} processes, at most {most} at once (limit {PERMITS})",
        windows.len()
    );
    assert_eq!(
        windows.len(),
        usize::try_from(WORKERS * ITERATIONS).unwrap()
    );
    assert!(
        most <= PERMITS,
        "{most} holders of a semaphore of {PERMITS}"
    );
    let left = nodes_left(&[name]).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_lock_waiters_get_it_in_the_order_they_queued() {
    const WAITERS: usize = 6;
    const ROUNDS: usize = 5;
    let clients = [zk_client().await, zk_client().await, zk_client().await];
    let zookeeper = clients[0].as_zookeeper().unwrap().clone();
    let name = unique("every-zk-fifo");
    let queued = |n: usize| {
        let (zookeeper, name) = (zookeeper.clone(), name.clone());
        async move { zookeeper.contenders(&name, 0).await.unwrap().nodes.len() == n }
    };
    for round in 0..ROUNDS {
        let holder = clients[0].fair_lock(&name).lock().await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let inside = Arc::new(AtomicI64::new(0));
        let mut tasks = Vec::new();
        for i in 0..WAITERS {
            let lock = clients[i % clients.len()].fair_lock(&name);
            let (order, inside) = (order.clone(), inside.clone());
            tasks.push(tokio::spawn(async move {
                let guard = lock.lock().await.expect("the fair lock");
                let others = inside.fetch_add(1, Ordering::SeqCst);
                order.lock().unwrap().push((i, others));
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await.unwrap();
            }));
            // The next waiter arrives only once this one's node is in the queue.
            let in_queue = eventually(Duration::from_secs(10), || queued(i + 2)).await;
            assert!(in_queue, "round {round}: waiter {i} did not queue");
        }
        holder.unlock().await.unwrap();
        for task in tasks {
            task.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        println!("round {round}: (waiter, others inside) in acquisition order: {order:?}");
        assert!(
            order.iter().all(|(_, others)| *others == 0),
            "round {round}: two waiters held it at once: {order:?}"
        );
        let got: Vec<usize> = order.iter().map(|(i, _)| *i).collect();
        assert_eq!(
            got,
            (0..WAITERS).collect::<Vec<_>>(),
            "round {round}: not FIFO"
        );
    }
    let left = nodes_left(&[name]).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_writer_holds_back_new_readers() {
    let clients = [zk_client().await, zk_client().await];
    let name = unique("every-zk-writer-first");
    let reader = clients[0].rw_lock(&name).read().await.unwrap();
    let writer = clients[1].rw_lock(&name).write_lock();
    let writing = tokio::spawn(async move { writer.lock().await });
    let zookeeper = clients[0].as_zookeeper().unwrap();
    let waiting = eventually(Duration::from_secs(10), || async {
        let contenders = zookeeper.contenders(&name, 0).await.unwrap();
        contenders.nodes.iter().any(|node| node.kind == "write")
    })
    .await;
    assert!(waiting, "the writer did not queue");
    // A reader arriving after the writer waits behind it, on either client.
    for client in &clients {
        let late = client.rw_lock(&name).try_read().await.unwrap();
        assert!(
            late.is_none(),
            "a new reader got in ahead of the waiting writer"
        );
    }
    assert!(
        !writing.is_finished(),
        "the writer got in while a reader held"
    );
    reader.unlock().await.unwrap();
    let written = writing.await.unwrap().unwrap();
    written.unlock().await.unwrap();
    let late = clients[0].rw_lock(&name).try_read().await.unwrap();
    assert!(late.is_some(), "readers get in once the writer is gone");
    late.unwrap().unlock().await.unwrap();
    let left = nodes_left(&[name]).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_in_tight_loops_do_not_starve_a_writer() {
    const READERS: usize = 6;
    /// A liveness bound, not a speed check: the writer waits for the readers ahead of it only.
    const WRITER_BOUND: Duration = Duration::from_secs(30);
    let clients = [zk_client().await, zk_client().await];
    let name = unique("every-zk-starve");
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicI64::new(0));
    let mut readers = Vec::new();
    for i in 0..READERS {
        let rw = clients[i % 2].rw_lock(&name);
        let (stop, reads, inside) = (stop.clone(), reads.clone(), inside.clone());
        readers.push(tokio::spawn(async move {
            for _ in 0..100_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let guard = rw.read().await.expect("read");
                reads.fetch_add(1, Ordering::SeqCst);
                inside.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await.expect("read unlock");
            }
        }));
    }
    let warm = eventually(Duration::from_secs(20), || async {
        reads.load(Ordering::SeqCst) >= 100
    })
    .await;
    assert!(warm, "the readers did not get going");
    let reads_before = reads.load(Ordering::SeqCst);
    let guard = clients[0]
        .rw_lock(&name)
        .write_lock()
        .try_lock_for(WRITER_BOUND, None)
        .await
        .expect("write")
        .unwrap_or_else(|| panic!("the writer starved: not in within {WRITER_BOUND:?}"));
    let granted_meanwhile = reads.load(Ordering::SeqCst) - reads_before;
    let readers_inside = inside.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let readers_inside_later = inside.load(Ordering::SeqCst);
    let granted_while_writing = reads.load(Ordering::SeqCst) - reads_before - granted_meanwhile;
    guard.unlock().await.expect("write unlock");
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.await.expect("reader");
    }
    println!(
        "{READERS} readers in tight loops ({} reads): {granted_meanwhile} reads granted while \
         the writer waited",
        reads.load(Ordering::SeqCst)
    );
    assert_eq!(readers_inside, 0, "a reader was inside with the writer");
    assert_eq!(readers_inside_later, 0, "a reader got in while writing");
    assert_eq!(granted_while_writing, 0, "a read was granted while writing");
    // Each reader may have had one read in flight when the writer queued; after that, new
    // readers wait behind it.
    assert!(
        granted_meanwhile <= 2 * READERS as u64,
        "{granted_meanwhile} reads were granted while the writer waited"
    );
    let left = nodes_left(&[name]).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancellation_storm_leaves_no_node_behind() {
    let (holder, storm) = (zk_client().await, zk_client().await);
    let names: Vec<String> = (0..3).map(|_| unique("every-zk-storm")).collect();
    let tally = cancellation_storm(&holder, &storm, &names, &[]).await;
    assert!(tally.finished.is_empty(), "{:?}", tally.finished);
    // Ten rounds over the six primitives of each name (both semaphores included).
    assert_eq!(tally.cancelled, names.len() * 10 * 6);
    let all: Vec<String> = names.iter().flat_map(|n| zookeeper_names(n)).collect();
    let left = nodes_left(&all).await;
    assert!(left.is_empty(), "left behind: {left:?}");
    holder.shutdown().await.unwrap();
    storm.shutdown().await.unwrap();
}
