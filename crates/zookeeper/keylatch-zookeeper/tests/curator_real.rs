//! Interoperability with the real Apache Curator (Debian's 5.4, driven by the testkit's
//! `CuratorDriver`, a Java program compiled at test time): Curator's `InterProcessMutex` and
//! keylatch's `ZkMutex` on one path exclude each other, in both directions, and each is
//! granted the lock when the other releases it, in queue order across the two; Curator's and
//! keylatch's read-write locks share reads and exclude writes both ways; a semaphore's
//! maximum holds across Curator's and keylatch's leases; a Curator client with other
//! credentials takes a lock a keylatch client with credentials created (Curator's default ACL
//! on both sides); revocation both ways (Curator's `Revoker` on a revocable keylatch holder,
//! whose `lost()` completes with `LossReason::Revoked`; keylatch's `revoke_holder` on a
//! Curator mutex made revocable, whose listener releases); a semaphore's maximum read from
//! Curator's `SharedCount` and followed as it changes, beside Curator's semaphore on the same
//! count, and a count node keylatch seeded read by Curator; a killed holder on each side
//! (the Curator JVM killed holding the lock: keylatch is granted once its session expires; a
//! keylatch holder that never releases: Curator is granted once its session closes);
//! Curator's read-lock downgrade as keylatch's read-write lock sees it (by Curator's version:
//! CURATOR-621 changed it in 5.5); wake-up latency both ways (printed, not asserted).
//! The model of Curator in `support/curator.rs` (tests/curator.rs) covers cases the driver
//! does not reach.
//!
//! Order is asserted on what each side reported, never on times; bounds are correctness
//! bounds. Skipped, with a line "<test>: skipped: <reason>", where Curator cannot run.
//!
//! May import: keylatch-testkit, keylatch-zookeeper, keylatch-core.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use keylatch_core::{DistributedLock, LossReason};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_both_sides_are_served_in_queue_order() {
    let path = "/curator-real/fifo";
    let Some(mut curator) = tokio::task::block_in_place(|| {
        driver("waiters_of_both_sides_are_served_in_queue_order", path)
    }) else {
        return;
    };
    let (first, second) = (client().await, client().await);
    let held = first.lock(path).unwrap().lock().await.unwrap();
    let raw = raw(server()).await;
    // Curator queues second, keylatch's other client third.
    tokio::task::block_in_place(|| curator.send("lock"));
    support::wait_children(&raw, path, 2).await;
    let third = second.lock(path).unwrap();
    let waiting = tokio::spawn(async move { third.lock().await.unwrap() });
    support::wait_children(&raw, path, 3).await;
    held.unlock().await.unwrap();
    let granted = tokio::task::block_in_place(|| curator.next_line(ANSWER));
    assert_eq!(granted.as_deref(), Some("locked"));
    assert!(
        !waiting.is_finished(),
        "the third was served before Curator"
    );
    let answer = tokio::task::block_in_place(|| curator.ask("unlock", ANSWER));
    assert_eq!(answer, "unlocked");
    let guard = tokio::time::timeout(ANSWER, waiting)
        .await
        .expect("the third is served after Curator")
        .unwrap();
    guard.unlock().await.unwrap();
    first.shutdown().await.unwrap();
    second.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_locks_share_reads_and_exclude_writes_both_ways() {
    let path = "/curator-real/rw";
    let Some(mut curator) = tokio::task::block_in_place(|| {
        driver(
            "read_write_locks_share_reads_and_exclude_writes_both_ways",
            path,
        )
    }) else {
        return;
    };
    let mut ask = |command: &str| tokio::task::block_in_place(|| curator.ask(command, ANSWER));
    let keylatch = client().await;
    let rw = keylatch.read_write_lock(path).unwrap();
    // A Curator reader: keylatch reads beside it, cannot write.
    assert_eq!(ask("read"), "read");
    let reading = rw
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("reads share");
    assert!(rw.write_lock().try_lock().await.unwrap().is_none());
    assert_eq!(
        ask("try-write 300"),
        "timeout",
        "Curator wrote beside readers"
    );
    assert_eq!(ask("unread"), "unread");
    reading.unlock().await.unwrap();
    // A keylatch writer: Curator can neither read nor write.
    let writing = rw.write_lock().lock().await.unwrap();
    assert_eq!(
        ask("try-read 300"),
        "timeout",
        "Curator read beside a keylatch writer"
    );
    assert_eq!(
        ask("try-write 300"),
        "timeout",
        "Curator wrote beside a keylatch writer"
    );
    writing.unlock().await.unwrap();
    // A Curator writer: keylatch can neither read nor write.
    assert_eq!(ask("try-write 10000"), "written");
    assert!(rw.read_lock().try_lock().await.unwrap().is_none());
    assert!(rw.write_lock().try_lock().await.unwrap().is_none());
    assert_eq!(ask("unwrite"), "unwritten");
    let again = rw.write_lock().lock().await.unwrap();
    again.unlock().await.unwrap();
    keylatch.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphores_maximum_holds_across_curator_and_keylatch_leases() {
    let path = "/curator-real/semaphore";
    let Some(mut curator) = tokio::task::block_in_place(|| {
        driver(
            "a_semaphores_maximum_holds_across_curator_and_keylatch_leases",
            path,
        )
    }) else {
        return;
    };
    let mut ask = |command: &str| tokio::task::block_in_place(|| curator.ask(command, ANSWER));
    let keylatch = client().await;
    let semaphore = keylatch.semaphore(path, 2).unwrap();
    assert_eq!(ask("sem 2"), "sem");
    assert_eq!(ask("acquire"), "acquired");
    let permit = semaphore
        .try_acquire()
        .await
        .unwrap()
        .expect("the second lease");
    // Two leases held, one a side: neither side gets a third.
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    assert_eq!(
        ask("try-acquire 300"),
        "timeout",
        "Curator took a third lease"
    );
    permit.release().await.unwrap();
    assert_eq!(ask("try-acquire 10000"), "acquired");
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    assert_eq!(ask("release"), "released");
    let permit = semaphore
        .try_acquire()
        .await
        .unwrap()
        .expect("a lease Curator returned");
    permit.release().await.unwrap();
    assert_eq!(ask("release"), "released");
    keylatch.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curators_revoker_asks_a_revocable_keylatch_holder_to_let_go() {
    let path = "/curator-real/revoke-keylatch";
    let Some(mut curator) = tokio::task::block_in_place(|| {
        driver(
            "curators_revoker_asks_a_revocable_keylatch_holder_to_let_go",
            path,
        )
    }) else {
        return;
    };
    let mut ask = |command: &str| tokio::task::block_in_place(|| curator.ask(command, ANSWER));
    let keylatch = client().await;
    // A holder that did not make its lock revocable ignores the request, as in Curator.
    let plain = keylatch.lock(path).unwrap().lock().await.unwrap();
    assert!(ask("revoke").starts_with("revoke-sent "));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !plain.is_lost(),
        "a holder that is not revocable was revoked"
    );
    plain.unlock().await.unwrap();
    // A revocable holder learns it through lost(), with its own reason.
    let lock = keylatch.lock(path).unwrap().revocable();
    let guard = lock.lock().await.unwrap();
    let raw = raw(server()).await;
    let mine = children(&raw, path).await;
    assert_eq!(ask("try 300"), "timeout");
    assert_eq!(ask("revoke"), format!("revoke-sent {path}/{}", mine[0]));
    tokio::time::timeout(ANSWER, guard.lost())
        .await
        .expect("the revocable holder is told of Curator's revoke request");
    assert_eq!(guard.loss_reason(), Some(LossReason::Revoked));
    // Cooperative: the lock passes on only once the holder releases.
    assert_eq!(
        ask("try 300"),
        "timeout",
        "the lock passed on before release"
    );
    guard.unlock().await.unwrap();
    assert_eq!(ask("try 10000"), "locked");
    assert_eq!(ask("unlock"), "unlocked");
    keylatch.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keylatch_revokes_a_revocable_curator_holder() {
    let path = "/curator-real/revoke-curator";
    let Some(mut curator) =
        tokio::task::block_in_place(|| driver("keylatch_revokes_a_revocable_curator_holder", path))
    else {
        return;
    };
    let line = |curator: &mut CuratorDriver| {
        tokio::task::block_in_place(|| curator.next_line(ANSWER)).unwrap_or_default()
    };
    tokio::task::block_in_place(|| curator.send("revocable"));
    assert_eq!(line(&mut curator), "revocable-locked");
    let keylatch = client().await;
    let lock = keylatch.lock(path).unwrap();
    assert!(lock.try_lock().await.unwrap().is_none());
    let raw = raw(server()).await;
    let holder = children(&raw, path).await;
    let asked = lock.revoke_holder().await.unwrap();
    assert_eq!(asked.as_deref(), Some(holder[0].as_str()));
    // Curator's listener is called and its holder releases; keylatch then gets the lock.
    assert_eq!(line(&mut curator), "revocable-revoked");
    assert_eq!(line(&mut curator), "revocable-unlocked");
    let guard = tokio::time::timeout(ANSWER, lock.lock())
        .await
        .expect("keylatch gets the lock Curator let go")
        .unwrap();
    assert!(lock.revoke_holder().await.unwrap().is_some());
    assert!(!guard.is_lost(), "a keylatch holder that is not revocable");
    guard.unlock().await.unwrap();
    assert_eq!(lock.revoke_holder().await.unwrap(), None);
    keylatch.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphores_maximum_follows_curators_shared_count() {
    let path = "/curator-real/shared-count/semaphore";
    let count = "/curator-real/shared-count/count";
    let Some(mut curator) = tokio::task::block_in_place(|| {
        driver("a_semaphores_maximum_follows_curators_shared_count", path)
    }) else {
        return;
    };
    let mut ask = |command: &str| tokio::task::block_in_place(|| curator.ask(command, ANSWER));
    // Curator's SharedCount writes the count; keylatch's fixed maximum (5) is only the seed.
    assert_eq!(ask(&format!("count {count} 1")), "count 1");
    let keylatch = client().await;
    let semaphore = keylatch
        .semaphore(path, 5)
        .unwrap()
        .with_shared_count(count)
        .unwrap();
    assert_eq!(semaphore.current_max_leases().await.unwrap(), 1);
    let first = semaphore.try_acquire().await.unwrap().expect("one lease");
    assert!(
        semaphore.try_acquire().await.unwrap().is_none(),
        "a second lease beyond Curator's count of 1"
    );
    // A waiter is granted a lease when Curator raises the count, without any release.
    let waiting = {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire().await.unwrap() })
    };
    let raw = raw(server()).await;
    support::wait_children(&raw, &format!("{path}/leases"), 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "granted before the count rose");
    assert_eq!(ask("set-count 2"), "count 2");
    let second = tokio::time::timeout(ANSWER, waiting)
        .await
        .expect("the waiter is granted once the count is 2")
        .unwrap();
    // Curator's semaphore on the same count: two leases held, none for it until it is 3.
    assert_eq!(ask("sem-count"), "sem");
    assert_eq!(
        ask("try-acquire 300"),
        "timeout",
        "Curator took a third lease"
    );
    assert_eq!(ask("set-count 3"), "count 3");
    assert_eq!(ask("try-acquire 10000"), "acquired");
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    assert_eq!(ask("release"), "released");
    first.release().await.unwrap();
    second.release().await.unwrap();
    keylatch.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_count_keylatch_creates_is_read_by_curator() {
    let path = "/curator-real/shared-count-seed/semaphore";
    let count = "/curator-real/shared-count-seed/count";
    let Some(mut curator) = tokio::task::block_in_place(|| {
        driver("a_shared_count_keylatch_creates_is_read_by_curator", path)
    }) else {
        return;
    };
    let keylatch = client().await;
    let semaphore = keylatch
        .semaphore(path, 2)
        .unwrap()
        .with_shared_count(count)
        .unwrap();
    let permit = semaphore.acquire().await.unwrap();
    // keylatch seeded the missing node with its maximum, in Curator's format.
    let answer = tokio::task::block_in_place(|| curator.ask(&format!("count {count} 9"), ANSWER));
    assert_eq!(answer, "count 2");
    permit.release().await.unwrap();
    keylatch.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_curator_holder_passes_the_lock_to_keylatch_when_its_session_ends() {
    let test = "a_killed_curator_holder_passes_the_lock_to_keylatch_when_its_session_ends";
    let path = "/curator-real/killed-curator";
    let Some(mut curator) = tokio::task::block_in_place(|| driver(test, path)) else {
        return;
    };
    assert_eq!(
        tokio::task::block_in_place(|| curator.ask("lock", ANSWER)),
        "locked"
    );
    let keylatch = client().await;
    let lock = keylatch.lock(path).unwrap();
    let waiting = tokio::spawn(async move { lock.lock().await.unwrap() });
    let raw = raw(server()).await;
    support::wait_children(&raw, path, 2).await;
    // The JVM dies holding the lock: its node stays until the server expires its session
    // (10 s), and keylatch waits until then.
    tokio::task::block_in_place(|| curator.kill());
    let killed = std::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !waiting.is_finished(),
        "granted before the killed holder's session ended"
    );
    assert_eq!(
        children(&raw, path).await.len(),
        2,
        "the killed holder's node"
    );
    let guard = tokio::time::timeout(ANSWER, waiting)
        .await
        .expect("keylatch is granted once the killed holder's session ends")
        .unwrap();
    eprintln!(
        "{test}: keylatch granted {:?} after the Curator holder was killed (its session timeout: 10 s)",
        killed.elapsed()
    );
    assert_eq!(children(&raw, path).await.len(), 1);
    guard.unlock().await.unwrap();
    keylatch.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keylatch_holder_whose_session_closes_passes_the_lock_to_curator() {
    let path = "/curator-real/closed-keylatch";
    let Some(mut curator) = tokio::task::block_in_place(|| {
        driver(
            "a_keylatch_holder_whose_session_closes_passes_the_lock_to_curator",
            path,
        )
    }) else {
        return;
    };
    let holder = client().await;
    // The holder never releases (as a process that dies); only its session's end frees it.
    holder.lock(path).unwrap().lock().await.unwrap().forget();
    tokio::task::block_in_place(|| curator.send("lock"));
    let raw = raw(server()).await;
    support::wait_children(&raw, path, 2).await;
    let early = tokio::task::block_in_place(|| curator.next_line(Duration::from_millis(500)));
    assert_eq!(early, None, "Curator was granted a lock keylatch holds");
    holder.shutdown().await.unwrap();
    let granted = tokio::task::block_in_place(|| curator.next_line(ANSWER));
    assert_eq!(granted.as_deref(), Some("locked"));
    assert_eq!(
        tokio::task::block_in_place(|| curator.ask("unlock", ANSWER)),
        "unlocked"
    );
}

/// Curator's version, as its driver reads it from the recipes jar: (major, minor).
fn curator_version(curator: &mut CuratorDriver) -> (u32, u32) {
    let answer = tokio::task::block_in_place(|| curator.ask("version", ANSWER));
    let version = answer.strip_prefix("version ").unwrap_or_default();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor),
        _ => panic!("Curator's version: {answer:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curators_read_lock_downgrade_as_keylatch_sees_it() {
    let test = "curators_read_lock_downgrade_as_keylatch_sees_it";
    let path = "/curator-real/downgrade";
    let Some(mut curator) = tokio::task::block_in_place(|| driver(test, path)) else {
        return;
    };
    let version = curator_version(&mut curator);
    let mut ask = |command: &str| tokio::task::block_in_place(|| curator.ask(command, ANSWER));
    let keylatch = client().await;
    let rw = keylatch.read_write_lock(path).unwrap();
    // Curator's writer takes its read lock and releases the write lock: it holds a read.
    assert_eq!(ask("write"), "written");
    assert_eq!(ask("read"), "read");
    assert_eq!(ask("unwrite"), "unwritten");
    let reading = rw
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("keylatch reads beside Curator's downgraded read");
    assert!(
        rw.write_lock().try_lock().await.unwrap().is_none(),
        "keylatch wrote beside Curator's downgraded read"
    );
    reading.unlock().await.unwrap();
    assert_eq!(ask("unread"), "unread");
    // A keylatch writer queued behind Curator's writer while it downgrades.
    assert_eq!(ask("write"), "written");
    let writer = rw.write_lock();
    let waiting = tokio::spawn(async move { writer.lock().await.unwrap() });
    let raw = raw(server()).await;
    support::wait_children(&raw, path, 2).await;
    assert_eq!(ask("read"), "read");
    assert_eq!(ask("unwrite"), "unwritten");
    let nodes = children(&raw, path).await;
    if version >= (5, 5) {
        // CURATOR-621 (5.5): the read node carries the write node's sequence, so it sorts
        // before the queued writer, which waits for the read to end.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            !waiting.is_finished(),
            "keylatch's writer beside Curator's read ({nodes:?})"
        );
        assert_eq!(ask("unread"), "unread");
        let guard = tokio::time::timeout(ANSWER, waiting)
            .await
            .unwrap()
            .unwrap();
        guard.unlock().await.unwrap();
    } else {
        // Curator before 5.5: the read node is a new sequential node, after the queued
        // writer, so the writer is granted while Curator still holds its read (CURATOR-621).
        let guard = tokio::time::timeout(ANSWER, waiting)
            .await
            .expect("Curator before 5.5: the queued writer passes the downgraded read")
            .unwrap();
        eprintln!(
            "{test}: Curator {}.{}: keylatch's queued writer was granted while Curator held its downgraded read (CURATOR-621): {nodes:?}",
            version.0, version.1
        );
        guard.unlock().await.unwrap();
        assert_eq!(ask("unread"), "unread");
    }
    keylatch.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wake_up_latency_both_ways() {
    let test = "wake_up_latency_both_ways";
    let path = "/curator-real/latency";
    let Some(mut curator) = tokio::task::block_in_place(|| driver(test, path)) else {
        return;
    };
    let keylatch = client().await;
    let lock = keylatch.lock(path).unwrap();
    let raw = raw(server()).await;
    let (mut to_keylatch, mut to_curator) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        // Curator releases, keylatch's waiter wakes.
        assert_eq!(
            tokio::task::block_in_place(|| curator.ask("lock", ANSWER)),
            "locked"
        );
        let waiter = lock.clone();
        let waiting = tokio::spawn(async move {
            let guard = waiter.lock().await.unwrap();
            (std::time::Instant::now(), guard)
        });
        support::wait_children(&raw, path, 2).await;
        let released = std::time::Instant::now();
        tokio::task::block_in_place(|| curator.send("unlock"));
        let (granted, guard) = tokio::time::timeout(ANSWER, waiting)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            tokio::task::block_in_place(|| curator.next_line(ANSWER)).as_deref(),
            Some("unlocked")
        );
        assert!(granted > released, "keylatch woke before Curator released");
        to_keylatch.push(granted - released);
        // keylatch releases, Curator's waiter wakes.
        tokio::task::block_in_place(|| curator.send("lock"));
        support::wait_children(&raw, path, 2).await;
        let released = std::time::Instant::now();
        guard.unlock().await.unwrap();
        let answer = tokio::task::block_in_place(|| curator.next_line(ANSWER));
        let granted = std::time::Instant::now();
        assert_eq!(answer.as_deref(), Some("locked"));
        to_curator.push(granted - released);
        assert_eq!(
            tokio::task::block_in_place(|| curator.ask("unlock", ANSWER)),
            "unlocked"
        );
    }
    to_keylatch.sort();
    to_curator.sort();
    eprintln!(
        "{test}: Curator release -> keylatch grant: median {:?} of {to_keylatch:?}; keylatch release -> Curator grant: median {:?} of {to_curator:?} (the command pipe included)",
        to_keylatch[1], to_curator[1]
    );
    keylatch.shutdown().await.unwrap();
}
