//! A holder process stopped past its session (a `SIGSTOP`, a long pause of the whole process):
//! its session expires and the lock passes on while it cannot run; when it runs again, its
//! guard must say "lost" at once, before any of its tasks (the session watcher, the renewal)
//! has run, or the application would act as the holder beside the next one. The pause is the
//! holder's whole runtime standing still: a current-thread runtime that nothing drives while
//! the other client, on its own runtime and thread, waits for the lock.
//!
//! May import: keylatch-testkit, keylatch-zookeeper, keylatch-core.

mod support;

use std::sync::mpsc;
use std::time::Duration;

use keylatch_core::DistributedLock;
use keylatch_testkit::ZooKeeperServer;
use keylatch_zookeeper::ZkConfig;
use support::client_with;

/// The holder's session timeout asked for (the test server grants 1 s to 60 s).
const HOLDER_SESSION: Duration = Duration::from_secs(2);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_hold_read_after_a_pause_past_the_session_is_lost_at_once() {
    let server = ZooKeeperServer::start().unwrap();
    let holder_rt = runtime();
    let (holder, guard) = holder_rt.block_on(async {
        let holder = client_with(
            &server,
            ZkConfig::default().with_session_timeout(HOLDER_SESSION),
        )
        .await;
        let guard = holder.lock("paused").unwrap().lock().await.unwrap();
        (holder, guard)
    });
    assert!(!guard.is_lost());

    // From here the holder's runtime stands still: no ping, no watcher, no renewal.
    let (granted_tx, granted_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let connect = server.connect_string();
    let waiter = std::thread::spawn(move || {
        runtime().block_on(async move {
            let url = format!("zk://{connect}");
            let other = keylatch_zookeeper::ZkClient::connect_with(
                &url,
                ZkConfig::default().with_session_timeout(Duration::from_secs(30)),
            )
            .await
            .unwrap();
            let next = other.lock("paused").unwrap().lock().await.unwrap();
            granted_tx.send(()).unwrap();
            // Held until the test has looked at the first guard.
            let _ = tokio::task::spawn_blocking(move || done_rx.recv()).await;
            drop(next);
            other.shutdown().await.unwrap();
        });
    });
    let granted = granted_rx.recv_timeout(Duration::from_secs(60));
    // The holder runs again: the first thing it reads is its guard.
    let lost_at_once = guard.is_lost();
    let _ = done_tx.send(());
    waiter.join().unwrap();
    assert!(
        granted.is_ok(),
        "the other client was never granted the lock"
    );
    assert!(
        lost_at_once,
        "after a pause past its session, while another client held the lock, the guard said held"
    );
    holder_rt.block_on(async move {
        drop(guard);
        let _ = holder.shutdown().await;
    });
}
