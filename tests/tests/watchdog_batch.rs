//! The watchdog's batch size (`Config::watchdog_batch_size`, Redisson's
//! `lockWatchdogBatchSize`): seven holds renewed in calls of one and of three keys stay held
//! well past their lease, and each renewal round sends as many calls as the batch size implies.
use std::time::Duration;

use keylatch::{Client, Config};
use keylatch_testkit::RedisServer;

const HOLDS: u64 = 7;
const WATCHDOG: Duration = Duration::from_millis(600);

async fn renew_seven_holds(batch: usize) {
    let server = RedisServer::start().expect("start redis");
    renew_seven_holds_at(&server.url(), batch, true).await;
}

/// Seven holds renewed with `batch` keys per call at `url`; with `exact`, each round must
/// send `ceil(7 / batch)` calls (on one server: every hold shares it; on a cluster the calls
/// are grouped per slot first).
async fn renew_seven_holds_at(url: &str, batch: usize, exact: bool) {
    let config = Config::builder()
        .url(url)
        .watchdog_timeout(WATCHDOG)
        .watchdog_batch_size(batch)
        .build()
        .expect("config");
    let client = Client::connect_with(config).await.expect("connect");
    let other = Client::connect(url).await.expect("connect");
    let mut guards = Vec::new();
    for i in 0..HOLDS {
        guards.push(client.lock(&format!("app:batch-{i}")).lock().await.unwrap());
    }
    let before = client.stats().watchdog;
    // Five leases long: without renewals every hold would have expired four times over.
    tokio::time::sleep(WATCHDOG * 5).await;
    let per_round = HOLDS.div_ceil(batch as u64);
    // A round's calls are counted when they are sent and its keys when the replies arrive: a
    // reading between the two is taken again.
    let (mut calls, mut renewed) = (0, 0);
    for _ in 0..20 {
        let after = client.stats().watchdog;
        calls = after.renew_calls - before.renew_calls;
        renewed = after.renewed_keys - before.renewed_keys;
        if renewed * per_round == calls * HOLDS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!("batch {batch}: {calls} renewal calls renewed {renewed} keys");
    assert!(
        renewed >= 2 * HOLDS,
        "batch {batch}: only {renewed} keys renewed"
    );
    // Every round renews all seven in `per_round` calls (on a cluster, at least that many).
    if exact {
        assert_eq!(
            renewed * per_round,
            calls * HOLDS,
            "batch {batch}: {calls} calls for {renewed} keys"
        );
    } else {
        assert!(
            renewed * per_round <= calls * HOLDS,
            "batch {batch}: {calls} calls for {renewed} keys"
        );
    }
    for (i, guard) in guards.iter().enumerate() {
        assert!(!guard.is_lost(), "batch {batch}: hold {i} lost");
        let taken = other
            .lock(&format!("app:batch-{i}"))
            .try_lock()
            .await
            .unwrap();
        assert!(taken.is_none(), "batch {batch}: hold {i} expired");
    }
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    client.shutdown().await.unwrap();
    other.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_one_renews_seven_holds() {
    renew_seven_holds(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_three_renews_seven_holds() {
    renew_seven_holds(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_three_renews_seven_holds_on_a_cluster() {
    let cluster = tokio::task::spawn_blocking(keylatch_testkit::RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster");
    renew_seven_holds_at(&cluster.url(), 3, false).await;
}
