//! `lost()` when the holding session ends: `pg_terminate_backend`, a server restart; a killed
//! holder process frees the lock at once; fencing tokens never go back across a restart.

mod support;

use std::time::{Duration, Instant};

use keylatch_core::{DistributedLock, LossReason};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminating_the_holding_session_fires_lost() {
    let server = support::server();
    let client = support::client(&server).await; // probes every 200 ms
    let other = support::client(&server).await;
    let guard = client.lock("terminated").unwrap().lock().await.unwrap();
    let lost = guard.lost();
    let started = Instant::now();
    let ended = server
        .psql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' \
             AND granted AND ((classid::int8 << 32) | objid::int8) = hashtextextended('terminated', 0)",
        )
        .unwrap();
    assert_eq!(ended, "1");
    tokio::time::timeout(Duration::from_secs(5), lost)
        .await
        .expect("lost() fires");
    let after = started.elapsed();
    println!("lost() fired {after:?} after pg_terminate_backend (probe interval 200ms)");
    assert_eq!(guard.loss_reason(), Some(LossReason::SessionExpired));
    assert!(
        other
            .lock("terminated")
            .unwrap()
            .try_lock()
            .await
            .unwrap()
            .is_some()
    );
    assert!(guard.unlock().await.is_err(), "the hold had ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_loses_holds_and_tokens_go_on() {
    let mut server = support::server();
    let client = support::client(&server).await;
    let lock = client.lock("restart").unwrap();
    let mut last = 0;
    for _ in 0..3 {
        let g = lock.lock().await.unwrap();
        last = g.fencing_token().unwrap();
        g.unlock().await.unwrap();
    }
    let guard = lock.lock().await.unwrap();
    assert_eq!(guard.fencing_token(), Some(last + 1));
    let lost = guard.lost();
    server.restart().expect("restart");
    tokio::time::timeout(Duration::from_secs(5), lost)
        .await
        .expect("lost() fires after the restart");
    drop(guard);
    let after = lock
        .try_lock_for(Duration::from_secs(10), None)
        .await
        .unwrap()
        .expect("acquired after the restart");
    assert!(
        after.fencing_token().unwrap() > last + 1,
        "tokens never go back"
    );
}

/// A holder process killed with SIGKILL: its connection closes, the server ends its session,
/// and a waiter gets the lock at once (no lease to run out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holder_process_frees_the_lock_at_once() {
    let server = support::server();
    let client = support::client(&server).await;
    // The holder: a psql process holding the lock keylatch uses for the name, its session
    // idle (psql waits on its stdin), as a keylatch holder's is between probes.
    let mut holder = server
        .psql_command()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = holder.stdin.take().unwrap();
    use std::io::Write;
    writeln!(
        stdin,
        "SELECT pg_advisory_lock(hashtextextended('killed', 0));"
    )
    .unwrap();
    stdin.flush().unwrap();
    support::eventually("the holder holds", || {
        support::advisory_rows(&server, "killed") == vec![true]
    })
    .await;
    let lock = client.lock("killed").unwrap();
    let waiter = tokio::spawn(async move {
        let guard = lock.try_lock_for(Duration::from_secs(20), None).await;
        (guard, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.kill().unwrap();
    let killed_at = Instant::now();
    let _ = holder.wait();
    drop(stdin);
    let (guard, got_at) = waiter.await.unwrap();
    assert!(guard.unwrap().is_some());
    println!(
        "the waiter got the lock {:?} after the holder was killed",
        got_at.saturating_duration_since(killed_at)
    );
}
