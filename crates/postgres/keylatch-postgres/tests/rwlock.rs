//! The read-write lock on shared and exclusive advisory locks: readers share, a writer
//! excludes, a waiting writer is not starved by later readers, `psql` sees the same modes.

mod support;

use std::time::Duration;

use keylatch_core::{DistributedLock, Error, Owner};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_writers_exclude() {
    let server = support::server();
    let (a, b) = (
        support::client(&server).await,
        support::client(&server).await,
    );
    let rw_a = a.read_write_lock("rw").unwrap();
    let rw_b = b.read_write_lock("rw").unwrap();
    let r1 = rw_a.read_lock().lock().await.unwrap();
    let r2 = rw_b
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("readers share");
    assert_eq!(r1.fencing_token(), None, "readers have no token");
    assert!(
        rw_b.write_lock().try_lock().await.unwrap().is_none(),
        "readers exclude a writer"
    );
    // psql: shared is granted beside the readers, exclusive is not.
    assert_eq!(
        server
            .psql("SELECT pg_try_advisory_lock(hashtextextended('rw', 0))")
            .unwrap(),
        "f"
    );
    r1.unlock().await.unwrap();
    r2.unlock().await.unwrap();
    let w = rw_a.write_lock().lock().await.unwrap();
    assert!(w.fencing_token().is_some());
    assert!(
        rw_b.read_lock().try_lock().await.unwrap().is_none(),
        "a writer excludes readers"
    );
    assert_eq!(
        server
            .psql("SELECT pg_try_advisory_lock_shared(hashtextextended('rw', 0))")
            .unwrap(),
        "f",
        "psql's shared lock must wait for keylatch's writer"
    );
    w.unlock().await.unwrap();
}

/// Once a writer waits, a later reader queues behind it (PostgreSQL's lock manager), so a
/// stream of readers cannot starve the writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_writer_is_not_starved() {
    let server = support::server();
    let (a, b) = (
        support::client(&server).await,
        support::client(&server).await,
    );
    let rw_a = a.read_write_lock("starve").unwrap();
    let rw_b = b.read_write_lock("starve").unwrap();
    let reader = rw_a.read_lock().lock().await.unwrap();
    let writer = tokio::spawn({
        let write = rw_b.write_lock();
        async move { write.try_lock_for(Duration::from_secs(20), None).await }
    });
    support::eventually("the writer waits in the server's queue", || {
        support::advisory_rows(&server, "starve").len() == 2
    })
    .await;
    // A later reader, though only readers hold: refused while the writer waits.
    let later = rw_a
        .read_lock()
        .try_lock_for(Duration::from_millis(300), None)
        .await
        .unwrap();
    assert!(
        later.is_none(),
        "a later reader overtook the waiting writer"
    );
    reader.unlock().await.unwrap();
    let w = writer.await.unwrap().unwrap().expect("the writer gets it");
    w.unlock().await.unwrap();
}

#[tokio::test]
async fn an_owner_cannot_wait_for_its_own_other_side() {
    let server = support::server();
    let client = support::client(&server).await;
    let owner = Owner::unique();
    let rw = client.read_write_lock("self").unwrap();
    let read = rw.read_lock().with_owner(owner).lock().await.unwrap();
    let again = rw.read_lock().with_owner(owner).try_lock().await.unwrap();
    assert!(again.is_some(), "the read side re-enters");
    assert!(matches!(
        rw.write_lock().with_owner(owner).try_lock().await,
        Err(Error::UpgradeRefused { .. })
    ));
    drop(again);
    read.unlock().await.unwrap();
    client.wait_idle().await;
    let write = rw.write_lock().with_owner(owner).lock().await.unwrap();
    assert!(matches!(
        rw.read_lock().with_owner(owner).try_lock().await,
        Err(Error::Unsupported { .. })
    ));
    write.unlock().await.unwrap();
}
