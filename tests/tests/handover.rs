//! Hand-over by owner id: a process given another's owner id adopts the hold (renews it,
//! watches it, releases it) or releases it without a guard; on one server and on a cluster.
use std::time::Duration;

use keylatch::redis;
use keylatch::{Client, Config, Error, OwnerId};
use keylatch_testkit::RedisCluster;
use keylatch_tests::{client_with, raw, server, unique};

const WATCHDOG: Duration = Duration::from_millis(900);
const POLL: Duration = Duration::from_millis(200);

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
    let connect = || async {
        let config = Config::builder()
            .url(cluster.url())
            .watchdog_timeout(WATCHDOG)
            .fallback_poll(POLL)
            .connect_timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        Client::connect_with(config).await.unwrap()
    };
    let (scheduler, worker, third) = (connect().await, connect().await, connect().await);
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
