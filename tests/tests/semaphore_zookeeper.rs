//! The facade's semaphores on a `zk://` client (Curator's `InterProcessSemaphoreV2`, the
//! maximum from `with_permits`): never more holders than the maximum across tasks and
//! clients, a waiter takes a released permit, a dropped acquisition leaves no lease node,
//! `available_permits`, what has no ZooKeeper form answers `Unsupported` and writes nothing,
//! and a Curator client on the same path contends with the facade.
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keylatch::{Client, DistributedLock, Error, Semaphore};
use keylatch_tests::{eventually, unique};

#[allow(dead_code)]
#[path = "../../crates/zookeeper/keylatch-zookeeper/tests/support/curator.rs"]
mod curator;

async fn zk_client() -> Client {
    Client::connect(&keylatch_tests::zk::url())
        .await
        .expect("connect to ZooKeeper")
}

/// Every node under the semaphore `name`: its own children, and those of `leases` and `locks`.
async fn tree(name: &str) -> Vec<String> {
    let raw = keylatch_tests::zk::raw().await;
    let path = format!("/keylatch/{name}");
    let mut nodes = Vec::new();
    for child in keylatch_tests::zk::children(&raw, &path).await {
        let dir = format!("{path}/{child}");
        let inside = keylatch_tests::zk::children(&raw, &dir).await;
        // An empty directory is a container the server may reap at any moment: left out.
        if !inside.is_empty() {
            nodes.push(dir.clone());
        }
        for node in inside {
            nodes.push(format!("{dir}/{node}"));
        }
    }
    nodes.sort();
    nodes
}

/// The lease nodes of the semaphore `name`.
async fn leases(name: &str) -> Vec<String> {
    let raw = keylatch_tests::zk::raw().await;
    keylatch_tests::zk::children(&raw, &format!("/keylatch/{name}/leases")).await
}

/// The nodes of the mutex that guards taking a lease.
async fn lock_nodes(name: &str) -> Vec<String> {
    let raw = keylatch_tests::zk::raw().await;
    keylatch_tests::zk::children(&raw, &format!("/keylatch/{name}/locks")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_of_two_never_has_more_than_two_holders_across_tasks_and_clients() {
    let clients = [zk_client().await, zk_client().await];
    let name = unique("zk-sem-two");
    // Who is inside, counted under a local mutex: the most seen at once.
    let inside = Arc::new(tokio::sync::Mutex::new(Vec::<usize>::new()));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..6 {
        let semaphore = clients[t % 2].semaphore(&name).with_permits(2);
        let (inside, most) = (inside.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..4 {
                let permit = semaphore.acquire().await.unwrap();
                {
                    let mut now = inside.lock().await;
                    now.push(t);
                    most.fetch_max(now.len(), Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
                inside.lock().await.retain(|&held| held != t);
                permit.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let most = most.load(Ordering::SeqCst);
    println!("at most {most} holders at once (limit 2)");
    assert!(most <= 2, "{most} holders of a semaphore of 2");
    // And as a lock, through the shared trait.
    let semaphore = clients[0].semaphore(&name).with_permits(2);
    let locks: Vec<Arc<dyn DistributedLock>> = (0..3)
        .map(|i| Arc::new(clients[i % 2].semaphore(&name).with_permits(2).as_lock()) as _)
        .collect();
    let first = locks[0].lock().await.unwrap();
    let second = locks[1].lock().await.unwrap();
    assert!(
        locks[2].try_lock().await.unwrap().is_none(),
        "a third guard"
    );
    assert!(locks[2].is_locked().await.unwrap(), "every permit taken");
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    first.unlock().await.unwrap();
    second.unlock().await.unwrap();
    assert!(
        eventually(Duration::from_secs(10), || async {
            leases(&name).await.is_empty()
        })
        .await
    );
    for client in clients {
        client.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_takes_a_released_permit_and_available_permits_counts_the_leases() {
    let (a, b) = (zk_client().await, zk_client().await);
    let name = unique("zk-sem-wait");
    let semaphore = a.semaphore(&name).with_permits(2);
    assert!(!semaphore.exists().await.unwrap());
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    let first = semaphore.acquire().await.unwrap();
    assert_eq!(first.permits(), 1);
    assert!(first.id().is_some_and(|id| id.contains("lease-")));
    assert!(semaphore.exists().await.unwrap());
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    let second = semaphore
        .try_acquire()
        .await
        .unwrap()
        .expect("a second permit");
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    let waiter = b.semaphore(&name).with_permits(2);
    let waiting = tokio::spawn(async move { waiter.acquire().await });
    // The waiter's lease node is there (it waits for the leases to drop to two).
    assert!(
        eventually(Duration::from_secs(10), || async {
            leases(&name).await.len() == 3
        })
        .await
    );
    assert!(!waiting.is_finished(), "the waiter took a third permit");
    first.release().await.unwrap();
    let third = waiting.await.unwrap().expect("the waiter's permit");
    assert!(!third.is_lost());
    assert_eq!(leases(&name).await.len(), 2);
    second.release().await.unwrap();
    third.release().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    assert!(leases(&name).await.is_empty());
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_acquisition_leaves_no_lease_node() {
    let client = zk_client().await;
    let name = unique("zk-sem-drop");
    let semaphore = client.semaphore(&name).with_permits(1);
    let held = semaphore.acquire().await.unwrap();
    for expirable in [false, true] {
        let waiting = if expirable {
            let other = client.permit_expirable_semaphore(&name).with_permits(1);
            tokio::spawn(async move { other.acquire().await.map(drop) })
        } else {
            let other = semaphore.clone();
            tokio::spawn(async move { other.acquire().await.map(drop) })
        };
        assert!(
            eventually(Duration::from_secs(10), || async {
                leases(&name).await.len() == 2
            })
            .await
        );
        waiting.abort();
        assert!(waiting.await.unwrap_err().is_cancelled());
        assert!(
            eventually(Duration::from_secs(10), || async {
                leases(&name).await.len() == 1 && lock_nodes(&name).await.is_empty()
            })
            .await,
            "left behind: {:?}",
            tree(&name).await
        );
    }
    held.release().await.unwrap();
    assert!(leases(&name).await.is_empty());
    client.shutdown().await.unwrap();
}

/// Asserts `result` is `Unsupported`.
fn unsupported<T: std::fmt::Debug>(result: keylatch::Result<T>, what: &str) {
    assert!(
        matches!(result, Err(Error::Unsupported { .. })),
        "{what}: {result:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_has_no_zookeeper_form_answers_unsupported_and_writes_nothing() {
    let client = zk_client().await;
    let name = unique("zk-sem-unsupported");
    let long = Duration::from_secs(30);
    let plain = client.semaphore(&name).with_permits(2);
    let expiring = client.permit_expirable_semaphore(&name).with_permits(2);
    // Without a maximum: a typed error that asks for one, and nothing written.
    let bare: Semaphore = client.semaphore(&name);
    assert!(matches!(
        bare.try_acquire().await,
        Err(Error::InvalidPermits { .. })
    ));
    assert!(matches!(
        bare.available_permits().await,
        Err(Error::InvalidPermits { .. })
    ));
    assert!(
        tree(&name).await.is_empty(),
        "written: {:?}",
        tree(&name).await
    );
    let mut permit = expiring.acquire().await.unwrap();
    assert_eq!(expiring.permits().await.unwrap(), Some(2));
    assert_eq!(expiring.acquired_permits().await.unwrap(), 1);
    assert_eq!(expiring.available_permits().await.unwrap(), 1);
    let before = tree(&name).await;
    assert_eq!(before.iter().filter(|n| n.contains("lease-")).count(), 1);
    unsupported(plain.try_set_permits(3).await, "try_set_permits");
    unsupported(
        plain.try_set_permits_with_ttl(3, long).await,
        "try_set_permits_with_ttl",
    );
    unsupported(plain.set_permits(3).await, "set_permits");
    unsupported(plain.add_permits(1).await, "add_permits");
    unsupported(plain.drain_permits().await, "drain_permits");
    unsupported(plain.release(1).await, "release by count");
    unsupported(plain.release_if_exists(1).await, "release_if_exists");
    unsupported(plain.acquire_with_lease(long).await, "acquire_with_lease");
    unsupported(plain.try_acquire_for(long, Some(long)).await, "a lease");
    unsupported(
        plain
            .acquire_with(keylatch::AcquireOptions::new().with_lease(long))
            .await,
        "acquire_with a lease",
    );
    unsupported(
        plain.acquire_many(2, keylatch::AcquireOptions::new()).await,
        "acquire_many",
    );
    unsupported(plain.delete().await, "delete");
    unsupported(plain.expire(long).await, "expire");
    unsupported(plain.clear_expire().await, "clear_expire");
    unsupported(
        plain.as_lock().force_unlock().await,
        "force_unlock of the lock",
    );
    unsupported(expiring.try_set_permits(3).await, "try_set_permits");
    unsupported(expiring.set_permits(3).await, "set_permits");
    unsupported(expiring.add_permits(1).await, "add_permits");
    unsupported(
        expiring.acquire_with_lease(long).await,
        "acquire_with_lease",
    );
    unsupported(expiring.try_acquire_for(long, Some(long)).await, "a lease");
    unsupported(
        expiring
            .acquire_many(2, keylatch::AcquireOptions::new())
            .await,
        "acquire_many",
    );
    unsupported(expiring.release(permit.id()).await, "release by id");
    unsupported(expiring.try_release(permit.id()).await, "try_release");
    unsupported(expiring.release_many(&[permit.id()]).await, "release_many");
    unsupported(
        expiring.try_release_many(&[permit.id()]).await,
        "try_release_many",
    );
    unsupported(
        expiring.remaining_lease(permit.id()).await,
        "remaining_lease",
    );
    unsupported(
        expiring.update_lease(permit.id(), long).await,
        "update_lease",
    );
    unsupported(expiring.adopt(permit.id()).await, "adopt");
    unsupported(expiring.delete().await, "delete");
    unsupported(expiring.expire(long).await, "expire");
    unsupported(expiring.clear_expire().await, "clear_expire");
    unsupported(permit.extend(long).await, "extend");
    unsupported(permit.set_lease(long).await, "set_lease");
    unsupported(permit.watchdog().await, "watchdog");
    assert_eq!(tree(&name).await, before, "something was written");
    assert!(!permit.is_lost());
    permit.release().await.unwrap();
    assert!(leases(&name).await.is_empty());
    client.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_comes_back_when_its_holders_session_ends() {
    let (holder, other) = (zk_client().await, zk_client().await);
    let name = unique("zk-sem-session");
    let permit = holder
        .permit_expirable_semaphore(&name)
        .with_permits(1)
        .acquire()
        .await
        .unwrap();
    let id = permit.forget();
    assert!(leases(&name).await.contains(&id), "{id} held");
    let semaphore = other.permit_expirable_semaphore(&name).with_permits(1);
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    // The forgotten permit stays until the session ends.
    holder.shutdown().await.unwrap();
    let permit = semaphore.acquire().await.unwrap();
    assert_ne!(permit.id(), id);
    permit.release().await.unwrap();
    other.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curator_semaphore_and_the_facades_contend_on_the_same_path() {
    let client = zk_client().await;
    let curator = curator::Curator::connect(&keylatch_tests::zk::server().connect_string()).await;
    let name = unique("zk-sem-curator");
    let path = format!("/keylatch/{name}");
    let semaphore = client.semaphore(&name).with_permits(2);
    // Curator holds one, the facade one: the semaphore of two is full for both.
    let curators = curator.lease(&path, 2).await;
    let ours = semaphore.acquire().await.unwrap();
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    assert!(
        curator
            .lease_for(&path, 2, Duration::from_millis(200))
            .await
            .is_none(),
        "Curator took a third lease"
    );
    // A facade waiter takes Curator's permit once Curator gives it back.
    let waiter = semaphore.clone();
    let waiting = tokio::spawn(async move { waiter.acquire().await });
    assert!(
        eventually(Duration::from_secs(10), || async {
            leases(&name).await.len() == 3
        })
        .await
    );
    assert!(!waiting.is_finished(), "the facade took a third lease");
    curator.release(&curators).await;
    let theirs = waiting.await.unwrap().unwrap();
    ours.release().await.unwrap();
    // And Curator takes the facade's.
    let curators = curator.lease(&path, 2).await;
    assert_eq!(leases(&name).await.len(), 2);
    theirs.release().await.unwrap();
    curator.release(&curators).await;
    assert!(leases(&name).await.is_empty());
    client.shutdown().await.unwrap();
}

#[test]
fn the_permits_and_handles_are_send_sync_and_static() {
    fn check<T: Send + Sync + 'static>() {}
    check::<keylatch::SemaphorePermit>();
    check::<keylatch::Permit>();
    check::<keylatch::Semaphore>();
    check::<keylatch::PermitExpirableSemaphore>();
    check::<keylatch::SemaphoreLock>();
    check::<keylatch::ExpirableSemaphoreLock>();
}
