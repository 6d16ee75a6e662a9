//! Interoperability with the real Apache Curator (Debian's 5.4, driven by the testkit's
//! `CuratorDriver`, a Java program compiled at test time): Curator's `InterProcessMutex` and
//! keylatch's `ZkMutex` on one path exclude each other, in both directions, and each is
//! granted the lock when the other releases it; a Curator client with other credentials takes
//! a lock a keylatch client with credentials created (Curator's default ACL on both sides).
//! The model of Curator in `support/curator.rs`
//! (tests/curator.rs) covers what the driver does not reach yet.
//!
//! Order is asserted on what each side reported, never on times; bounds are correctness
//! bounds. Skipped, with a line "<test>: skipped: <reason>", where Curator cannot run.
//!
//! May import: keylatch-testkit, keylatch-zookeeper, keylatch-core.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use keylatch_core::DistributedLock;
use keylatch_testkit::{CuratorDriver, curator_unavailable};
use keylatch_zookeeper::ZkClient;
use support::{children, client, raw, server, url};

/// A correctness bound for one answer of the driver, or one hand-over.
const ANSWER: Duration = Duration::from_secs(30);

/// The driver on `path`, or `None` (and the skip line) when Curator cannot run here.
fn driver(test: &str, path: &str) -> Option<CuratorDriver> {
    if let Some(why) = curator_unavailable() {
        eprintln!("{test}: skipped: {why}");
        return None;
    }
    Some(CuratorDriver::start(&server().connect_string(), path).expect("start the Curator driver"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_holds_and_keylatch_waits_until_curator_releases() {
    let path = "/curator-real/curator-first";
    let Some(mut curator) = tokio::task::block_in_place(|| {
        driver(
            "curator_holds_and_keylatch_waits_until_curator_releases",
            path,
        )
    }) else {
        return;
    };
    let ask = |curator: &mut CuratorDriver, command: &str| {
        tokio::task::block_in_place(|| curator.ask(command, ANSWER))
    };
    assert_eq!(ask(&mut curator, "lock"), "locked");
    let keylatch = client().await;
    let lock = keylatch.lock(path).unwrap();
    assert!(
        lock.try_lock().await.unwrap().is_none(),
        "keylatch got a lock Curator holds"
    );
    // keylatch queues behind Curator's node.
    let released = Arc::new(AtomicBool::new(false));
    let waiting = {
        let (lock, released) = (lock.clone(), released.clone());
        tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            (released.load(Ordering::SeqCst), guard)
        })
    };
    let raw = raw(server()).await;
    support::wait_children(&raw, path, 2).await;
    assert!(!waiting.is_finished());
    released.store(true, Ordering::SeqCst);
    assert_eq!(ask(&mut curator, "unlock"), "unlocked");
    let (after_release, guard) = tokio::time::timeout(ANSWER, waiting)
        .await
        .expect("keylatch is granted the lock Curator released")
        .unwrap();
    assert!(
        after_release,
        "keylatch was granted the lock before Curator released it"
    );
    // And now Curator cannot take it.
    assert_eq!(ask(&mut curator, "try 300"), "timeout");
    guard.unlock().await.unwrap();
    assert_eq!(ask(&mut curator, "try 10000"), "locked");
    assert_eq!(ask(&mut curator, "unlock"), "unlocked");
    assert_eq!(ask(&mut curator, "quit"), "bye");
    assert!(children(&raw, path).await.is_empty());
    keylatch.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keylatch_holds_and_curator_waits_until_keylatch_releases() {
    let path = "/curator-real/keylatch-first";
    let Some(mut curator) = tokio::task::block_in_place(|| {
        driver(
            "keylatch_holds_and_curator_waits_until_keylatch_releases",
            path,
        )
    }) else {
        return;
    };
    let keylatch = client().await;
    let guard = keylatch.lock(path).unwrap().lock().await.unwrap();
    let answer = tokio::task::block_in_place(|| curator.ask("try 300", ANSWER));
    assert_eq!(answer, "timeout", "Curator got a lock keylatch holds");
    // Curator queues behind keylatch's node; it answers only once it holds.
    tokio::task::block_in_place(|| curator.send("lock"));
    let raw = raw(server()).await;
    support::wait_children(&raw, path, 2).await;
    let early = tokio::task::block_in_place(|| curator.next_line(Duration::from_millis(300)));
    assert_eq!(early, None, "Curator was granted a lock keylatch holds");
    guard.unlock().await.unwrap();
    let granted = tokio::task::block_in_place(|| curator.next_line(ANSWER));
    assert_eq!(granted.as_deref(), Some("locked"));
    // While Curator holds, keylatch cannot.
    let lock = keylatch.lock(path).unwrap();
    assert!(lock.try_lock().await.unwrap().is_none());
    let answer = tokio::task::block_in_place(|| curator.ask("unlock", ANSWER));
    assert_eq!(answer, "unlocked");
    let again = tokio::time::timeout(ANSWER, lock.lock())
        .await
        .expect("keylatch locks again")
        .unwrap();
    again.unlock().await.unwrap();
    keylatch.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_with_other_credentials_takes_a_lock_keylatch_created_with_credentials() {
    let test = "curator_with_other_credentials_takes_a_lock_keylatch_created_with_credentials";
    let path = "/curator-real/credentials/orders";
    if let Some(why) = curator_unavailable() {
        eprintln!("{test}: skipped: {why}");
        return;
    }
    let url = url(server()).replacen("zk://", "zk://app:S3cret@", 1);
    let keylatch = ZkClient::connect(&url).await.unwrap();
    // keylatch creates the directories and its node; Curator queues behind it and gets it.
    let guard = keylatch.lock(path).unwrap().lock().await.unwrap();
    let mut curator = tokio::task::block_in_place(|| {
        CuratorDriver::start_with_digest(&server().connect_string(), path, Some("other:Pw0ther"))
            .expect("start the Curator driver")
    });
    let answer = tokio::task::block_in_place(|| curator.ask("try 300", ANSWER));
    assert_eq!(answer, "timeout");
    guard.unlock().await.unwrap();
    let answer = tokio::task::block_in_place(|| curator.ask("try 10000", ANSWER));
    assert_eq!(
        answer, "locked",
        "Curator with other credentials was refused"
    );
    let answer = tokio::task::block_in_place(|| curator.ask("unlock", ANSWER));
    assert_eq!(answer, "unlocked");
    keylatch.shutdown().await.unwrap();
}
