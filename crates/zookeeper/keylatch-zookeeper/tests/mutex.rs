//! The reentrant mutex (Curator's `InterProcessMutex` layout) on a real ZooKeeper server.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keylatch_core::{AcquireOptions, DistributedLock, Error};
use keylatch_zookeeper::ZkConfig;
use support::{children, client, raw, server, url, wait_children};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusion_across_tasks_and_two_clients() {
    let clients = [client().await, client().await];
    let inside = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..12 {
        let lock = clients[t % 2].lock("exclusion").unwrap();
        let (inside, max, acquired) = (inside.clone(), max.clone(), acquired.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..4 {
                let guard = lock.lock().await.unwrap();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                acquired.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(acquired.load(Ordering::SeqCst), 48);
    assert_eq!(max.load(Ordering::SeqCst), 1, "two holders at once");
    let raw = raw(server()).await;
    assert!(children(&raw, "/keylatch/exclusion").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_arrival_order() {
    let (a, b) = (client().await, client().await);
    let raw = raw(server()).await;
    let path = "/keylatch/fifo";
    let holder = a.lock("fifo").unwrap().lock().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..6 {
        let lock = [&a, &b][i % 2].lock("fifo").unwrap();
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            order.lock().unwrap().push(i);
            guard.unlock().await.unwrap();
        }));
        // Each waiter's node exists before the next one comes.
        wait_children(&raw, path, i + 2).await;
    }
    holder.unlock().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4, 5]);
    wait_children(&raw, path, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_and_wait_timeout_return_none_and_leave_no_node() {
    let (a, b) = (client().await, client().await);
    let raw = raw(server()).await;
    let holder = a.lock("busy").unwrap().lock().await.unwrap();
    let other = b.lock("busy").unwrap();
    assert!(other.try_lock().await.unwrap().is_none());
    assert_eq!(children(&raw, "/keylatch/busy").await.len(), 1);
    let waited = other
        .try_lock_for(Duration::from_millis(300), None)
        .await
        .unwrap();
    assert!(waited.is_none());
    assert_eq!(children(&raw, "/keylatch/busy").await.len(), 1);
    assert!(other.is_locked().await.unwrap());
    holder.unlock().await.unwrap();
    assert!(!other.is_locked().await.unwrap());
    let guard = other.try_lock().await.unwrap().expect("free now");
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_acquisition_leaves_no_node() {
    let (a, b) = (client().await, client().await);
    let raw = raw(server()).await;
    let path = "/keylatch/dropped";
    let holder = a.lock("dropped").unwrap().lock().await.unwrap();
    let lock = b.lock("dropped").unwrap();
    // Dropped while waiting: its node exists then.
    let waiting = tokio::time::timeout(Duration::from_millis(500), lock.lock()).await;
    assert!(waiting.is_err());
    b.wait_idle().await;
    assert_eq!(children(&raw, path).await.len(), 1);
    // Dropped at every point of the first steps, the create's reply included.
    for micros in [0, 50, 200, 500, 1000, 2000, 5000] {
        let early = tokio::time::timeout(Duration::from_micros(micros), lock.lock()).await;
        assert!(early.is_err());
        b.wait_idle().await;
        assert_eq!(children(&raw, path).await.len(), 1, "after {micros}us");
    }
    holder.unlock().await.unwrap();
    assert!(children(&raw, path).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrancy_is_local_one_node_deleted_by_the_last_release() {
    let (a, b) = (client().await, client().await);
    let raw = raw(server()).await;
    let path = "/keylatch/reentrant";
    let lock = a.lock("reentrant").unwrap();
    let first = lock.lock().await.unwrap();
    let second = lock.with_owner(first.owner()).lock().await.unwrap();
    assert_eq!(first.fencing_token(), second.fencing_token());
    assert_eq!(children(&raw, path).await.len(), 1);
    // Another owner of the same client is excluded, as is another client.
    assert!(lock.try_lock().await.unwrap().is_none());
    assert!(
        b.lock("reentrant")
            .unwrap()
            .try_lock()
            .await
            .unwrap()
            .is_none()
    );
    first.unlock().await.unwrap();
    assert_eq!(children(&raw, path).await.len(), 1);
    assert!(
        b.lock("reentrant")
            .unwrap()
            .try_lock()
            .await
            .unwrap()
            .is_none()
    );
    second.unlock().await.unwrap();
    assert!(children(&raw, path).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_strictly_increase() {
    let clients = [client().await, client().await];
    let mut last = 0;
    for i in 0..8 {
        let guard = clients[i % 2].lock("fenced").unwrap().lock().await.unwrap();
        let token = guard.fencing_token().expect("a token");
        assert!(token > last, "{token} after {last}");
        last = token;
        guard.unlock().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_frees_the_nodes_and_ends_the_guards() {
    let (a, b) = (client().await, client().await);
    let raw = raw(server()).await;
    let one = a.lock("shut-1").unwrap().lock().await.unwrap();
    let _two = a
        .lock("/keylatch-shutdown/two")
        .unwrap()
        .lock()
        .await
        .unwrap();
    // A waiter of `a` behind `b`'s hold.
    let held = b.lock("shut-3").unwrap().lock().await.unwrap();
    let waiter_lock = a.lock("shut-3").unwrap();
    let waiter = tokio::spawn(async move { waiter_lock.lock().await.map(|_| ()) });
    wait_children(&raw, "/keylatch/shut-3", 2).await;
    a.shutdown().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), one.lost())
        .await
        .expect("lost after the shutdown");
    assert!(matches!(waiter.await.unwrap(), Err(Error::Closed)));
    assert!(children(&raw, "/keylatch/shut-1").await.is_empty());
    assert!(children(&raw, "/keylatch-shutdown/two").await.is_empty());
    assert_eq!(children(&raw, "/keylatch/shut-3").await.len(), 1);
    assert!(matches!(
        a.lock("shut-1").unwrap().try_lock().await,
        Err(Error::Closed)
    ));
    held.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_urls_and_leases_are_typed_errors() {
    let a = client().await;
    for bad in ["", "a//b", "a/", "/", "/zookeeper/x", "x/../y", "nul\0"] {
        assert!(
            matches!(a.lock(bad), Err(Error::InvalidName { .. })),
            "{bad:?}"
        );
    }
    let long = "n".repeat(2000);
    assert!(matches!(a.lock(&long), Err(Error::InvalidName { .. })));
    let lease = AcquireOptions::new().with_lease(Duration::from_secs(5));
    let lock = a.lock("leased").unwrap();
    assert!(matches!(
        lock.acquire(lease).await,
        Err(Error::Unsupported { .. })
    ));
    assert!(matches!(
        lock.acquire(AcquireOptions::new().with_lease(Duration::ZERO))
            .await,
        Err(Error::InvalidLease { .. })
    ));
    let raw = raw(server()).await;
    assert!(children(&raw, "/keylatch/leased").await.is_empty());

    // Its own chroot (ACLs and credentials are acl.rs's).
    let secret = format!("zk://app:S3cret@{}/authed", server().connect_string());
    for bad in [
        "zk://app:S3cret@".to_owned(),
        "redis://app:S3cret@h:1".to_owned(),
        "zk://app:S3cret@h:99999".to_owned(),
    ] {
        let err = keylatch_zookeeper::ZkClient::connect(&bad)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidUrl { .. }), "{bad}: {err:?}");
        assert!(!format!("{err} {err:?}").contains("S3cret"));
    }
    let bad_config = ZkConfig::default().with_base_path("relative");
    let err = keylatch_zookeeper::ZkClient::connect_with(&url(server()), bad_config)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidConfig { .. }));
    // Digest credentials: accepted by a server without ACL checks, and never shown.
    let with_auth = keylatch_zookeeper::ZkClient::connect(&secret)
        .await
        .unwrap();
    assert!(!format!("{with_auth:?}").contains("S3cret"));
    let guard = with_auth.lock("authed").unwrap().lock().await.unwrap();
    guard.unlock().await.unwrap();
    with_auth.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_deletes_every_node() {
    let (a, b) = (client().await, client().await);
    let raw = raw(server()).await;
    let path = "/keylatch/forced";
    let holder = a.lock("forced").unwrap().lock().await.unwrap();
    let waiter_lock = a.lock("forced").unwrap();
    let waiter = tokio::spawn(async move { waiter_lock.lock().await.map(|_| ()) });
    wait_children(&raw, path, 2).await;
    let other = b.lock("forced").unwrap();
    assert!(other.force_unlock().await.unwrap());
    // The waiter's node was deleted too: it creates a new one (Curator's retry) and, the
    // holder's node gone, gets the lock.
    waiter.await.unwrap().expect("the waiter queued again");
    assert!(matches!(holder.unlock().await, Err(Error::NotHeld { .. })));
    a.wait_idle().await;
    assert!(children(&raw, path).await.is_empty());
    assert!(!other.force_unlock().await.unwrap());
    let guard = other.try_lock().await.unwrap().expect("free");
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_a_connect_error_without_the_password() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = ZkConfig::default()
        .with_session_timeout(Duration::from_secs(2))
        .with_connection_timeout(Duration::from_millis(500));
    let url = format!("zk://app:S3cret@127.0.0.1:{port}/chroot");
    let err = tokio::time::timeout(
        Duration::from_secs(30),
        keylatch_zookeeper::ZkClient::connect_with(&url, config),
    )
    .await
    .expect("connect gives up")
    .unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    let shown = format!("{err} {err:?} {:?}", std::error::Error::source(&err));
    assert!(!shown.contains("S3cret"), "{shown}");
    assert!(shown.contains("app:***@"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_request_sent_while_waiting_is_seen_once_held() {
    let (first, second) = (client().await, client().await);
    let lock = first.lock("revoke-waiting").unwrap();
    let held = lock.lock().await.unwrap();
    let revocable = second.lock("revoke-waiting").unwrap().revocable();
    assert!(revocable.is_revocable());
    let waiting = tokio::spawn(async move { revocable.lock().await.unwrap() });
    let raw = raw(server()).await;
    wait_children(&raw, lock.path(), 2).await;
    let mut nodes = children(&raw, lock.path()).await;
    nodes.sort_by_key(|n| n[n.len() - 10..].to_owned());
    // The waiter's node is asked; the holder, not revocable, is not told.
    assert!(lock.revoke(&nodes[1]).await.unwrap());
    assert!(matches!(
        lock.revoke("../other").await,
        Err(Error::InvalidName { .. })
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!held.is_lost());
    held.unlock().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .unwrap()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), guard.lost())
        .await
        .expect("the request written while it waited is seen once it holds");
    assert_eq!(
        guard.loss_reason(),
        Some(keylatch_core::LossReason::Revoked)
    );
    // Still held until released: the lock is not free.
    assert!(lock.try_lock().await.unwrap().is_none());
    guard.unlock().await.unwrap();
    assert!(!lock.revoke(&nodes[1]).await.unwrap(), "the node is gone");
    first.shutdown().await.unwrap();
    second.shutdown().await.unwrap();
}
