//! Interoperability with Apache Curator: keylatch's recipes and a client following Curator's
//! protocol (tests/support/curator.rs, written from Curator's source on a raw session) contend
//! for the same paths on a real ZooKeeper server.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keylatch_core::DistributedLock;
use support::curator::{
    Curator, LEASE_BASE_NAME, LOCK_NAME, READ_LOCK_NAME, WRITE_LOCK_NAME, is_curator_node,
    standard_fix_for_sorting,
};
use support::{children, client, raw, server, wait_children};

/// A bound for what must happen (a correctness bound, generous for a loaded machine).
const BOUND: Duration = Duration::from_secs(30);

async fn curator() -> Curator {
    Curator::connect(&server().connect_string()).await
}

/// Counts the holders of a critical section: how many at once at most, how many entered, and
/// a read-then-written counter that loses updates when two are inside.
#[derive(Clone, Default)]
struct Section {
    inside: Arc<AtomicUsize>,
    max: Arc<AtomicUsize>,
    entered: Arc<AtomicUsize>,
    unguarded: Arc<Mutex<usize>>,
}

impl Section {
    async fn run(&self) {
        let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        self.entered.fetch_add(1, Ordering::SeqCst);
        let seen = *self.unguarded.lock().unwrap();
        tokio::time::sleep(Duration::from_millis(3)).await;
        *self.unguarded.lock().unwrap() = seen + 1;
        self.inside.fetch_sub(1, Ordering::SeqCst);
    }

    fn assert_exclusive(&self, total: usize) {
        assert_eq!(self.entered.load(Ordering::SeqCst), total, "acquisitions");
        assert_eq!(self.max.load(Ordering::SeqCst), 1, "two holders at once");
        assert_eq!(*self.unguarded.lock().unwrap(), total, "lost updates");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutex_excludes_across_curator_and_keylatch() {
    let path = "/apps/orders/lock";
    let keylatch = [client().await, client().await];
    let curators = Arc::new([curator().await, curator().await]);
    let section = Section::default();
    let mut tasks = Vec::new();
    for t in 0..8 {
        let section = section.clone();
        if t % 2 == 0 {
            let lock = keylatch[t / 2 % 2].lock(path).unwrap();
            tasks.push(tokio::spawn(async move {
                for _ in 0..4 {
                    let guard = lock.lock().await.unwrap();
                    section.run().await;
                    guard.unlock().await.unwrap();
                }
            }));
        } else {
            let curators = curators.clone();
            tasks.push(tokio::spawn(async move {
                let curator = &curators[t / 2 % 2];
                for _ in 0..4 {
                    let node = curator.mutex(path).await;
                    section.run().await;
                    curator.release(&node).await;
                }
            }));
        }
    }
    for task in tasks {
        tokio::time::timeout(BOUND, task).await.unwrap().unwrap();
    }
    section.assert_exclusive(32);
    assert!(children(curators[0].zk(), path).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_both_are_served_in_order() {
    let path = "/apps/orders/fifo";
    let (a, b) = (client().await, curator().await);
    let b = Arc::new(b);
    let raw = raw(server()).await;
    let holder = b.mutex(path).await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    // keylatch, Curator, keylatch, Curator waiters behind a Curator holder.
    for i in 0..4 {
        let order = order.clone();
        if i % 2 == 0 {
            let lock = a.lock(path).unwrap();
            tasks.push(tokio::spawn(async move {
                let guard = lock.lock().await.unwrap();
                order.lock().unwrap().push(i);
                guard.unlock().await.unwrap();
            }));
        } else {
            let curator = b.clone();
            tasks.push(tokio::spawn(async move {
                let node = curator.mutex(path).await;
                order.lock().unwrap().push(i);
                curator.release(&node).await;
            }));
        }
        wait_children(&raw, path, i + 2).await;
    }
    assert!(order.lock().unwrap().is_empty(), "went past the holder");
    b.release(&holder).await;
    for task in tasks {
        tokio::time::timeout(BOUND, task).await.unwrap().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
    wait_children(&raw, path, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_waits_for_the_others_holder() {
    let path = "/apps/orders/handoff";
    let (a, b) = (client().await, Arc::new(curator().await));
    let raw = raw(server()).await;
    // A keylatch holder: Curator's timed acquire gives up and leaves no node.
    let lock = a.lock(path).unwrap();
    let guard = lock.lock().await.unwrap();
    assert!(
        b.mutex_for(path, Duration::from_millis(300))
            .await
            .is_none()
    );
    assert_eq!(children(&raw, path).await.len(), 1);
    let curator = b.clone();
    let waiter = tokio::spawn(async move { curator.mutex(path).await });
    wait_children(&raw, path, 2).await;
    guard.unlock().await.unwrap();
    let node = tokio::time::timeout(BOUND, waiter).await.unwrap().unwrap();
    // A Curator holder: keylatch's try_lock fails, its waiter gets the lock on the delete.
    assert!(lock.try_lock().await.unwrap().is_none());
    assert!(lock.is_locked().await.unwrap());
    let waiting = lock.clone();
    let waiter = tokio::spawn(async move { waiting.lock().await.unwrap() });
    wait_children(&raw, path, 2).await;
    b.release(&node).await;
    let guard = tokio::time::timeout(BOUND, waiter).await.unwrap().unwrap();
    assert_eq!(children(&raw, path).await.len(), 1);
    guard.unlock().await.unwrap();
    assert!(children(&raw, path).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keylatch_nodes_read_as_curators() {
    let (a, b) = (client().await, Arc::new(curator().await));
    let raw = raw(server()).await;
    // The mutex: keylatch, Curator, keylatch in line, one order for both.
    let path = "/apps/orders/names";
    let lock = a.lock(path).unwrap();
    let first = lock.lock().await.unwrap();
    let curator = b.clone();
    let curator_node = tokio::spawn(async move { curator.mutex(path).await });
    wait_children(&raw, path, 2).await;
    let third = tokio::spawn(async move { lock.lock().await.unwrap() });
    wait_children(&raw, path, 3).await;
    let names = children(&raw, path).await;
    for name in &names {
        assert!(is_curator_node(name, LOCK_NAME), "{name}");
    }
    let mut curator_order = names.clone();
    curator_order.sort_by(|x, y| {
        standard_fix_for_sorting(x, LOCK_NAME).cmp(standard_fix_for_sorting(y, LOCK_NAME))
    });
    let contenders = a.contenders(path, 10).await.unwrap();
    let keylatch_order: Vec<_> = contenders.nodes.iter().map(|c| c.node.clone()).collect();
    assert_eq!(keylatch_order, curator_order);
    assert_eq!(contenders.nodes[1].data.as_deref(), Some("127.0.0.1"));
    assert_eq!(contenders.nodes[1].kind, "lock");
    first.unlock().await.unwrap();
    let node = tokio::time::timeout(BOUND, curator_node)
        .await
        .unwrap()
        .unwrap();
    b.release(&node).await;
    tokio::time::timeout(BOUND, third)
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();
    // The read-write lock and the semaphore.
    let rw = a.read_write_lock("/apps/orders/names-rw").unwrap();
    let r = rw.read_lock().lock().await.unwrap();
    let r2 = b.read("/apps/orders/names-rw").await;
    for name in children(&raw, "/apps/orders/names-rw").await {
        assert!(is_curator_node(&name, READ_LOCK_NAME), "{name}");
    }
    r.unlock().await.unwrap();
    b.release(&r2).await;
    let w = rw.write_lock().lock().await.unwrap();
    for name in children(&raw, "/apps/orders/names-rw").await {
        assert!(is_curator_node(&name, WRITE_LOCK_NAME), "{name}");
    }
    w.unlock().await.unwrap();
    let permit = a
        .semaphore("/apps/orders/names-sem", 2)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let lease = b.lease("/apps/orders/names-sem", 2).await;
    let leases = children(&raw, "/apps/orders/names-sem/leases").await;
    assert_eq!(leases.len(), 2);
    for name in &leases {
        assert!(is_curator_node(name, LEASE_BASE_NAME), "{name}");
    }
    assert!(is_curator_node(permit.id(), LEASE_BASE_NAME));
    permit.release().await.unwrap();
    b.release(&lease).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_writers_exclude_across_both() {
    let path = "/apps/orders/rw";
    let (a, b) = (client().await, Arc::new(curator().await));
    let raw = raw(server()).await;
    let rw = a.read_write_lock(path).unwrap();
    let short = Duration::from_millis(300);
    // Curator and keylatch readers share; neither side's writer gets in.
    let curator_read = b.read(path).await;
    let keylatch_read = rw
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("readers share");
    assert!(rw.write_lock().try_lock().await.unwrap().is_none());
    assert!(b.rw_for(path, true, short).await.is_none());
    assert_eq!(children(&raw, path).await.len(), 2);
    // A Curator writer waits for both readers; a later keylatch reader waits for it.
    let curator = b.clone();
    let writer = tokio::spawn(async move { curator.write(path).await });
    wait_children(&raw, path, 3).await;
    assert!(rw.read_lock().try_lock().await.unwrap().is_none());
    keylatch_read.unlock().await.unwrap();
    b.release(&curator_read).await;
    let curator_write = tokio::time::timeout(BOUND, writer).await.unwrap().unwrap();
    // The Curator writer excludes keylatch's readers and writers; a waiting reader goes when
    // it releases.
    assert!(rw.read_lock().try_lock().await.unwrap().is_none());
    assert!(rw.write_lock().try_lock().await.unwrap().is_none());
    let reading = rw.read_lock();
    let reader = tokio::spawn(async move { reading.lock().await.unwrap() });
    wait_children(&raw, path, 2).await;
    b.release(&curator_write).await;
    let r = tokio::time::timeout(BOUND, reader).await.unwrap().unwrap();
    r.unlock().await.unwrap();
    // A keylatch writer excludes Curator's readers and writers; a Curator reader waiting for
    // it goes when it releases.
    let w = rw.write_lock().lock().await.unwrap();
    assert!(b.rw_for(path, false, short).await.is_none());
    assert!(b.rw_for(path, true, short).await.is_none());
    assert_eq!(children(&raw, path).await.len(), 1);
    let curator = b.clone();
    let reader = tokio::spawn(async move { curator.read(path).await });
    wait_children(&raw, path, 2).await;
    w.unlock().await.unwrap();
    let node = tokio::time::timeout(BOUND, reader).await.unwrap().unwrap();
    b.release(&node).await;
    assert!(children(&raw, path).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_readers_and_writers_of_both_never_overlap_a_writer() {
    let path = "/apps/orders/rw-mixed";
    let keylatch = client().await;
    let curator = Arc::new(curator().await);
    let readers = Arc::new(AtomicUsize::new(0));
    let writers = Arc::new(AtomicUsize::new(0));
    let violations = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..8 {
        let (readers, writers, violations) = (readers.clone(), writers.clone(), violations.clone());
        let rw = keylatch.read_write_lock(path).unwrap();
        let curator = curator.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..4 {
                let write = (t + i) % 3 == 0;
                let by_curator = t % 2 == 1;
                let guard = match (by_curator, write) {
                    (true, true) => Err(curator.write(path).await),
                    (true, false) => Err(curator.read(path).await),
                    (false, true) => Ok(rw.write_lock().lock().await.unwrap()),
                    (false, false) => Ok(rw.read_lock().lock().await.unwrap()),
                };
                let (mine, other) = if write {
                    (&writers, &readers)
                } else {
                    (&readers, &writers)
                };
                let before = mine.fetch_add(1, Ordering::SeqCst);
                if other.load(Ordering::SeqCst) != 0 || (write && before != 0) {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
                mine.fetch_sub(1, Ordering::SeqCst);
                match guard {
                    Ok(guard) => guard.unlock().await.unwrap(),
                    Err(node) => curator.release(&node).await,
                }
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(BOUND, task).await.unwrap().unwrap();
    }
    assert_eq!(violations.load(Ordering::SeqCst), 0, "a writer overlapped");
    assert!(children(curator.zk(), path).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_leases_never_exceed_the_maximum_across_both() {
    let path = "/apps/orders/pool";
    let leases = "/apps/orders/pool/leases";
    let keylatch = [client().await, client().await];
    let curators = Arc::new([curator().await, curator().await]);
    let inside = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let max_nodes = Arc::new(AtomicUsize::new(0));
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..8 {
        let semaphore = keylatch[t / 2 % 2].semaphore(path, 3).unwrap();
        let curators = curators.clone();
        let (inside, max, max_nodes, acquired) = (
            inside.clone(),
            max.clone(),
            max_nodes.clone(),
            acquired.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let curator = &curators[t / 2 % 2];
            for _ in 0..3 {
                let permit = if t % 2 == 0 {
                    Ok(semaphore.acquire().await.unwrap())
                } else {
                    Err(curator.lease(path, 3).await)
                };
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                acquired.fetch_add(1, Ordering::SeqCst);
                let nodes = children(curator.zk(), leases).await.len();
                max_nodes.fetch_max(nodes, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                match permit {
                    Ok(permit) => permit.release().await.unwrap(),
                    Err(node) => curator.release(&node).await,
                }
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(BOUND, task).await.unwrap().unwrap();
    }
    assert_eq!(acquired.load(Ordering::SeqCst), 24);
    let (max, max_nodes) = (max.load(Ordering::SeqCst), max_nodes.load(Ordering::SeqCst));
    assert!(max <= 3, "{max} holders at once");
    // Curator's order: a lease node is created, then counted; the one contender holding the
    // `locks` mutex may have a node there while it waits.
    assert!(max_nodes <= 4, "{max_nodes} lease nodes at once");
    assert!(max >= 2, "permits were never shared");
    let raw = raw(server()).await;
    assert!(children(&raw, leases).await.is_empty());
    assert!(children(&raw, "/apps/orders/pool/locks").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_curator_sessions_leases_return() {
    let path = "/apps/orders/crash";
    let leases = "/apps/orders/crash/leases";
    let a = client().await;
    let raw = raw(server()).await;
    let semaphore = a.semaphore(path, 2).unwrap();
    // keylatch holds every permit: Curator's timed acquire gives up and leaves nothing.
    let (one, two) = (
        semaphore.acquire().await.unwrap(),
        semaphore.acquire().await.unwrap(),
    );
    let b = curator().await;
    assert!(
        b.lease_for(path, 2, Duration::from_millis(300))
            .await
            .is_none()
    );
    assert_eq!(children(&raw, leases).await.len(), 2);
    assert!(children(&raw, "/apps/orders/crash/locks").await.is_empty());
    one.release().await.unwrap();
    two.release().await.unwrap();
    // Curator holds every permit, then its session ends without releasing.
    let (x, y) = (b.lease(path, 2).await, b.lease(path, 2).await);
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    let waiting = semaphore.clone();
    let waiter = tokio::spawn(async move { waiting.acquire().await.unwrap() });
    wait_children(&raw, leases, 3).await;
    let _ = (x, y);
    drop(b);
    let permit = tokio::time::timeout(BOUND, waiter).await.unwrap().unwrap();
    wait_children(&raw, leases, 1).await;
    permit.release().await.unwrap();
    assert!(children(&raw, leases).await.is_empty());
}
