//! The wait bound on a sentinel set whose primary stops answering: `try_lock_for(wait)` returns
//! (an error here) soon after `wait`, even when an earlier acquisition of the same owner lost
//! its reply and its undo is still retried in the background (for up to the settle window);
//! once the primary answers again, the same owner takes the lock. The reentrant lock (through
//! the shared wait loop), the spin lock and the fair lock (their own loops).
use std::sync::Arc;
use std::time::Duration;

use keylatch::{Client, Config, DistributedLock, Error, Owner};
use keylatch_testkit::SentinelSet;

/// The wait of each `try_lock_for`.
const WAIT: Duration = Duration::from_secs(1);
/// A hang detector, not a speed check: far beyond the bound (wait + twice the response timeout).
const HANG: Duration = Duration::from_secs(11);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_for_returns_while_an_undo_of_the_same_owner_is_still_retried() {
    // No failover during the pause: the primary stays the one that does not answer.
    let set = tokio::task::spawn_blocking(|| {
        SentinelSet::builder()
            .down_after(Duration::from_secs(60))
            .start()
    })
    .await
    .unwrap()
    .expect("start a sentinel set");
    let config = Config::builder()
        .url(set.url())
        .connect_timeout(Duration::from_millis(300))
        .response_timeout(Duration::from_millis(300))
        // Undos of lost replies are retried far longer than the hang detector waits.
        .settle_window(Duration::from_secs(60))
        .build()
        .expect("config");
    let client = Client::connect_with(config).await.expect("connect");
    let reentrant: Arc<dyn DistributedLock> = Arc::new(
        client
            .lock("app:wait-bound-sentinel")
            .with_owner(Owner::unique()),
    );
    let spin: Arc<dyn DistributedLock> = Arc::new(
        client
            .spin_lock("app:wait-bound-sentinel-spin")
            .with_owner(Owner::unique()),
    );
    let fair: Arc<dyn DistributedLock> = Arc::new(
        client
            .fair_lock("app:wait-bound-sentinel-fair")
            .with_owner(Owner::unique()),
    );
    for (what, lock) in [("reentrant", reentrant), ("spin", spin), ("fair", fair)] {
        bound_holds(&set, what, &*lock).await;
    }
    client.shutdown().await.expect("shutdown");
}

/// Stops the primary while `lock`'s owner tries three times, then resumes it and takes `lock`.
async fn bound_holds(set: &SentinelSet, what: &str, lock: &dyn DistributedLock) {
    let lease = Some(Duration::from_secs(30));
    let primary = set.primary().expect("the primary");
    primary.pause().expect("pause the primary");
    // Each call's reply is lost; its undo fails too and goes on in the background, and the
    // next call of the same owner must not wait for it past its own bound.
    for call in 0..3 {
        let outcome = tokio::time::timeout(HANG, lock.try_lock_for(WAIT, lease))
            .await
            .unwrap_or_else(|_| {
                panic!("{what}, call {call}: try_lock_for(1 s) still running after 11 s")
            });
        match outcome {
            Err(err) => assert!(
                matches!(err, Error::Timeout { .. } | Error::Connect { .. }),
                "{what}, call {call}: {err:?}"
            ),
            Ok(guard) => panic!("{what}, call {call}: acquired from a stopped primary: {guard:?}"),
        }
    }
    primary.resume().expect("resume the primary");

    // The primary answers again: the undos finish and the same owner takes the lock.
    let guard = tokio::time::timeout(HANG * 3, async {
        loop {
            if let Ok(Some(guard)) = lock.try_lock_for(WAIT, lease).await {
                return guard;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}: not taken once the primary answers"));
    guard.unlock().await.expect("unlock");
}
