//! `loss_reason()` says why a hold was lost: a fixed lease that ran out, a hold the server no
//! longer has (deleted, force-unlocked), renewals that failed until the deadline (a paused
//! server), the client's shutdown, a server that restarted without persistence, a failover
//! to a replica that never had the hold (Sentinel, Cluster).
use std::time::{Duration, Instant};

use keylatch::LossReason;
use keylatch::redis::AsyncCommands;
use keylatch_testkit::{RedisCluster, SentinelSet};
use keylatch_tests::{client, client_via, client_with, raw, server, unique};

/// Correctness bound for a loss to be noticed: generous for a loaded 2-core machine.
const NOTICED: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_fixed_lease_that_ran_out_is_lease_expired() {
    let server = server();
    let client = client(&server).await;
    let guard = client
        .lock(&unique("reason-lease"))
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(guard.loss_reason(), None, "valid: no reason");
    tokio::time::timeout(NOTICED, guard.lost()).await.unwrap();
    assert_eq!(guard.loss_reason(), Some(LossReason::LeaseExpired));
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_deleted_key_is_gone() {
    let server = server();
    let client = client_with(&server, Duration::from_millis(600), Duration::from_secs(2)).await;
    let name = unique("reason-deleted");
    let guard = client.lock(&name).lock().await.unwrap();
    let _: () = raw(&server).await.del(&name).await.unwrap();
    tokio::time::timeout(NOTICED, guard.lost()).await.unwrap();
    assert_eq!(guard.loss_reason(), Some(LossReason::Gone));
    assert_eq!(
        guard.loss_reason().unwrap().to_string(),
        "the server no longer has it"
    );
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_force_unlock_by_another_client_is_gone() {
    let server = server();
    let client = client_with(&server, Duration::from_millis(600), Duration::from_secs(2)).await;
    let other = client_with(&server, Duration::from_millis(600), Duration::from_secs(2)).await;
    let name = unique("reason-forced");
    let guard = client.lock(&name).lock().await.unwrap();
    assert!(other.lock(&name).force_unlock().await.unwrap());
    tokio::time::timeout(NOTICED, guard.lost()).await.unwrap();
    assert_eq!(guard.loss_reason(), Some(LossReason::Gone));
    client.shutdown().await.unwrap();
    other.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_paused_server_is_renewal_failed() {
    let server = server();
    let watchdog = Duration::from_millis(900);
    let client = client_via(server.url(), watchdog, Duration::from_millis(200)).await;
    let guard = client.lock(&unique("reason-paused")).lock().await.unwrap();
    server.pause().unwrap();
    let lost = tokio::time::timeout(NOTICED, guard.lost()).await;
    let reason = guard.loss_reason();
    server.resume().unwrap();
    lost.expect("the hold is lost once renewals fail past its deadline");
    match reason {
        Some(LossReason::RenewalFailed { for_ }) => {
            assert!(for_ > Duration::ZERO, "renewals failed for {for_:?}");
            println!("renewals had failed for {for_:?}");
        }
        other => panic!("expected RenewalFailed, got {other:?}"),
    }
    assert!(
        reason
            .unwrap()
            .to_string()
            .starts_with("no renewal succeeded for ")
    );
    let _ = client.shutdown().await;
}

#[tokio::test]
async fn a_shutdown_with_a_live_guard_is_client_shutdown() {
    let server = server();
    let client = client(&server).await;
    let guard = client
        .lock(&unique("reason-shutdown"))
        .lock()
        .await
        .unwrap();
    client.shutdown().await.unwrap();
    assert!(guard.is_lost());
    assert_eq!(guard.loss_reason(), Some(LossReason::ClientShutdown));
}

/// Long enough for a restart or a failover to end before the hold's deadline, so its loss is
/// found by a renewal and not by a deadline.
const LONG_WATCHDOG: Duration = Duration::from_secs(30);
/// Correctness bound for a failover to be noticed (the sentinels' or the cluster's own
/// detection comes first).
const FAILED_OVER: Duration = Duration::from_secs(40);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_without_persistence_is_server_restarted() {
    let mut server = server();
    let client = client_via(server.url(), LONG_WATCHDOG, Duration::from_millis(500)).await;
    let guard = client.lock(&unique("reason-restart")).lock().await.unwrap();
    server.restart().unwrap();
    tokio::time::timeout(NOTICED, guard.lost()).await.unwrap();
    assert_eq!(guard.loss_reason(), Some(LossReason::ServerRestarted));
    assert_eq!(
        guard.loss_reason().unwrap().to_string(),
        "the server restarted and lost it"
    );
    // A hold taken after another restart, by the request that finds the connection broken
    // and opens a new one, and then deleted, is only gone: the restart came before it was
    // confirmed.
    server.restart().unwrap();
    let name = unique("reason-after-restart");
    // The first command on the key finds its connection broken, and drops it: the acquisition
    // then opens the new one (and learns of the restart) after it was sent.
    let _ = client.lock(&name).is_locked().await;
    let mut attempts = 0;
    let later = loop {
        attempts += 1;
        match client.lock(&name).lock().await {
            Ok(guard) => break guard,
            Err(err) if attempts < 20 => println!("acquire after the restart: {err}"),
            Err(err) => panic!("no acquisition after the restart: {err}"),
        }
    };
    let _: () = raw(&server).await.del(&name).await.unwrap();
    // Noticed at its next renewal, a third of the watchdog timeout later.
    tokio::time::timeout(LONG_WATCHDOG, later.lost())
        .await
        .unwrap();
    assert_eq!(later.loss_reason(), Some(LossReason::Gone));
    let _ = client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_to_a_replica_without_the_hold_is_primary_changed() {
    let mut set = tokio::task::spawn_blocking(SentinelSet::start)
        .await
        .unwrap()
        .expect("start a sentinel set");
    let client = client_via(set.url(), LONG_WATCHDOG, Duration::from_millis(500)).await;
    let before = set.primary_port().unwrap();
    // The replicas miss the hold: paused, their links cut, until the primary is dead.
    for node in set.nodes().iter().filter(|n| n.port() != before) {
        node.pause().unwrap();
    }
    set.primary()
        .unwrap()
        .cli(&["CLIENT", "KILL", "TYPE", "replica"])
        .unwrap();
    let guard = client
        .lock(&unique("reason-sentinel"))
        .lock()
        .await
        .unwrap();
    for node in set.nodes_mut() {
        if node.port() == before {
            node.kill();
        }
    }
    for node in set.nodes().iter().filter(|n| n.port() != before) {
        node.resume().unwrap();
    }
    let set = tokio::task::spawn_blocking(move || {
        set.wait_for_new_primary(before, Instant::now() + FAILED_OVER)
            .expect("a replica is promoted");
        set
    })
    .await
    .unwrap();
    tokio::time::timeout(FAILED_OVER, guard.lost())
        .await
        .expect("the hold is found gone on the new primary");
    assert_eq!(guard.loss_reason(), Some(LossReason::PrimaryChanged));
    let _ = tokio::time::timeout(Duration::from_secs(10), client.shutdown()).await;
    drop(set);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_failover_to_a_replica_without_the_hold_is_primary_changed_on_its_shard_only() {
    let mut cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster");
    let client = client_via(
        cluster.seed_url(),
        LONG_WATCHDOG,
        Duration::from_millis(500),
    )
    .await;
    let name = unique("reason-cluster");
    let primary_port = cluster.node_for_key(&name).unwrap().port();
    let replica_port = {
        let primary = cluster.node_for_key(&name).unwrap();
        cluster.replicas_of(primary).unwrap()[0].port()
    };
    // A hold on another shard: untouched by the failover, and only gone when deleted after it
    // (the slot scoping itself is checked by `changes.rs`'s unit test: this hold is renewed
    // again once the client reconnects, which confirms it after the failover).
    let other_name = (0..)
        .map(|i| format!("{name}-other-{i}"))
        .find(|other| cluster.node_for_key(other).unwrap().port() != primary_port)
        .unwrap();
    let other = client.lock(&other_name).lock().await.unwrap();
    // The replica misses the hold: paused, its link cut, until the primary is dead.
    cluster.node_mut(replica_port).unwrap().pause().unwrap();
    cluster
        .node_for_key(&name)
        .unwrap()
        .cli(&["CLIENT", "KILL", "TYPE", "replica"])
        .unwrap();
    let guard = client.lock(&name).lock().await.unwrap();
    cluster.node_mut(primary_port).unwrap().kill();
    cluster.node_mut(replica_port).unwrap().resume().unwrap();
    let cluster = tokio::task::spawn_blocking(move || {
        cluster
            .wait_ok(FAILED_OVER)
            .expect("the replica takes over");
        cluster
    })
    .await
    .unwrap();
    assert_eq!(cluster.node_for_key(&name).unwrap().port(), replica_port);
    tokio::time::timeout(FAILED_OVER, guard.lost())
        .await
        .expect("the hold is found gone on the promoted replica");
    assert_eq!(guard.loss_reason(), Some(LossReason::PrimaryChanged));
    assert!(!other.is_lost(), "the other shard's hold is untouched");
    let other_node = cluster.node_for_key(&other_name).unwrap();
    other_node.cli(&["DEL", &other_name]).unwrap();
    // Noticed at its next renewal, at most a third of the watchdog timeout later.
    tokio::time::timeout(LONG_WATCHDOG, other.lost())
        .await
        .unwrap();
    assert_eq!(other.loss_reason(), Some(LossReason::Gone));
    let _ = tokio::time::timeout(Duration::from_secs(10), client.shutdown()).await;
}
