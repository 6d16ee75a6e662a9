//! Extending a hold of the read-write lock (read and write guards) and of the permit-expirable
//! semaphore (`Permit`): `extend` keeps it past its original lease, `set_lease` shortens it (a
//! reader's shorter lease ends its hold, not another reader's), `watchdog` keeps it past several
//! leases, and a hold whose key was deleted is found gone. Each on a single server and on a
//! 3-primary cluster.
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch::redis::aio::MultiplexedConnection;
use keylatch::{Client, Error, LockGuard, LossReason};
use keylatch_testkit::{RedisCluster, RedisServer};
use keylatch_tests::{raw, unique};
use tokio::time::Instant;

/// Correctness bound for a loss or an acquisition to happen: generous for a loaded machine.
const WITHIN: Duration = Duration::from_secs(10);
/// The clients' watchdog timeout: short, so a watchdog test sees several leases.
const WATCHDOG: Duration = Duration::from_millis(900);
/// The lease a hold is acquired with before a `set_lease` shortens it.
const LONG: Duration = Duration::from_secs(60);
/// The shortened lease.
const SHORT: Duration = Duration::from_millis(300);

/// The servers a scenario runs against.
enum Servers {
    Single(Box<RedisServer>),
    Cluster(RedisCluster),
}

impl Servers {
    async fn single() -> Servers {
        Servers::Single(Box::new(keylatch_tests::server()))
    }

    async fn cluster() -> Servers {
        let cluster = tokio::task::spawn_blocking(RedisCluster::start)
            .await
            .unwrap()
            .expect("start a cluster");
        Servers::Cluster(cluster)
    }

    /// Two clients (two owners' worth): on a cluster, one from the seed list, one from a node.
    async fn clients(&self) -> (Client, Client) {
        let (a, b) = match self {
            Servers::Single(server) => (server.url(), server.url()),
            Servers::Cluster(cluster) => (cluster.seed_url(), cluster.url()),
        };
        (connect(a).await, connect(b).await)
    }

    /// A plain connection to the node that holds `key`.
    async fn raw(&self, key: &str) -> MultiplexedConnection {
        match self {
            Servers::Single(server) => raw(server).await,
            Servers::Cluster(cluster) => raw(cluster.node_for_key(key).unwrap()).await,
        }
    }

    async fn pttl(&self, key: &str) -> i64 {
        self.raw(key).await.pttl(key).await.unwrap()
    }

    async fn del(&self, key: &str) {
        let _: () = self.raw(key).await.del(key).await.unwrap();
    }
}

async fn connect(url: String) -> Client {
    let config = keylatch::Config::builder()
        .url(url)
        .watchdog_timeout(WATCHDOG)
        .fallback_poll(Duration::from_secs(2))
        .build()
        .expect("config");
    Client::connect_with(config).await.expect("connect")
}

/// The per-hold key of `guard`'s first read hold on `name`.
fn read_key(name: &str, guard: &LockGuard) -> String {
    format!("{{{name}}}:{}:rwlock_timeout:1", guard.owner_id())
}

/// Asserts `refused` answers true (another client is kept out) on every try until `until`.
async fn refused_until<F, Fut>(until: Instant, mut refused: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let mut tries = 0;
    while Instant::now() < until {
        assert!(
            refused().await,
            "another client got in after {tries} refusals"
        );
        tries += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(tries >= 1, "another client tried at least once");
}

async fn wait_lost(guard: &LockGuard, reason: LossReason) {
    tokio::time::timeout(WITHIN, guard.lost()).await.unwrap();
    assert_eq!(guard.loss_reason(), Some(reason));
}

/// Read and write guards: extend, set_lease, watchdog, a deleted key.
async fn rwlock_scenarios(servers: &Servers) {
    let (a, b) = servers.clients().await;
    let write_refused = |name: String| {
        let b = b.clone();
        move || {
            let (b, name) = (b.clone(), name.clone());
            async move { b.rw_lock(&name).try_write().await.unwrap().is_none() }
        }
    };

    // extend keeps a read hold past its original lease.
    let name = unique("extend-rw-read");
    let lease = Duration::from_secs(1);
    let acquired = Instant::now();
    let read = a
        .rw_lock(&name)
        .read_lock()
        .lock_with_lease(lease)
        .await
        .unwrap();
    read.extend(Duration::from_secs(3)).await.unwrap();
    refused_until(
        acquired + lease + Duration::from_millis(500),
        write_refused(name.clone()),
    )
    .await;
    assert!(!read.is_lost());
    assert!(servers.pttl(&name).await > 0, "the hash still has a lease");
    read.unlock().await.unwrap();

    // extend keeps a write hold past its original lease.
    let name = unique("extend-rw-write");
    let acquired = Instant::now();
    let write = a
        .rw_lock(&name)
        .write_lock()
        .lock_with_lease(lease)
        .await
        .unwrap();
    write.extend(Duration::from_secs(3)).await.unwrap();
    let read_refused = {
        let (b, name) = (b.clone(), name.clone());
        move || {
            let (b, name) = (b.clone(), name.clone());
            async move { b.rw_lock(&name).try_read().await.unwrap().is_none() }
        }
    };
    refused_until(acquired + lease + Duration::from_millis(500), read_refused).await;
    assert!(!write.is_lost());
    write.unlock().await.unwrap();

    // set_lease shortens a lone read hold: it ends, and a writer gets in.
    let name = unique("extend-rw-read-short");
    let mut read = a
        .rw_lock(&name)
        .read_lock()
        .lock_with_lease(LONG)
        .await
        .unwrap();
    read.set_lease(SHORT).await.unwrap();
    let pttl = servers.pttl(&name).await;
    assert!(
        (0..=300).contains(&pttl),
        "the hash's lease was shortened: {pttl}"
    );
    wait_lost(&read, LossReason::LeaseExpired).await;
    let taken = b
        .rw_lock(&name)
        .write_lock()
        .try_lock_for(WITHIN, Some(LONG))
        .await
        .unwrap();
    assert!(
        taken.is_some(),
        "a writer gets in once the short lease ends"
    );
    taken.unwrap().unlock().await.unwrap();

    // set_lease shortens one reader's hold, not another reader's longer one.
    let name = unique("extend-rw-read-other");
    let mut read = a
        .rw_lock(&name)
        .read_lock()
        .lock_with_lease(LONG)
        .await
        .unwrap();
    let other = b
        .rw_lock(&name)
        .read_lock()
        .lock_with_lease(LONG)
        .await
        .unwrap();
    read.set_lease(SHORT).await.unwrap();
    let pttl = servers.pttl(&read_key(&name, &read)).await;
    assert!(
        (0..=300).contains(&pttl),
        "this reader's hold was shortened: {pttl}"
    );
    wait_lost(&read, LossReason::LeaseExpired).await;
    let other_left = servers.pttl(&read_key(&name, &other)).await;
    let hash_left = servers.pttl(&name).await;
    assert!(
        other_left > 30_000,
        "the other reader keeps its lease: {other_left}"
    );
    assert!(
        hash_left > 30_000,
        "the lock lives as long as the other reader: {hash_left}"
    );
    assert!(!other.is_lost());
    assert!(
        a.rw_lock(&name).try_write().await.unwrap().is_none(),
        "still read-locked"
    );
    other.unlock().await.unwrap();

    // set_lease shortens a write hold: it ends, and another writer gets in.
    let name = unique("extend-rw-write-short");
    let mut write = a
        .rw_lock(&name)
        .write_lock()
        .lock_with_lease(LONG)
        .await
        .unwrap();
    write.set_lease(SHORT).await.unwrap();
    let pttl = servers.pttl(&name).await;
    assert!(
        (0..=300).contains(&pttl),
        "the write lease was shortened: {pttl}"
    );
    wait_lost(&write, LossReason::LeaseExpired).await;
    let taken = b
        .rw_lock(&name)
        .write_lock()
        .try_lock_for(WITHIN, Some(LONG))
        .await
        .unwrap();
    assert!(
        taken.is_some(),
        "another writer gets in once the short lease ends"
    );
    taken.unwrap().unlock().await.unwrap();

    // A writer that also reads: shortening the write lease keeps the lock for its read hold.
    let name = unique("extend-rw-downgrade");
    let rw = a.rw_lock(&name);
    let mut write = rw.write_lock().lock_with_lease(LONG).await.unwrap();
    let own_read = rw
        .read_lock()
        .with_owner(write.owner())
        .lock_with_lease(LONG)
        .await
        .unwrap();
    write.set_lease(SHORT).await.unwrap();
    let pttl = servers.pttl(&name).await;
    assert!(
        pttl > 30_000,
        "not below the writer's own read hold: {pttl}"
    );
    write.unlock().await.unwrap();
    own_read.unlock().await.unwrap();

    // watchdog() keeps read and write holds past several leases; set_lease switches back.
    for side in ["read", "write"] {
        let name = unique(&format!("extend-rw-watchdog-{side}"));
        let rw = a.rw_lock(&name);
        let short = Duration::from_millis(400);
        let mut guard = if side == "read" {
            rw.read_lock().lock_with_lease(short).await.unwrap()
        } else {
            rw.write_lock().lock_with_lease(short).await.unwrap()
        };
        guard.watchdog().await.unwrap();
        refused_until(Instant::now() + WATCHDOG * 4, write_refused(name.clone())).await;
        assert!(
            !guard.is_lost(),
            "the {side} hold was renewed by the watchdog"
        );
        if side == "read" {
            let left = servers.pttl(&read_key(&name, &guard)).await;
            assert!(left > 0, "the read hold's own key was renewed: {left}");
        }
        guard.set_lease(SHORT).await.unwrap();
        wait_lost(&guard, LossReason::LeaseExpired).await;
    }

    // A hold whose key was deleted is found gone.
    for side in ["read", "write"] {
        let name = unique(&format!("extend-rw-deleted-{side}"));
        let rw = a.rw_lock(&name);
        let guard = if side == "read" {
            rw.read_lock().lock_with_lease(LONG).await.unwrap()
        } else {
            rw.write_lock().lock_with_lease(LONG).await.unwrap()
        };
        servers.del(&name).await;
        let err = guard.extend(Duration::from_secs(1)).await.unwrap_err();
        assert!(matches!(err, Error::NotHeld { .. }), "{side}: got {err:?}");
        assert_eq!(guard.loss_reason(), Some(LossReason::Gone), "{side}");
        assert_eq!(servers.pttl(&name).await, -2, "{side}: nothing was written");
    }
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

/// The permit-expirable semaphore's `Permit`: extend, set_lease, watchdog, a deleted key.
async fn permit_scenarios(servers: &Servers) {
    let (a, b) = servers.clients().await;
    let name = unique("extend-permit");
    let semaphore = a.permit_expirable_semaphore(&name);
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let refused = || {
        let (b, name) = (b.clone(), name.clone());
        async move {
            let permit = b
                .permit_expirable_semaphore(&name)
                .try_acquire()
                .await
                .unwrap();
            permit.is_none()
        }
    };

    // extend keeps the permit past its original lease.
    let lease = Duration::from_secs(1);
    let acquired = Instant::now();
    let mut permit = semaphore.acquire_with_lease(lease).await.unwrap();
    let before = permit.valid_until().unwrap();
    permit.extend(Duration::from_secs(3)).await.unwrap();
    assert!(permit.valid_until().unwrap() > before + Duration::from_secs(2));
    refused_until(acquired + lease + Duration::from_millis(500), refused).await;
    assert!(!permit.is_lost());

    // set_lease shortens it: it ends, and another client takes the permit.
    permit.set_lease(SHORT).await.unwrap();
    let left = semaphore.remaining_lease(permit.id()).await.unwrap();
    assert!(
        left.is_none_or(|left| left <= SHORT),
        "the lease was shortened: {left:?}"
    );
    tokio::time::timeout(WITHIN, permit.lost()).await.unwrap();
    assert_eq!(permit.loss_reason(), Some(LossReason::LeaseExpired));
    let taken = b
        .permit_expirable_semaphore(&name)
        .try_acquire_for(WITHIN, Some(LONG))
        .await
        .unwrap();
    assert!(
        taken.is_some(),
        "another client takes the permit once the short lease ends"
    );
    drop(permit);
    taken.unwrap().release().await.unwrap();

    // watchdog() keeps it past several leases; set_lease switches back.
    let mut permit = semaphore
        .acquire_with_lease(Duration::from_millis(400))
        .await
        .unwrap();
    permit.watchdog().await.unwrap();
    refused_until(Instant::now() + WATCHDOG * 4, refused).await;
    assert!(!permit.is_lost(), "renewed by the watchdog");
    let left = semaphore.remaining_lease(permit.id()).await.unwrap();
    assert!(left.is_some(), "held on the server too");
    permit.set_lease(SHORT).await.unwrap();
    tokio::time::timeout(WITHIN, permit.lost()).await.unwrap();
    assert_eq!(permit.loss_reason(), Some(LossReason::LeaseExpired));
    drop(permit);

    // A permit whose key was deleted is unknown, and found gone.
    let permit = semaphore.acquire_with_lease(LONG).await.unwrap();
    servers.del(semaphore.timeout_key()).await;
    let err = permit.extend(Duration::from_secs(1)).await.unwrap_err();
    assert!(
        matches!(&err, Error::UnknownPermit { id, .. } if id == permit.id()),
        "got {err:?}"
    );
    assert_eq!(permit.loss_reason(), Some(LossReason::Gone));
    assert_eq!(
        servers.pttl(semaphore.timeout_key()).await,
        -2,
        "nothing was written"
    );
    drop(permit);
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test]
async fn rwlock_guards_extend_on_a_single_server() {
    rwlock_scenarios(&Servers::single().await).await;
}

#[tokio::test]
async fn expirable_permits_extend_on_a_single_server() {
    permit_scenarios(&Servers::single().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rwlock_guards_and_expirable_permits_extend_on_a_cluster() {
    let servers = Servers::cluster().await;
    rwlock_scenarios(&servers).await;
    permit_scenarios(&servers).await;
}

#[tokio::test]
async fn a_plain_semaphore_permit_has_no_lease_to_change() {
    let servers = Servers::single().await;
    let (a, _b) = servers.clients().await;
    let name = unique("extend-plain-semaphore");
    let semaphore = a.semaphore(&name);
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let mut guard = semaphore.acquire().await.unwrap().into_guard();
    let err = guard.extend(Duration::from_secs(1)).await.unwrap_err();
    let Error::Unsupported { reason, .. } = &err else {
        panic!("got {err:?}");
    };
    assert!(reason.contains("no lease"), "the reason says so: {reason}");
    assert!(matches!(
        guard.set_lease(SHORT).await,
        Err(Error::Unsupported { .. })
    ));
    assert!(matches!(
        guard.watchdog().await,
        Err(Error::Unsupported { .. })
    ));
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
}
