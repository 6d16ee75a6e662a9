//! Read-write lock semantics: readers share, a writer excludes everyone, both sides are
//! reentrant, the writer may downgrade, a reader asking to write is refused at once with a
//! typed error; the handles work as `Arc<dyn DistributedLock>` and cross tasks.
use std::sync::Arc;
use std::time::Duration;

use keylatch::redis::{self, AsyncCommands};
use keylatch::{DistributedLock, Error, LockGuard, Owner, RwLock};
use keylatch_tests::{client, keyspace, raw, send_static, send_sync_static, server, unique};

/// A bound for things that must not hang; never a speed requirement.
const NO_HANG: Duration = Duration::from_secs(5);

#[tokio::test]
async fn readers_share_and_a_writer_excludes_everyone() {
    let server = server();
    let a = client(&server).await;
    let b = client(&server).await;
    let name = unique("rw-share");
    let reader1 = a.rw_lock(&name).with_owner(Owner::unique());
    let reader2 = b.rw_lock(&name).with_owner(Owner::unique());
    let writer = b.rw_lock(&name).with_owner(Owner::unique());

    let r1 = reader1.try_read().await.unwrap().expect("free: read");
    let r2 = reader2
        .try_read()
        .await
        .unwrap()
        .expect("readers share the lock across clients");
    assert!(
        writer.try_write().await.unwrap().is_none(),
        "readers inside"
    );
    assert!(reader1.is_locked().await.unwrap());
    assert!(reader1.read_lock().is_locked().await.unwrap());
    assert!(!reader1.write_lock().is_locked().await.unwrap());
    r1.unlock().await.unwrap();
    assert!(
        writer.try_write().await.unwrap().is_none(),
        "one reader still inside"
    );
    r2.unlock().await.unwrap();
    assert!(!writer.is_locked().await.unwrap());

    let w = writer.try_write().await.unwrap().expect("free: write");
    assert!(writer.write_lock().is_locked().await.unwrap());
    assert!(!writer.read_lock().is_locked().await.unwrap());
    assert!(reader1.try_read().await.unwrap().is_none(), "writer inside");
    assert!(
        reader2.try_write().await.unwrap().is_none(),
        "a second writer"
    );
    // A bounded wait for the write lock by someone else times out too.
    assert!(
        reader1
            .write_lock()
            .try_lock_for(Duration::from_millis(200), None)
            .await
            .unwrap()
            .is_none()
    );
    w.unlock().await.unwrap();
    assert!(!writer.is_locked().await.unwrap());
    for c in [&a, &b] {
        c.wait_idle().await;
        assert_eq!(c.stats().watchdog.holds, 0);
    }
}

/// The lock is free the moment its last reader leaves, however the holds' expiries line up.
#[tokio::test]
async fn the_last_readers_release_frees_the_lock_at_once() {
    let server = server();
    let client = client(&server).await;
    let name = unique("rw-last-reader");
    let rw = client.rw_lock(&name).with_owner(Owner::unique());
    let other = client.rw_lock(&name).with_owner(Owner::unique());
    let mut not_free = 0;
    for i in 0..300 {
        let first = rw.read().await.unwrap();
        // Every other round, two readers whose holds end at nearly the same instant.
        let second = if i % 2 == 0 {
            Some(other.read().await.unwrap())
        } else {
            None
        };
        first.unlock().await.unwrap();
        if let Some(second) = second {
            second.unlock().await.unwrap();
        }
        match other.try_write().await.unwrap() {
            Some(guard) => guard.unlock().await.unwrap(),
            None => {
                not_free += 1;
                assert!(rw.force_unlock().await.unwrap());
            }
        }
    }
    assert_eq!(
        not_free, 0,
        "the lock stayed held after its last reader left"
    );
}

#[tokio::test]
async fn both_sides_are_reentrant_per_owner() {
    let server = server();
    let client = client(&server).await;
    let name = unique("rw-reentrant");
    let rw = client.rw_lock(&name).with_owner(Owner::unique());
    let other = client.rw_lock(&name).with_owner(Owner::unique());

    let w1 = rw.write().await.unwrap();
    let w2 = tokio::time::timeout(NO_HANG, rw.write())
        .await
        .expect("re-entering the write lock never waits")
        .unwrap();
    let w3 = rw.try_write().await.unwrap().expect("re-entry");
    assert_eq!(rw.write_lock().hold_count().await.unwrap(), 3);
    assert!(rw.write_lock().is_held_by_current_owner().await.unwrap());
    assert!(!other.write_lock().is_held_by_current_owner().await.unwrap());
    for (left, guard) in [(2, w3), (1, w2)] {
        guard.unlock().await.unwrap();
        assert_eq!(rw.write_lock().hold_count().await.unwrap(), left);
        assert!(other.try_read().await.unwrap().is_none());
    }
    w1.unlock().await.unwrap();
    assert!(!rw.is_locked().await.unwrap());

    let r1 = rw.read().await.unwrap();
    let r2 = rw.try_read().await.unwrap().expect("re-entry");
    assert_eq!(rw.read_lock().hold_count().await.unwrap(), 2);
    r1.unlock().await.unwrap();
    assert_eq!(rw.read_lock().hold_count().await.unwrap(), 1);
    assert!(other.try_write().await.unwrap().is_none());
    r2.unlock().await.unwrap();
    assert_eq!(rw.read_lock().hold_count().await.unwrap(), 0);
    assert!(!rw.is_locked().await.unwrap());
}

#[tokio::test]
async fn the_writer_downgrades_and_its_reads_remain() {
    let server = server();
    let client = client(&server).await;
    let name = unique("rw-downgrade");
    let mut conn = raw(&server).await;
    let rw = client.rw_lock(&name).with_owner(Owner::unique());
    let reader = client.rw_lock(&name).with_owner(Owner::unique());
    let writer = client.rw_lock(&name).with_owner(Owner::unique());

    let w = rw.write().await.unwrap();
    // The writer takes the read lock: at once, while it writes.
    let r = tokio::time::timeout(NO_HANG, rw.read())
        .await
        .expect("the writer's read never waits")
        .unwrap();
    let r2 = rw.try_read().await.unwrap().expect("and again");
    assert!(reader.try_read().await.unwrap().is_none(), "still writing");
    let mode: String = conn.hget(&name, "mode").await.unwrap();
    assert_eq!(mode, "write");

    // Downgrade: after the write unlock, its reads remain and the lock is in read mode.
    w.unlock().await.unwrap();
    let mode: String = conn.hget(&name, "mode").await.unwrap();
    assert_eq!(mode, "read");
    assert_eq!(rw.read_lock().hold_count().await.unwrap(), 2);
    assert_eq!(rw.write_lock().hold_count().await.unwrap(), 0);
    assert!(
        writer.try_write().await.unwrap().is_none(),
        "the downgraded reads keep writers out"
    );
    let other = reader
        .try_read()
        .await
        .unwrap()
        .expect("other readers get in after the downgrade");
    // Now a reader, the old writer cannot write again.
    let err = rw.try_write().await.unwrap_err();
    assert!(matches!(err, Error::UpgradeRefused { .. }), "{err:?}");

    other.unlock().await.unwrap();
    r2.unlock().await.unwrap();
    r.unlock().await.unwrap();
    assert!(!rw.is_locked().await.unwrap());
    let w = writer.try_write().await.unwrap().expect("free again");
    w.unlock().await.unwrap();
}

#[tokio::test]
async fn a_reader_asking_to_write_is_refused_at_once_and_nothing_changes() {
    let server = server();
    let client = client(&server).await;
    let name = unique("rw-upgrade");
    let mut conn = raw(&server).await;
    let rw = client.rw_lock(&name).with_owner(Owner::unique());
    let read = rw.read().await.unwrap();
    let before = keyspace(&mut conn).await;

    let write_side: Arc<dyn DistributedLock> = Arc::new(rw.write_lock());
    let attempts: Vec<Result<Option<LockGuard>, Error>> = vec![
        rw.write().await.map(Some),
        rw.try_write().await,
        rw.write_lock().lock().await.map(Some),
        rw.write_lock()
            .lock_with_lease(Duration::from_secs(5))
            .await
            .map(Some),
        rw.write_lock()
            .try_lock_for(Duration::from_secs(30), None)
            .await,
        tokio::time::timeout(NO_HANG, write_side.lock())
            .await
            .expect("refused, not waiting")
            .map(Some),
    ];
    for result in attempts {
        let err = result.unwrap_err();
        assert!(
            matches!(&err, Error::UpgradeRefused { name: n } if *n == name),
            "{err:?}"
        );
        assert!(
            err.to_string().contains("cannot take the write lock"),
            "{err}"
        );
    }
    assert_eq!(keyspace(&mut conn).await, before, "a refused upgrade wrote");
    assert_eq!(client.stats().channels, 0, "a refused upgrade subscribed");

    // The server refuses too when this client does not know of the read hold: a hold put
    // there by hand in the read lock's layout, for an owner this client has no guard for.
    read.unlock().await.unwrap();
    let owner = Owner::unique();
    let owner_id = client.owner_id(owner).to_string();
    let _: () = redis::pipe()
        .hset(&name, "mode", "read")
        .hset(&name, &owner_id, 1)
        .pexpire(&name, 20_000)
        .pset_ex(format!("{{{name}}}:{owner_id}:rwlock_timeout:1"), 1, 20_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    let before = keyspace(&mut conn).await;
    let err = client
        .rw_lock(&name)
        .with_owner(owner)
        .try_write()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UpgradeRefused { .. }), "{err:?}");
    let err = tokio::time::timeout(NO_HANG, client.rw_lock(&name).with_owner(owner).write())
        .await
        .expect("refused, not waiting")
        .unwrap_err();
    assert!(matches!(err, Error::UpgradeRefused { .. }), "{err:?}");
    assert_eq!(keyspace(&mut conn).await, before, "a refused upgrade wrote");
    assert!(client.rw_lock(&name).force_unlock().await.unwrap());
}

#[tokio::test]
async fn force_unlock_follows_the_mode() {
    let server = server();
    let client = client(&server).await;
    let name = unique("rw-force");
    let mut conn = raw(&server).await;
    let rw = client.rw_lock(&name).with_owner(Owner::unique());
    let w = rw.write().await.unwrap();
    let r = rw.read().await.unwrap();
    assert!(!rw.read_lock().force_unlock().await.unwrap(), "write mode");
    assert!(rw.write_lock().force_unlock().await.unwrap());
    let left: Vec<String> = conn.keys(format!("*{name}*")).await.unwrap();
    assert!(left.is_empty(), "force unlock left {left:?}");
    assert!(matches!(w.unlock().await, Err(Error::NotHeld { .. })));
    assert!(matches!(r.unlock().await, Err(Error::NotHeld { .. })));

    let r = rw.read().await.unwrap();
    assert!(!rw.write_lock().force_unlock().await.unwrap(), "read mode");
    assert!(rw.read_lock().force_unlock().await.unwrap());
    assert!(!rw.force_unlock().await.unwrap(), "free");
    assert!(matches!(r.unlock().await, Err(Error::NotHeld { .. })));
    let _w = rw.write().await.unwrap();
    assert!(rw.force_unlock().await.unwrap(), "any mode");
    let left: Vec<String> = conn.keys(format!("*{name}*")).await.unwrap();
    assert!(left.is_empty(), "force unlock left {left:?}");
}

fn send<T: Send>(_: &T) {}

#[tokio::test]
async fn handles_are_send_sync_static() {
    fn check<T: Send + Sync + 'static>() {}
    check::<RwLock>();
    let server = server();
    let client = client(&server).await;
    let rw = client.rw_lock("bounds");
    send_sync_static(&rw.read_lock());
    send_sync_static(&rw.write_lock());
}

#[tokio::test]
async fn futures_are_send_and_both_sides_work_as_trait_objects() {
    let server = server();
    let client = client(&server).await;
    let name = unique("rw-bounds");
    let rw = client.rw_lock(&name);
    let (r, w) = (rw.clone(), rw.clone());
    let read = async move { r.read().await };
    send_static(&read);
    let write = async move { w.try_write().await };
    send_static(&write);
    let guard = read.await.unwrap();
    send_sync_static(&guard);
    let unlock = guard.unlock();
    send_static(&unlock);
    unlock.await.unwrap();
    assert!(write.await.unwrap().is_some());
    client.wait_idle().await;

    let sides: Vec<Arc<dyn DistributedLock>> =
        vec![Arc::new(rw.read_lock()), Arc::new(rw.write_lock())];
    for side in &sides {
        assert_eq!(side.name(), name);
        let fut = side.try_lock_for(Duration::from_secs(1), None);
        send(&fut);
        drop(fut);
    }
    for side in sides {
        let guard = side
            .try_lock_for(Duration::from_secs(1), None)
            .await
            .unwrap()
            .expect("free");
        assert!(side.is_locked().await.unwrap());
        guard.unlock().await.unwrap();
        assert!(!side.is_locked().await.unwrap());
        assert!(!side.force_unlock().await.unwrap());
    }
    // Guards cross tasks: acquired in one, released in another.
    let guard = tokio::spawn({
        let rw = rw.clone();
        async move { rw.write().await.unwrap() }
    })
    .await
    .unwrap();
    tokio::spawn(async move { guard.unlock().await.unwrap() })
        .await
        .unwrap();
    assert!(!rw.is_locked().await.unwrap());
}
