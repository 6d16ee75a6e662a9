//! Hand-over by owner id: a process given another's owner id adopts the hold (renews it,
//! watches it, releases it) or releases it without a guard; on one server and on a cluster;
//! the reentrant lock, the fair lock (whose releases keep the queue's order) and the permits
//! of the expirable semaphore.
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keylatch::redis::{self, AsyncCommands};
use keylatch::{Client, Config, Error, LossReason, OwnerId};
use keylatch_testkit::RedisCluster;
use keylatch_tests::{client_with, eventually, keyspace, queue_ids, raw, server, unique};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const WATCHDOG: Duration = Duration::from_millis(900);
const POLL: Duration = Duration::from_millis(200);
/// Long enough that no queued waiter is refreshed or retries while a test looks at the keys.
const QUIET: Duration = Duration::from_secs(60);
/// A bound on waits that must end, so that a broken hand-over fails instead of hanging.
const HANG: Duration = Duration::from_secs(20);

async fn cluster_client(cluster: &RedisCluster) -> Client {
    let config = Config::builder()
        .url(cluster.url())
        .watchdog_timeout(WATCHDOG)
        .fallback_poll(POLL)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    Client::connect_with(config).await.unwrap()
}

async fn held(conn: &mut redis::aio::MultiplexedConnection, name: &str, owner: OwnerId) -> bool {
    let n: i64 = redis::cmd("HEXISTS")
        .arg(name)
        .arg(owner.to_string())
        .query_async(conn)
        .await
        .unwrap();
    n == 1
}

/// A scheduler acquires and forgets; a worker adopts by the owner id's text and holds the lock
/// for several watchdog timeouts; a third client cannot get in until the worker releases.
async fn adopt_and_hold(scheduler: &Client, worker: &Client, third: &Client, name: &str) {
    let guard = scheduler.lock(name).lock().await.unwrap();
    let owner_text = guard.owner_id().to_string();
    guard.forget();
    let owner: OwnerId = owner_text.parse().unwrap();
    let adopted = worker
        .lock(name)
        .adopt(owner)
        .await
        .unwrap()
        .expect("the scheduler's hold");
    assert_eq!(adopted.owner_id(), owner);
    // Three watchdog timeouts: only the worker's renewals keep it.
    let mut refused = 0;
    for _ in 0..6 {
        tokio::time::sleep(WATCHDOG / 2).await;
        assert!(
            third.lock(name).try_lock().await.unwrap().is_none(),
            "taken while adopted"
        );
        refused += 1;
    }
    assert_eq!(refused, 6);
    assert!(!adopted.is_lost());
    adopted.unlock().await.unwrap();
    let next = third.lock(name).try_lock().await.unwrap();
    assert!(next.is_some(), "still held after the adopter released it");
    next.unwrap().unlock().await.unwrap();
}

#[tokio::test]
async fn a_forgotten_hold_is_adopted_renewed_and_released_by_another_process() {
    let server = server();
    let scheduler = client_with(&server, WATCHDOG, POLL).await;
    let worker = client_with(&server, WATCHDOG, POLL).await;
    let third = client_with(&server, WATCHDOG, POLL).await;
    adopt_and_hold(&scheduler, &worker, &third, &unique("handover")).await;
    for c in [scheduler, worker, third] {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn adopting_an_owner_that_holds_nothing_writes_nothing() {
    let server = server();
    let a = client_with(&server, WATCHDOG, POLL).await;
    let b = client_with(&server, WATCHDOG, POLL).await;
    let mut conn = raw(&server).await;
    let name = unique("handover-none");
    let stranger = a.owner_id(keylatch::Owner::unique());
    assert!(b.lock(&name).adopt(stranger).await.unwrap().is_none());
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&name)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0);
    // Held by someone else: still not this owner's.
    let guard = a.lock(&name).lock().await.unwrap();
    assert!(b.lock(&name).adopt(stranger).await.unwrap().is_none());
    assert!(held(&mut conn, &name, guard.owner_id()).await);
    guard.unlock().await.unwrap();
    assert_eq!(
        b.stats().watchdog.holds,
        0,
        "a refused adoption registered a hold"
    );
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test]
async fn unlock_as_releases_a_hold_without_its_guard_and_its_guard_learns_it() {
    let server = server();
    let a = client_with(&server, WATCHDOG, POLL).await;
    let b = client_with(&server, WATCHDOG, POLL).await;
    let mut conn = raw(&server).await;
    let name = unique("handover-unlock");
    let guard = a.lock(&name).lock().await.unwrap();
    let owner = guard.owner_id();
    b.lock(&name).unlock_as(owner).await.unwrap();
    assert!(!held(&mut conn, &name, owner).await);
    assert!(matches!(
        b.lock(&name).unlock_as(owner).await,
        Err(Error::NotHeld { .. })
    ));
    // The guard's watchdog finds the hold gone within a renewal or two.
    tokio::time::timeout(WATCHDOG * 3, guard.lost())
        .await
        .expect("the guard never learned its hold was released");
    assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test]
async fn hand_over_on_a_cluster() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster");
    let (scheduler, worker, third) = (
        cluster_client(&cluster).await,
        cluster_client(&cluster).await,
        cluster_client(&cluster).await,
    );
    for i in 0..3 {
        adopt_and_hold(
            &scheduler,
            &worker,
            &third,
            &unique(&format!("handover-c{i}")),
        )
        .await;
    }
    for c in [scheduler, worker, third] {
        c.shutdown().await.unwrap();
    }
}

/// A scheduler acquires a permit and forgets it; a worker adopts it by id and keeps it for
/// several watchdog timeouts (the semaphore stays full), then gives it back.
async fn adopt_a_permit(scheduler: &Client, worker: &Client, name: &str) {
    let semaphore = scheduler.permit_expirable_semaphore(name);
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let id = semaphore.acquire().await.unwrap().forget();
    let workers = worker.permit_expirable_semaphore(name);
    let permit = workers
        .adopt(&id)
        .await
        .unwrap()
        .expect("the scheduler's permit");
    assert_eq!(permit.id(), id);
    for _ in 0..6 {
        tokio::time::sleep(WATCHDOG / 2).await;
        assert!(
            workers.try_acquire().await.unwrap().is_none(),
            "the adopted permit came back while held"
        );
    }
    assert!(!permit.is_lost());
    permit.release().await.unwrap();
    assert_eq!(workers.available_permits().await.unwrap(), 1);
    assert!(
        workers.adopt(&id).await.unwrap().is_none(),
        "a released id was adopted"
    );
    assert!(workers.adopt("not-an-id").await.unwrap().is_none());
}

#[tokio::test]
async fn a_forgotten_permit_is_adopted_by_id() {
    let server = server();
    let scheduler = client_with(&server, WATCHDOG, POLL).await;
    let worker = client_with(&server, WATCHDOG, POLL).await;
    adopt_a_permit(&scheduler, &worker, &unique("handover-permit")).await;
    scheduler.shutdown().await.unwrap();
    worker.shutdown().await.unwrap();
}

/// A waiter on the fair lock that, once it has the lock, records its index and holds the lock
/// until let go. Each acquisition is its own owner, so the waiter takes the lock handed to it
/// by a release (the default direct grant): a release that frees the lock has written the
/// head's hold before it returns.
struct Waiter {
    id: String,
    task: JoinHandle<()>,
    go: oneshot::Sender<()>,
}

impl Waiter {
    /// Queues a waiter of `client` behind the holder of `name`, after the `before` waiters
    /// queued already.
    async fn queue(
        client: &Client,
        name: &str,
        index: usize,
        before: usize,
        order: &Arc<Mutex<Vec<usize>>>,
    ) -> Waiter {
        let lock = client.fair_lock(name).with_waiter_timeout(QUIET);
        let order = order.clone();
        let (go, let_go) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            order.lock().unwrap().push(index);
            let _ = let_go.await;
            guard.unlock().await.unwrap();
        });
        let probe = client.fair_lock(name);
        let queued = eventually(HANG, || async {
            queue_ids(&probe).await.len() == before + 1
        })
        .await;
        assert!(queued, "waiter {index} did not queue");
        let id = queue_ids(&probe).await.pop().unwrap();
        Waiter { id, task, go }
    }

    fn owner(&self) -> OwnerId {
        self.id.parse().unwrap()
    }

    /// Lets go of the lock (once the waiter has it) and waits for the waiter's release.
    async fn finish(self) {
        let _ = self.go.send(());
        tokio::time::timeout(HANG, self.task)
            .await
            .expect("a waiter never got the lock")
            .unwrap();
    }
}

/// A scheduler acquires the fair lock and forgets; a worker adopts it; two waiters queue in a
/// known order and stay queued for several watchdog timeouts (only the worker's renewals keep
/// the hold); the worker's release hands the lock to the first waiter, whose release hands it
/// to the second.
async fn adopt_fair_and_hand_on(scheduler: &Client, worker: &Client, third: &Client, name: &str) {
    let guard = scheduler.fair_lock(name).lock().await.unwrap();
    let owner: OwnerId = guard.owner_id().to_string().parse().unwrap();
    guard.forget();
    let adopted = worker
        .fair_lock(name)
        .adopt(owner)
        .await
        .unwrap()
        .expect("the scheduler's fair hold");
    assert_eq!(adopted.owner_id(), owner);
    let order = Arc::new(Mutex::new(Vec::new()));
    let first = Waiter::queue(third, name, 1, 0, &order).await;
    let second = Waiter::queue(scheduler, name, 2, 1, &order).await;
    let probe = third.fair_lock(name);
    for _ in 0..6 {
        tokio::time::sleep(WATCHDOG / 2).await;
        assert!(probe.is_held_by(owner).await.unwrap(), "lost while adopted");
        assert!(
            order.lock().unwrap().is_empty(),
            "a waiter got in while adopted"
        );
    }
    assert_eq!(
        queue_ids(&probe).await,
        [first.id.clone(), second.id.clone()]
    );
    assert!(!adopted.is_lost());
    adopted.unlock().await.unwrap();
    // The fair release handed the lock to the head of the queue as it freed it.
    assert!(
        probe.is_held_by(first.owner()).await.unwrap(),
        "not handed to the first waiter"
    );
    assert!(!probe.is_held_by(second.owner()).await.unwrap());
    assert_eq!(queue_ids(&probe).await, [second.id.as_str()]);
    let second_owner = second.owner();
    first.finish().await;
    assert!(
        probe.is_held_by(second_owner).await.unwrap(),
        "not handed on to the second"
    );
    second.finish().await;
    assert_eq!(
        *order.lock().unwrap(),
        [1, 2],
        "not handed on in queue order"
    );
    assert!(!probe.is_locked().await.unwrap());
}

/// A holder's fair hold is released by another client without its guard: the release hands
/// the lock to the queued waiter, and the holder's guard learns its hold is gone.
async fn fair_unlock_as(holder: &Client, other: &Client, third: &Client, name: &str) {
    let guard = holder.fair_lock(name).lock().await.unwrap();
    let owner = guard.owner_id();
    let order = Arc::new(Mutex::new(Vec::new()));
    let waiter = Waiter::queue(third, name, 1, 0, &order).await;
    let lock = other.fair_lock(name);
    lock.unlock_as(owner).await.unwrap();
    assert!(!lock.is_held_by(owner).await.unwrap());
    assert!(
        lock.is_held_by(waiter.owner()).await.unwrap(),
        "the waiter was not handed the lock"
    );
    assert!(queue_ids(&lock).await.is_empty());
    assert!(matches!(
        lock.unlock_as(owner).await,
        Err(Error::NotHeld { .. })
    ));
    tokio::time::timeout(HANG, guard.lost())
        .await
        .expect("the guard never learned its hold was released");
    assert_eq!(guard.loss_reason(), Some(LossReason::Gone));
    assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));
    waiter.finish().await;
    assert_eq!(*order.lock().unwrap(), [1]);
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn a_forgotten_fair_hold_is_adopted_and_released_to_the_first_waiter() {
    let server = server();
    let scheduler = client_with(&server, WATCHDOG, POLL).await;
    let worker = client_with(&server, WATCHDOG, POLL).await;
    let third = client_with(&server, WATCHDOG, POLL).await;
    adopt_fair_and_hand_on(&scheduler, &worker, &third, &unique("fair-handover")).await;
    for c in [scheduler, worker, third] {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn fair_unlock_as_releases_a_hold_to_the_waiter_and_its_guard_learns_it() {
    let server = server();
    let holder = client_with(&server, WATCHDOG, POLL).await;
    let other = client_with(&server, WATCHDOG, POLL).await;
    let third = client_with(&server, WATCHDOG, POLL).await;
    fair_unlock_as(&holder, &other, &third, &unique("fair-unlock-as")).await;
    for c in [holder, other, third] {
        c.shutdown().await.unwrap();
    }
}

/// Adopting on the fair lock (reentrant or not) an owner that does not hold it, free or held
/// by another with two waiters queued (one of them the adopted id), changes no key and
/// registers nothing.
#[tokio::test]
async fn adopting_a_fair_owner_that_holds_nothing_writes_nothing() {
    let server = server();
    let a = client_with(&server, WATCHDOG, POLL).await;
    let b = client_with(&server, WATCHDOG, POLL).await;
    let waiters = client_with(&server, WATCHDOG, QUIET).await;
    let mut conn = raw(&server).await;
    let name = unique("fair-handover-none");
    let stranger = a.owner_id(keylatch::Owner::unique());
    let handles = [b.fair_lock(&name), b.non_reentrant_fair_lock(&name)];
    for lock in &handles {
        assert!(lock.adopt(stranger).await.unwrap().is_none());
    }
    assert!(
        keyspace(&mut conn).await.is_empty(),
        "a refused adoption wrote"
    );
    // Held (a fixed lease: nothing renews it) with two waiters queued.
    let guard = a.fair_lock(&name).lock_with_lease(QUIET).await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let first = Waiter::queue(&waiters, &name, 1, 0, &order).await;
    let second = Waiter::queue(&waiters, &name, 2, 1, &order).await;
    let before = keyspace(&mut conn).await;
    for lock in &handles {
        assert!(lock.adopt(stranger).await.unwrap().is_none());
        let queued = first.owner();
        assert!(
            lock.adopt(queued).await.unwrap().is_none(),
            "adopted a waiter"
        );
    }
    assert_eq!(
        keyspace(&mut conn).await,
        before,
        "a refused adoption wrote"
    );
    let pttl: i64 = conn.pttl(&name).await.unwrap();
    assert!(
        pttl > (QUIET / 2).as_millis() as i64,
        "the holder's lease was reset"
    );
    assert_eq!(
        queue_ids(&handles[0]).await,
        [first.id.clone(), second.id.clone()]
    );
    assert_eq!(
        b.stats().watchdog.holds,
        0,
        "a refused adoption registered a hold"
    );
    guard.unlock().await.unwrap();
    first.finish().await;
    second.finish().await;
    for c in [a, b, waiters] {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn fair_hand_over_on_a_cluster() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster");
    let (a, b, c) = (
        cluster_client(&cluster).await,
        cluster_client(&cluster).await,
        cluster_client(&cluster).await,
    );
    for i in 0..3 {
        adopt_fair_and_hand_on(&a, &b, &c, &unique(&format!("fair-handover-c{i}"))).await;
        fair_unlock_as(&a, &b, &c, &unique(&format!("fair-unlock-as-c{i}"))).await;
    }
    for client in [a, b, c] {
        client.shutdown().await.unwrap();
    }
}
