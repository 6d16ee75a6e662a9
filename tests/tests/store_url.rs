//! The URL picks the store: `Client::connect("zk://…")` runs the lock family on ZooKeeper
//! (Curator's recipes) behind the same handles and guards as on Redis; what exists on Redis
//! only answers `Unsupported` there and writes nothing.
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keylatch::{Client, DistributedLock, Error, Owner, StoreKind};
use keylatch_tests::{client, server, unique};

fn zk_url() -> String {
    keylatch_tests::zk::url()
}

/// The children of `path` on the server (none when it does not exist).
async fn children(path: &str) -> Vec<String> {
    keylatch_tests::zk::children(&keylatch_tests::zk::raw().await, path).await
}

/// `tasks` tasks over `clients` take `lock(client)` four times each; returns the most holders
/// seen inside at once, and the acquisitions.
async fn contend<L, F>(clients: &[Client], tasks: usize, lock: F) -> (usize, usize)
where
    L: DistributedLock + 'static,
    F: Fn(&Client) -> L,
{
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut running = Vec::new();
    for t in 0..tasks {
        let lock = lock(&clients[t % clients.len()]);
        let (inside, most, acquired) = (inside.clone(), most.clone(), acquired.clone());
        running.push(tokio::spawn(async move {
            for _ in 0..4 {
                let guard = lock.lock().await.unwrap();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                acquired.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await.unwrap();
            }
        }));
    }
    for task in running {
        task.await.unwrap();
    }
    (most.load(Ordering::SeqCst), acquired.load(Ordering::SeqCst))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zk_url_runs_the_lock_family_on_zookeeper() {
    let url = zk_url();
    let clients = [
        Client::connect(&url).await.unwrap(),
        Client::connect(&url).await.unwrap(),
    ];
    assert_eq!(clients[0].store_kind(), StoreKind::ZooKeeper);
    assert!(clients[0].as_redis().is_none());
    assert!(clients[0].as_zookeeper().is_some());

    let name = unique("facade-lock");
    assert_eq!(contend(&clients, 6, |c| c.lock(&name)).await, (1, 24));
    let fair = unique("facade-fair");
    assert_eq!(contend(&clients, 6, |c| c.fair_lock(&fair)).await, (1, 24));
    let rw = unique("facade-rw");
    assert_eq!(
        contend(&clients, 6, |c| c.rw_lock(&rw).write_lock()).await,
        (1, 24)
    );

    // Readers share; a writer waits for them.
    let readers = [
        clients[0].rw_lock(&rw).read().await.unwrap(),
        clients[1].rw_lock(&rw).read().await.unwrap(),
    ];
    assert!(clients[1].rw_lock(&rw).try_write().await.unwrap().is_none());
    for reader in readers {
        reader.unlock().await.unwrap();
    }
    let writing = clients[1].rw_lock(&rw).try_write().await.unwrap();
    assert!(writing.is_some());
    // Each side says whether the lock is in its mode, as on Redis.
    let sides = clients[0].rw_lock(&rw);
    assert!(sides.write_lock().is_locked().await.unwrap());
    assert!(!sides.read_lock().is_locked().await.unwrap());
    drop(writing);
    clients[1].wait_idle().await;
    let reading = clients[1].rw_lock(&rw).read().await.unwrap();
    assert!(sides.read_lock().is_locked().await.unwrap());
    assert!(!sides.write_lock().is_locked().await.unwrap());
    assert!(sides.is_locked().await.unwrap());
    reading.unlock().await.unwrap();
    assert!(!sides.is_locked().await.unwrap());

    // A token with every acquisition, strictly increasing; a re-entry by the same owner.
    let owner = Owner::unique();
    let lock = clients[0].lock(&name).with_owner(owner);
    let first = lock.lock().await.unwrap();
    let again = lock.lock().await.unwrap();
    let first_token = first.fencing_token().expect("a token");
    again.unlock().await.unwrap();
    first.unlock().await.unwrap();
    let next = clients[1].lock(&name).lock().await.unwrap();
    assert!(next.fencing_token().expect("a token") > first_token);
    next.unlock().await.unwrap();

    // Nothing left behind.
    assert!(children(&format!("/keylatch/{name}")).await.is_empty());
    assert!(children(&format!("/keylatch/{fair}")).await.is_empty());
    for client in &clients {
        client.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn what_redis_alone_has_is_unsupported_on_zookeeper_and_writes_nothing() {
    let client = Client::connect(&zk_url()).await.unwrap();
    let name = unique("facade-unsupported");
    let unsupported = |result: keylatch::Result<()>, what: &str| {
        assert!(
            matches!(result, Err(Error::Unsupported { .. })),
            "{what}: {result:?}"
        );
    };
    let lock = client.lock(&name);
    unsupported(
        lock.lock_with_lease(Duration::from_secs(5)).await.map(drop),
        "a fixed lease",
    );
    unsupported(
        lock.with_max_hold(Duration::from_secs(5))
            .lock()
            .await
            .map(drop),
        "a maximum hold",
    );
    unsupported(lock.hold_count().await.map(drop), "hold_count");
    unsupported(lock.token().await.map(drop), "token");
    unsupported(
        client.fair_lock(&name).queue().await.map(drop),
        "the fair queue",
    );
    unsupported(
        client.semaphore(&name).try_set_permits(2).await.map(drop),
        "a semaphore",
    );
    // Without its maximum (`with_permits`) a ZooKeeper semaphore refuses, writing nothing.
    let no_maximum = |result: keylatch::Result<()>, what: &str| {
        assert!(
            matches!(result, Err(Error::InvalidPermits { .. })),
            "{what}: {result:?}"
        );
    };
    no_maximum(
        client.semaphore(&name).as_lock().lock().await.map(drop),
        "a semaphore as a lock",
    );
    no_maximum(
        client
            .permit_expirable_semaphore(&name)
            .acquire()
            .await
            .map(drop),
        "a permit-expirable semaphore",
    );
    unsupported(client.latch(&name).count().await.map(drop), "a latch");
    unsupported(
        client.spin_lock(&name).lock().await.map(drop),
        "a spin lock",
    );
    unsupported(
        client
            .multi_value_lock(&name, ["a", "b"])
            .lock()
            .await
            .map(drop),
        "a multi-value lock",
    );
    unsupported(client.connection().await.map(drop), "a Redis connection");
    assert!(
        children(&format!("/keylatch/{name}")).await.is_empty(),
        "nothing written for {name}"
    );
    assert!(!lock.is_locked().await.unwrap());
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_non_reentrant_lock_on_zookeeper_refuses_its_holder_and_excludes_others() {
    let clients = [
        Client::connect(&zk_url()).await.unwrap(),
        Client::connect(&zk_url()).await.unwrap(),
    ];
    let name = unique("facade-non-reentrant");
    let lock = clients[0].non_reentrant_lock(&name);
    assert!(!lock.is_reentrant());
    let mine = lock.with_owner(Owner::unique());
    let guard = mine.lock().await.unwrap();
    // The holder again: refused at once, nothing written, the hold intact.
    let again = mine.try_lock().await;
    assert!(matches!(again, Err(Error::AlreadyHeld { .. })), "{again:?}");
    let again = mine.lock().await;
    assert!(matches!(again, Err(Error::AlreadyHeld { .. })), "{again:?}");
    assert_eq!(children(&format!("/keylatch/{name}")).await.len(), 1);
    assert!(!guard.is_lost());
    // Anyone else is excluded as usual: another owner, another client, a fair handle.
    assert!(lock.try_lock().await.unwrap().is_none());
    assert!(
        clients[1]
            .non_reentrant_lock(&name)
            .try_lock()
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        clients[1]
            .non_reentrant_fair_lock(&name)
            .try_lock()
            .await
            .unwrap()
            .is_none()
    );
    guard.unlock().await.unwrap();
    let next = clients[1].non_reentrant_lock(&name).lock().await.unwrap();
    next.unlock().await.unwrap();
    assert!(children(&format!("/keylatch/{name}")).await.is_empty());
    for client in &clients {
        client.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn a_bad_name_is_a_typed_error_on_zookeeper() {
    let client = Client::connect(&zk_url()).await.unwrap();
    for bad in ["/", "/a//b", "/trailing/"] {
        let result = client.lock(bad).try_lock().await;
        assert!(
            matches!(result, Err(Error::InvalidName { .. })),
            "{bad:?}: {result:?}"
        );
    }
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_redis_url_still_picks_redis() {
    let server = server();
    let client = client(&server).await;
    assert_eq!(client.store_kind(), StoreKind::Redis);
    assert!(client.as_redis().is_some());
    assert!(client.as_zookeeper().is_none());
    let guard = client.lock(&unique("facade-redis")).lock().await.unwrap();
    assert!(
        guard.fencing_token().is_none(),
        "fencing is off by default on Redis"
    );
    guard.unlock().await.unwrap();
}
