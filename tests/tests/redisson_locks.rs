//! Redisson interop for the non-reentrant locks and the spin lock: a Redisson thread and a
//! keylatch owner meet on the same keys and exclude each other.
//!
//! The Redisson side is written here from Redisson's documented behaviour (`RLock`,
//! `getNonReentrantLock`, `getSpinLock`): the hash `name`, field `<client-uuid>:<thread-id>`
//! → hold count with PEXPIRE = lease; a holder that asks again for a non-reentrant lock gets
//! the error reply `NON_REENTRANT_REACQUIRE`; `RLock`'s full release publishes `0` on
//! `redisson_lock__channel:{name}`, the spin lock's publishes nothing.
use std::time::Duration;

use keylatch::redis::{self, AsyncCommands, Script};
use keylatch::{Client, Error, Owner, OwnerId, SpinBackoff};
use keylatch_tests::redisson::{RedissonFairThread, WATCHDOG_LEASE};
use keylatch_tests::{client, raw, server, unique};

/// A correctness bound for a wake-up, with slack for a loaded machine.
const BOUND: Duration = Duration::from_secs(10);

/// Redisson's lock acquire: `nil` when taken (or re-entered, unless non-reentrant), the
/// holder's PTTL otherwise. ARGV: lease ms, thread id, `1` for the non-reentrant variant.
const ACQUIRE: &str = r"
local mine = redis.call('hexists', KEYS[1], ARGV[2]) == 1
if mine and ARGV[3] == '1' then
  return redis.error_reply('NON_REENTRANT_REACQUIRE')
end
if mine or redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
";

/// Redisson's unlock: one hold less; the last one deletes the hash and, unless ARGV[2] is
/// empty (the spin lock), publishes ARGV[2] on KEYS[2]. `nil`: not the holder.
const UNLOCK: &str = r"
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then
  return 0
end
redis.call('del', KEYS[1])
if ARGV[2] ~= '' then
  redis.call('publish', KEYS[2], ARGV[2])
end
return 1
";

/// A Redisson thread: its id is an owner id of another client (another UUID, as another JVM's).
struct RedissonThread {
    conn: redis::aio::MultiplexedConnection,
    name: String,
    id: OwnerId,
    non_reentrant: bool,
    publishes: bool,
}

impl RedissonThread {
    async fn acquire(&mut self) -> redis::RedisResult<Option<i64>> {
        Script::new(ACQUIRE)
            .key(&self.name)
            .arg(WATCHDOG_LEASE.as_millis() as u64)
            .arg(self.id.to_string())
            .arg(if self.non_reentrant { "1" } else { "0" })
            .invoke_async(&mut self.conn)
            .await
    }

    async fn unlock(&mut self) -> Option<i64> {
        Script::new(UNLOCK)
            .key(&self.name)
            .key(format!("redisson_lock__channel:{{{}}}", self.name))
            .arg(self.id.to_string())
            .arg(if self.publishes { "0" } else { "" })
            .invoke_async(&mut self.conn)
            .await
            .unwrap()
    }
}

async fn thread(
    server: &keylatch_testkit::RedisServer,
    jvm: &Client,
    name: &str,
    non_reentrant: bool,
) -> RedissonThread {
    RedissonThread {
        conn: raw(server).await,
        name: name.to_owned(),
        id: jvm.owner_id(Owner::unique()),
        non_reentrant,
        publishes: true,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_and_keylatch_non_reentrant_locks_share_the_hold() {
    let server = server();
    let client = client(&server).await;
    let jvm = client_for_ids(&server).await;
    let name = unique("redisson-nonreentrant");
    let mut redisson = thread(&server, &jvm, &name, true).await;

    // Redisson holds: keylatch is refused and sees Redisson's owner as the holder.
    assert_eq!(redisson.acquire().await.unwrap(), None);
    let lock = client.non_reentrant_lock(&name);
    assert!(lock.try_lock().await.unwrap().is_none());
    assert!(lock.is_held_by(redisson.id).await.unwrap());
    // Redisson's own second acquisition is refused, and its hold count stays 1.
    let again = redisson.acquire().await;
    assert!(
        format!("{again:?}").contains("NON_REENTRANT_REACQUIRE"),
        "{again:?}"
    );
    let count: u64 = redisson
        .conn
        .hget(&name, redisson.id.to_string())
        .await
        .unwrap();
    assert_eq!(count, 1);

    // A keylatch waiter is woken by Redisson's release.
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished());
    assert_eq!(redisson.unlock().await, Some(1));
    let guard = tokio::time::timeout(BOUND, waiter)
        .await
        .expect("woken by Redisson's release")
        .unwrap()
        .unwrap();

    // keylatch holds: Redisson is refused; Redisson's script, for keylatch's owner id, finds
    // the same field and refuses the re-entry as keylatch does.
    assert!(matches!(redisson.acquire().await, Ok(Some(pttl)) if pttl > 0));
    let mut as_keylatch = thread(&server, &jvm, &name, true).await;
    as_keylatch.id = guard.owner_id();
    let again = as_keylatch.acquire().await;
    assert!(
        format!("{again:?}").contains("NON_REENTRANT_REACQUIRE"),
        "{again:?}"
    );
    assert!(matches!(
        client
            .non_reentrant_lock(&name)
            .with_owner(guard.owner())
            .try_lock()
            .await,
        Err(Error::AlreadyHeld { .. })
    ));
    guard.unlock().await.unwrap();
    assert_eq!(redisson.acquire().await.unwrap(), None);
    assert_eq!(redisson.unlock().await, Some(1));
    client.shutdown().await.unwrap();
    jvm.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_and_keylatch_spin_locks_exclude_each_other_without_messages() {
    let server = server();
    let client = client(&server).await;
    let jvm = client_for_ids(&server).await;
    let name = unique("redisson-spin");
    let mut redisson = thread(&server, &jvm, &name, false).await;
    redisson.publishes = false;

    assert_eq!(redisson.acquire().await.unwrap(), None);
    let lock = client
        .spin_lock(&name)
        .with_backoff(SpinBackoff::constant(Duration::from_millis(10)));
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "Redisson holds it");
    // Redisson's spin release publishes nothing: the keylatch spin waiter finds it by polling.
    assert_eq!(redisson.unlock().await, Some(1));
    let guard = tokio::time::timeout(BOUND, waiter)
        .await
        .expect("the poll finds the lock free")
        .unwrap()
        .unwrap();
    assert_eq!(client.stats().channels, 0);

    // keylatch's hold is Redisson's layout: Redisson is refused, and re-enters as its owner.
    let count: u64 = redisson
        .conn
        .hget(&name, guard.owner_id().to_string())
        .await
        .unwrap();
    assert_eq!(count, 1);
    assert!(matches!(redisson.acquire().await, Ok(Some(pttl)) if pttl > 0));
    let mut as_keylatch = thread(&server, &jvm, &name, false).await;
    as_keylatch.id = guard.owner_id();
    assert_eq!(as_keylatch.acquire().await.unwrap(), None, "re-enters");
    assert_eq!(as_keylatch.unlock().await, Some(0), "one hold left");
    guard.unlock().await.unwrap();
    assert_eq!(redisson.acquire().await.unwrap(), None);
    assert_eq!(redisson.unlock().await, Some(1));
    client.shutdown().await.unwrap();
    jvm.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_fair_thread_and_a_keylatch_non_reentrant_fair_lock_share_the_queue() {
    let server = server();
    let client = client(&server).await;
    let name = unique("redisson-nonreentrant-fair");
    let url = server.url();
    let mut first = RedissonFairThread::new(&url, &name).await;
    first.lock(WATCHDOG_LEASE).await;

    let owner = Owner::unique();
    let lock = client.non_reentrant_fair_lock(&name).with_owner(owner);
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished());
    assert_eq!(first.unlock().await, Some(true));
    let guard = tokio::time::timeout(BOUND, waiter)
        .await
        .expect("the queue's head after Redisson's release")
        .unwrap()
        .unwrap();

    // A Redisson thread queues behind keylatch's hold; keylatch's second acquisition is
    // refused without disturbing it.
    let mut second = RedissonFairThread::new(&url, &name).await;
    let queued = tokio::spawn(async move {
        let got = second.try_lock(BOUND, WATCHDOG_LEASE).await;
        (got, second)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(matches!(
        lock.try_lock_for(Duration::from_millis(500), None).await,
        Err(Error::AlreadyHeld { .. })
    ));
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert_eq!(
        lock.queue().await.unwrap().len(),
        1,
        "Redisson's place is kept"
    );
    guard.unlock().await.unwrap();
    let (got, mut second) = queued.await.unwrap();
    assert!(got, "Redisson's waiter gets it next");
    assert_eq!(second.unlock().await, Some(true));
    client.shutdown().await.unwrap();
}

/// A second client, only to draw owner ids of another UUID (as another process's).
async fn client_for_ids(server: &keylatch_testkit::RedisServer) -> Client {
    client(server).await
}
