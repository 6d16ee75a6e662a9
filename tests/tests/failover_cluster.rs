//! Failover safety on a Redis Cluster: worker processes take one lock in a loop, with replica
//! acknowledgement from the lock's primary's replica, while that primary is forced to fail
//! over again and again (`CLUSTER FAILOVER` on its replica). The exclusion checker (validity windows from every worker's log, and a fenced
//! oracle counter on a separate server) finds 0 overlapping holds, and every call ends.
//!
//! 2 forced failovers by default; 20 with `scripts/test.sh --full` (`KEYLATCH_FULL=1`).
use std::time::{Duration, Instant};

use keylatch_testkit::RedisCluster;
use keylatch_tests::checker;
use keylatch_tests::server;
use keylatch_tests::workers::{Worker, args};

const WORKER: &str = env!("CARGO_BIN_EXE_keylatch-test-fault-worker");
const WORKERS: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_overlapping_holds_across_forced_cluster_failovers_with_replica_acknowledgement() {
    let failovers = if std::env::var_os("KEYLATCH_FULL").is_some() {
        20
    } else {
        2
    };
    let set = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster");
    let oracle = server();
    let name = "app:failover-job";
    // Long enough for every failover; the workers stop on their own afterwards.
    let run = Duration::from_millis(4000 + 1500 * failovers);
    let workers: Vec<Worker> = (0..WORKERS)
        .map(|id| {
            let pairs = [
                ("url", set.seed_url()),
                ("oracle", oracle.url()),
                ("name", name.to_owned()),
                ("id", id.to_string()),
                ("watchdog-ms", "2000".to_owned()),
                ("response-timeout-ms", "2000".to_owned()),
                ("poll-ms", "200".to_owned()),
                ("hold-ms", "5".to_owned()),
                ("replicas", "1".to_owned()),
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
            let primary = set.node_for_key(name).expect("the lock's primary");
            let replica = set.replicas_of(primary).expect("its replica")[0];
            switches.push(set.failover(replica).expect("failover"));
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

/// The documented risk and its remedy on a cluster: the lock's replica misses the write (it is
/// paused and its link cut), the primary dies, the replica is promoted. With acknowledgement,
/// the first acquisition fails and leaves nothing; without, a second client acquires the
/// lock the first still holds, and the first is told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_the_replica_missed_is_refused_with_acknowledgement_and_lost_without() {
    use keylatch::{Client, Config, Error};
    let mut cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster");
    let seed_url = cluster.seed_url();
    let connect = |replicas: u32| {
        let mut builder = Config::builder()
            .url(seed_url.clone())
            .response_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(2));
        if replicas > 0 {
            builder = builder.replicas(replicas, Duration::from_millis(300));
        }
        Client::connect_with(builder.build().unwrap())
    };
    let acked = connect(1).await.unwrap();
    let plain = connect(0).await.unwrap();
    let name = "app:cluster-risk";
    let primary_port = cluster.node_for_key(name).unwrap().port();
    let replica_port = {
        let primary = cluster.node_for_key(name).unwrap();
        cluster.replicas_of(primary).unwrap()[0].port()
    };
    cluster.node_mut(replica_port).unwrap().pause().unwrap();

    // With acknowledgement: refused, and nothing left behind.
    let started = Instant::now();
    let err = acked.lock(name).lock().await.unwrap_err();
    println!("with acknowledgement: {err} after {:?}", started.elapsed());
    assert!(
        matches!(
            err,
            Error::NotReplicated {
                acknowledged: 0,
                wanted: 1,
                ..
            }
        ),
        "{err:?}"
    );
    let free = plain
        .lock(name)
        .try_lock()
        .await
        .unwrap()
        .expect("nothing left");
    free.unlock().await.unwrap();

    // Without: the primary drops the paused replica's link (bytes in its socket would still
    // reach it later), takes the hold, and dies; the replica is promoted without it.
    cluster
        .node_for_key(name)
        .unwrap()
        .cli(&["CLIENT", "KILL", "TYPE", "replica"])
        .unwrap();
    let first = plain.lock(name).lock().await.unwrap();
    cluster.node_mut(primary_port).unwrap().kill();
    cluster.node_mut(replica_port).unwrap().resume().unwrap();
    let killed = Instant::now();
    let cluster = tokio::task::spawn_blocking(move || {
        cluster
            .wait_ok(Duration::from_secs(30))
            .expect("the replica takes over");
        cluster
    })
    .await
    .unwrap();
    println!(
        "primary killed: its replica took over after {:?}",
        killed.elapsed()
    );
    assert_eq!(cluster.node_for_key(name).unwrap().port(), replica_port);
    let second = connect(0).await.unwrap();
    let taken = second
        .lock(name)
        .try_lock()
        .await
        .unwrap()
        .expect("the promoted replica never had the first hold");
    println!("without acknowledgement: a second client acquired the lock the first still holds");
    let told = tokio::time::timeout(Duration::from_secs(15), first.lost()).await;
    assert!(told.is_ok(), "the first holder's guard reports the loss");
    println!("the first holder's lost() fired");
    taken.unlock().await.unwrap();
    drop(first);
    for client in [acked, plain, second] {
        let _ = tokio::time::timeout(Duration::from_secs(10), client.shutdown()).await;
    }
}
