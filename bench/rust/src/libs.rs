//! One adapter per library: a `Worker` acquires and releases one lock (or one permit) the way
//! that library's documentation shows, with its defaults unless the variant names one tuned
//! setting.
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use distributed_lock_core::traits::{
    DistributedLock, DistributedSemaphore, LockHandle, LockProvider, SemaphoreProvider,
};

/// A caller-side retry interval for libraries whose acquire returns at once when the lock is
/// held (it does not wait): the caller must loop. 10 ms is the shortest default poll interval
/// among the peers (redis-semaphore's `retryInterval`).
pub const CALLER_RETRY: Duration = Duration::from_millis(10);

pub type WorkerResult = Result<(), String>;

/// One worker's handle on the lock (or semaphore) under test.
#[async_trait]
pub trait Worker: Send {
    /// Waits until acquired.
    async fn acquire(&mut self) -> WorkerResult;
    /// Releases what `acquire` got.
    async fn release(&mut self) -> WorkerResult;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Lock,
    FairLock,
    Semaphore,
    /// Raw script calls through redis-rs: the limit, or keylatch's own scripts without the
    /// library (not a lock: nothing waits).
    Baseline,
}

/// A library, set up once per variant (its client, pool or manager).
#[derive(Clone)]
pub enum Lib {
    KeylatchReentrant(keylatch::Client),
    KeylatchFair(keylatch::Client),
    KeylatchSemaphore(keylatch::Client),
    KeylatchExpirable(keylatch::Client),
    Rslock(rslock::LockManager),
    Distkit {
        conn: redis::aio::ConnectionManager,
        retry: Option<Duration>,
    },
    Redisson(RedissonClient),
    RedissonFair(RedissonClient),
    RedissonSemaphore(RedissonClient),
    /// Two EVALSHA of a one-call script, as "acquire" and "release".
    Raw(redis::aio::MultiplexedConnection, Arc<redis::Script>),
    /// keylatch's reentrant-lock scripts sent through redis-rs, without the library.
    RawKeylatchScripts(redis::aio::MultiplexedConnection),
    Dlr(Arc<distributed_lock_redis::RedisLockProvider>),
    DlrSemaphore(Arc<distributed_lock_redis::RedisLockProvider>),
    /// keylatch's RedLock: one client per independent server; each worker's lock is made of
    /// `client.lock(key)` on every one of them, with a fixed lease.
    KeylatchRedLock {
        clients: Arc<[keylatch::Client]>,
        /// `RedLock::with_retry_delay`, when not the default (200 ms).
        retry: Option<Duration>,
        lease: Duration,
    },
    /// rslock's `LockManager` over several servers, with the given lease.
    RslockLease(rslock::LockManager, Duration),
}

/// redisson-rs's client and how to make a new one: its circuit breaker, once open after pool
/// time-outs, fails every later call, so each scenario starts with a fresh client.
#[derive(Clone)]
pub struct RedissonClient {
    url: String,
    pool: Option<u32>,
    client: Arc<redisson::AsyncRedissonClient>,
}

impl RedissonClient {
    async fn connect(url: &str, pool: Option<u32>) -> Result<RedissonClient, String> {
        let mut config = redisson::RedissonConfig::single_server(url);
        if let Some(pool) = pool {
            config = config.with_pool_size(pool);
        }
        let client = Arc::new(
            redisson::AsyncRedissonClient::new(config)
                .await
                .map_err(err)?,
        );
        Ok(RedissonClient {
            url: url.to_owned(),
            pool,
            client,
        })
    }
}

/// A library with the name, variant and notes the report shows.
#[derive(Clone)]
pub struct Variant {
    pub lib: &'static str,
    pub variant: &'static str,
    pub label: &'static str,
    pub kind: Kind,
    /// The one setting changed from the library's defaults, if any.
    pub tuned: Option<&'static str>,
    pub note: &'static str,
    pub imp: Lib,
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Every Rust variant, connected to `url`. `want` filters by library name.
pub async fn variants(url: &str, want: &dyn Fn(&str) -> bool) -> Result<Vec<Variant>, String> {
    let mut out = Vec::new();
    if want("raw") {
        let client = redis::Client::open(url).map_err(err)?;
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(err)?;
        out.push(Variant {
            lib: "raw",
            variant: "keylatch-scripts",
            label: "keylatch's scripts, sent raw",
            kind: Kind::Baseline,
            tuned: None,
            note: "the reentrant lock's acquire and release scripts through redis-rs, no library",
            imp: Lib::RawKeylatchScripts(conn),
        });
    }
    if want("keylatch") {
        let client = keylatch::Client::connect(url).await.map_err(err)?;
        out.push(Variant {
            lib: "keylatch",
            variant: "reentrant",
            label: "keylatch ReentrantLock",
            kind: Kind::Lock,
            tuned: None,
            note: "pub/sub wake-up, watchdog lease",
            imp: Lib::KeylatchReentrant(client.clone()),
        });
        out.push(Variant {
            lib: "keylatch",
            variant: "fair",
            label: "keylatch FairLock",
            kind: Kind::FairLock,
            tuned: None,
            note: "FIFO queue, head waiter woken",
            imp: Lib::KeylatchFair(client.clone()),
        });
        out.push(Variant {
            lib: "keylatch",
            variant: "semaphore",
            label: "keylatch Semaphore",
            kind: Kind::Semaphore,
            tuned: None,
            note: "permit count; waiters woken by pub/sub",
            imp: Lib::KeylatchSemaphore(client.clone()),
        });
        out.push(Variant {
            lib: "keylatch",
            variant: "expirable",
            label: "keylatch PermitExpirableSemaphore",
            kind: Kind::Semaphore,
            tuned: None,
            note: "permit ids with leases (watchdog); waiters woken by pub/sub",
            imp: Lib::KeylatchExpirable(client.clone()),
        });
    }
    if want("rslock") {
        let manager = rslock::LockManager::new(vec![url.to_owned()]);
        out.push(Variant {
            lib: "rslock",
            variant: "default",
            label: "rslock",
            kind: Kind::Lock,
            tuned: None,
            note: "SET NX polling, retry after 0-200 ms",
            imp: Lib::Rslock(manager.clone()),
        });
        let mut tuned = rslock::LockManager::new(vec![url.to_owned()]);
        tuned.set_retry(3, Duration::from_millis(2));
        out.push(Variant {
            lib: "rslock",
            variant: "tuned",
            label: "rslock (retry 0-1 ms)",
            kind: Kind::Lock,
            tuned: Some("set_retry(3, 2 ms): retry after 0-1 ms"),
            note: "SET NX polling",
            imp: Lib::Rslock(tuned),
        });
    }
    if want("distkit") {
        let client = redis::Client::open(url).map_err(err)?;
        let conn = client.get_connection_manager().await.map_err(err)?;
        out.push(Variant {
            lib: "distkit",
            variant: "default",
            label: "distkit Mutex",
            kind: Kind::Lock,
            tuned: None,
            note: "SET NX polling every 50 ms",
            imp: Lib::Distkit {
                conn: conn.clone(),
                retry: None,
            },
        });
        out.push(Variant {
            lib: "distkit",
            variant: "tuned",
            label: "distkit Mutex (poll 1 ms)",
            kind: Kind::Lock,
            tuned: Some("retry_interval 1 ms"),
            note: "SET NX polling",
            imp: Lib::Distkit {
                conn,
                retry: Some(Duration::from_millis(1)),
            },
        });
    }
    if want("redisson") {
        let client = RedissonClient::connect(url, None).await?;
        out.push(Variant {
            lib: "redisson",
            variant: "default",
            label: "redisson-rs RLock",
            kind: Kind::Lock,
            tuned: None,
            note: "script polling every 100 ms (fixed); a waiter keeps a pooled connection (10 by default) while it sleeps",
            imp: Lib::Redisson(client.clone()),
        });
        out.push(Variant {
            lib: "redisson",
            variant: "tuned",
            label: "redisson-rs RLock (pool 300)",
            kind: Kind::Lock,
            tuned: Some("pool_size 300 (default 10)"),
            note: "script polling every 100 ms (fixed)",
            imp: Lib::Redisson(RedissonClient::connect(url, Some(300)).await?),
        });
        out.push(Variant {
            lib: "redisson",
            variant: "fair",
            label: "redisson-rs RFairLock",
            kind: Kind::FairLock,
            tuned: None,
            note: "queue polled every 100 ms; lock() fails when the head finds the lock held, the caller retries",
            imp: Lib::RedissonFair(client.clone()),
        });
        out.push(Variant {
            lib: "redisson",
            variant: "semaphore",
            label: "redisson-rs RSemaphore",
            kind: Kind::Semaphore,
            tuned: None,
            note: "acquire() never waits: caller retries every 10 ms",
            imp: Lib::RedissonSemaphore(client),
        });
    }
    if want("distributed-lock-redis") {
        let provider = Arc::new(
            distributed_lock_redis::RedisLockProvider::new(url.to_owned())
                .await
                .map_err(err)?,
        );
        out.push(Variant {
            lib: "distributed-lock-redis",
            variant: "default",
            label: "distributed-lock-redis",
            kind: Kind::Lock,
            tuned: None,
            note: "acquire() does not wait on one server: caller retries every 10 ms",
            imp: Lib::Dlr(provider.clone()),
        });
        out.push(Variant {
            lib: "distributed-lock-redis",
            variant: "semaphore",
            label: "distributed-lock-redis semaphore",
            kind: Kind::Semaphore,
            tuned: None,
            note: "EVAL polling, back-off 10-200 ms",
            imp: Lib::DlrSemaphore(provider),
        });
    }
    Ok(out)
}

/// rslock's retry as `set_retry(3, 2 ms)`: a pause of 0 or 1 ms between attempts (its pause
/// is a whole number of milliseconds below the delay).
pub const RSLOCK_TUNED_RETRY: Duration = Duration::from_millis(2);
/// keylatch's RedLock with the same bound on its random pause; the stagger after a release
/// message is an eighth of it (0.25 ms).
pub const REDLOCK_TUNED_RETRY: Duration = Duration::from_millis(2);

/// keylatch's RedLock and rslock's `LockManager` over the same `urls`, each at its defaults
/// and with its retry pause cut to about a millisecond; every lock with `lease`. In the order
/// the rounds interleave them: keylatch, rslock, keylatch, rslock.
pub async fn redlock_variants(urls: &[String], lease: Duration) -> Result<Vec<Variant>, String> {
    let mut clients = Vec::new();
    for url in urls {
        clients.push(keylatch::Client::connect(url).await.map_err(err)?);
    }
    let clients: Arc<[keylatch::Client]> = clients.into();
    let mut tuned = rslock::LockManager::new(urls.to_vec());
    tuned.set_retry(3, RSLOCK_TUNED_RETRY);
    Ok(vec![
        Variant {
            lib: "keylatch",
            variant: "redlock",
            label: "keylatch RedLock",
            kind: Kind::Lock,
            tuned: None,
            note: "waits by pub/sub on every server (stagger 0-25 ms after a release), random pause 0-200 ms",
            imp: Lib::KeylatchRedLock {
                clients: clients.clone(),
                retry: None,
                lease,
            },
        },
        Variant {
            lib: "rslock",
            variant: "redlock",
            label: "rslock LockManager",
            kind: Kind::Lock,
            tuned: None,
            note: "SET NX on every server; retry after a random 0-199 ms, every third retry at once",
            imp: Lib::RslockLease(rslock::LockManager::new(urls.to_vec()), lease),
        },
        Variant {
            lib: "keylatch",
            variant: "redlock-tuned",
            label: "keylatch RedLock (pause 0-2 ms)",
            kind: Kind::Lock,
            tuned: Some("with_retry_delay(2 ms): pause 0-2 ms, stagger 0-0.25 ms"),
            note: "waits by pub/sub on every server",
            imp: Lib::KeylatchRedLock {
                clients,
                retry: Some(REDLOCK_TUNED_RETRY),
                lease,
            },
        },
        Variant {
            lib: "rslock",
            variant: "redlock-tuned",
            label: "rslock LockManager (retry 0-1 ms)",
            kind: Kind::Lock,
            tuned: Some("set_retry(3, 2 ms): retry after 0 or 1 ms"),
            note: "SET NX on every server",
            imp: Lib::RslockLease(tuned, lease),
        },
    ])
}

impl Lib {
    /// The same library with fresh client state where a library keeps state that one
    /// scenario's failures would carry into the next (redisson-rs's circuit breaker).
    pub async fn fresh(&self) -> Result<Lib, String> {
        Ok(match self {
            Lib::Redisson(c) => Lib::Redisson(RedissonClient::connect(&c.url, c.pool).await?),
            Lib::RedissonFair(c) => {
                Lib::RedissonFair(RedissonClient::connect(&c.url, c.pool).await?)
            }
            Lib::RedissonSemaphore(c) => {
                Lib::RedissonSemaphore(RedissonClient::connect(&c.url, c.pool).await?)
            }
            other => other.clone(),
        })
    }

    /// A worker on `key`; `permits` is the semaphore's size (ignored by locks).
    pub async fn worker(&self, key: &str, permits: usize) -> Result<Box<dyn Worker>, String> {
        Ok(match self {
            Lib::KeylatchReentrant(client) => GuardWorker::boxed(client.lock(key)),
            Lib::KeylatchFair(client) => GuardWorker::boxed(client.fair_lock(key)),
            Lib::KeylatchSemaphore(client) => {
                let semaphore = client.semaphore(key);
                semaphore
                    .try_set_permits(permits as u32)
                    .await
                    .map_err(err)?;
                Box::new(semaphore)
            }
            Lib::KeylatchExpirable(client) => {
                let semaphore = client.permit_expirable_semaphore(key);
                semaphore
                    .try_set_permits(permits as u32)
                    .await
                    .map_err(err)?;
                GuardWorker::boxed(semaphore)
            }
            Lib::Raw(conn, script) => Box::new(RawWorker {
                conn: conn.clone(),
                script: script.clone(),
                key: key.to_owned(),
            }),
            Lib::RawKeylatchScripts(conn) => Box::new(RawKeylatchWorker {
                conn: conn.clone(),
                key: key.to_owned(),
            }),
            Lib::Rslock(manager) => GuardWorker::boxed(RslockLock {
                manager: manager.clone(),
                key: key.to_owned(),
                lease: LEASE,
            }),
            Lib::RslockLease(manager, lease) => GuardWorker::boxed(RslockLock {
                manager: manager.clone(),
                key: key.to_owned(),
                lease: *lease,
            }),
            Lib::KeylatchRedLock {
                clients,
                retry,
                lease,
            } => {
                let parts = clients
                    .iter()
                    .map(|client| Arc::new(client.lock(key)) as Arc<dyn keylatch::DistributedLock>);
                let mut lock = keylatch::RedLock::new(parts).map_err(err)?;
                if let Some(retry) = retry {
                    lock = lock.with_retry_delay(*retry);
                }
                GuardWorker::boxed(RedLockLease {
                    lock,
                    lease: *lease,
                })
            }
            Lib::Distkit { conn, retry } => {
                let name =
                    distkit::DistkitRedisKey::try_from(key.replace(':', "_")).map_err(err)?;
                let mut options = distkit::lock::LockOptions::new(name, conn.clone());
                if let Some(retry) = retry {
                    options.retry_interval = *retry;
                }
                GuardWorker::boxed(distkit::lock::Mutex::new(options))
            }
            Lib::Redisson(c) => Box::new(c.client.get_lock(key)),
            Lib::RedissonFair(c) => Box::new(c.client.get_fair_lock(key)),
            Lib::RedissonSemaphore(c) => Box::new(c.client.get_semaphore(key, permits).await),
            Lib::Dlr(provider) => GuardWorker::boxed(provider.create_lock(key)),
            Lib::DlrSemaphore(provider) => {
                GuardWorker::boxed(provider.create_semaphore(key, permits as u32))
            }
        })
    }
}

/// A lock (or semaphore) whose acquire hands back a guard (a handle, a permit) that releases
/// what it holds.
#[async_trait]
trait Acquire: Send + Sync {
    type Guard: Release;
    async fn acquire_guard(&self) -> Result<Self::Guard, String>;
}

/// A guard as its library releases it.
#[async_trait]
trait Release: Send + Sized {
    async fn release_guard(self) -> WorkerResult;
}

/// The worker of an [`Acquire`] library: keeps the guard from acquire to release.
struct GuardWorker<L: Acquire> {
    lock: L,
    guard: Option<L::Guard>,
}

impl<L: Acquire + 'static> GuardWorker<L> {
    fn boxed(lock: L) -> Box<dyn Worker> {
        Box::new(GuardWorker { lock, guard: None })
    }
}

#[async_trait]
impl<L: Acquire> Worker for GuardWorker<L> {
    async fn acquire(&mut self) -> WorkerResult {
        self.guard = Some(self.lock.acquire_guard().await?);
        Ok(())
    }
    async fn release(&mut self) -> WorkerResult {
        self.guard.take().ok_or("not held")?.release_guard().await
    }
}

/// Locks whose `lock()` waits and returns the guard: the same call, no trait in common.
macro_rules! acquire_by_lock {
    ($($lock:ty => $guard:ty),*) => {$(
        #[async_trait]
        impl Acquire for $lock {
            type Guard = $guard;
            async fn acquire_guard(&self) -> Result<Self::Guard, String> {
                self.lock().await.map_err(err)
            }
        }
    )*};
}

acquire_by_lock!(
    keylatch::ReentrantLock => keylatch::LockGuard,
    keylatch::FairLock => keylatch::LockGuard,
    Arc<distkit::lock::Mutex> => distkit::lock::MutexGuard
);

/// The permit, as its guard (the facade does not name `Permit`; releasing the guard releases
/// the permit id, as `Permit::release` does).
#[async_trait]
impl Acquire for keylatch::PermitExpirableSemaphore {
    type Guard = keylatch::LockGuard;
    async fn acquire_guard(&self) -> Result<Self::Guard, String> {
        Ok(self.acquire().await.map_err(err)?.into_guard())
    }
}

#[async_trait]
impl Release for keylatch::LockGuard {
    async fn release_guard(self) -> WorkerResult {
        self.unlock().await.map_err(err)
    }
}

#[async_trait]
impl Worker for keylatch::Semaphore {
    async fn acquire(&mut self) -> WorkerResult {
        // The permit is kept as a count (no release on drop) and given back by
        // `Semaphore::release`, as before acquire returned a permit guard.
        keylatch::Semaphore::acquire(self)
            .await
            .map_err(err)?
            .forget();
        Ok(())
    }
    async fn release(&mut self) -> WorkerResult {
        keylatch::Semaphore::release(self, 1).await.map_err(err)
    }
}

struct RawWorker {
    conn: redis::aio::MultiplexedConnection,
    script: Arc<redis::Script>,
    key: String,
}

#[async_trait]
impl Worker for RawWorker {
    async fn acquire(&mut self) -> WorkerResult {
        let _: i64 = self
            .script
            .key(&self.key)
            .invoke_async(&mut self.conn)
            .await
            .map_err(err)?;
        Ok(())
    }
    async fn release(&mut self) -> WorkerResult {
        self.acquire().await
    }
}

static KEYLATCH_ACQUIRE: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(include_str!(
        "../../../crates/redis/keylatch-reentrant/src/lua/acquire.lua"
    ))
});
static KEYLATCH_RELEASE: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(include_str!(
        "../../../crates/redis/keylatch-reentrant/src/lua/release.lua"
    ))
});
const RAW_OWNER: &str = "raw-owner:1";

/// keylatch's reentrant-lock scripts with the arguments the library sends (see
/// crates/redis/keylatch-reentrant/src/lock.rs), so the library's own share can be told apart.
struct RawKeylatchWorker {
    conn: redis::aio::MultiplexedConnection,
    key: String,
}

#[async_trait]
impl Worker for RawKeylatchWorker {
    async fn acquire(&mut self) -> WorkerResult {
        let owner = RAW_OWNER;
        let reply: redis::Value = KEYLATCH_ACQUIRE
            .key(&self.key)
            .key(format!("redisson_lock_token:{{{}}}", self.key))
            .key(format!("keylatch_meta:{{{}}}", self.key))
            .arg(30_000)
            .arg(owner)
            .arg("0")
            .arg("0")
            .arg("")
            .invoke_async(&mut self.conn)
            .await
            .map_err(err)?;
        match reply {
            redis::Value::Nil => Ok(()),
            other => Err(format!("keylatch's acquire script answered {other:?}")),
        }
    }
    async fn release(&mut self) -> WorkerResult {
        let owner = RAW_OWNER;
        let _: redis::Value = KEYLATCH_RELEASE
            .key(&self.key)
            .key(format!("redisson_lock__channel:{{{}}}", self.key))
            .key(format!("keylatch_meta:{{{}}}", self.key))
            .arg("0")
            .arg(owner)
            .invoke_async(&mut self.conn)
            .await
            .map_err(err)?;
        Ok(())
    }
}

/// rslock's documented lease in its example is explicit; 30 s like the others' defaults.
const LEASE: Duration = Duration::from_secs(30);

/// rslock locks a resource through its manager: the lock is the pair.
struct RslockLock {
    manager: rslock::LockManager,
    key: String,
    lease: Duration,
}

#[async_trait]
impl Acquire for RslockLock {
    type Guard = rslock::LockGuard;
    async fn acquire_guard(&self) -> Result<Self::Guard, String> {
        self.manager
            .acquire(self.key.as_bytes(), self.lease)
            .await
            .map_err(err)
    }
}

#[async_trait]
impl Release for rslock::LockGuard {
    async fn release_guard(self) -> WorkerResult {
        self.release().await;
        Ok(())
    }
}

/// keylatch's RedLock with a fixed lease (no watchdog), as rslock's locks have.
struct RedLockLease {
    lock: keylatch::RedLock,
    lease: Duration,
}

#[async_trait]
impl Acquire for RedLockLease {
    type Guard = keylatch::RedLockGuard;
    async fn acquire_guard(&self) -> Result<Self::Guard, String> {
        self.lock
            .acquire(keylatch::AcquireOptions::new().with_lease(self.lease))
            .await
            .map_err(err)?
            .ok_or_else(|| "an unbounded wait returned no guard".to_owned())
    }
}

#[async_trait]
impl Release for keylatch::RedLockGuard {
    async fn release_guard(self) -> WorkerResult {
        self.unlock().await.map_err(err)
    }
}

#[async_trait]
impl Release for distkit::lock::MutexGuard {
    async fn release_guard(self) -> WorkerResult {
        self.release().await.map_err(err).map(drop)
    }
}

/// redisson-rs's locks (`RLock`, `RFairLock`) have the same calls but no trait in common.
macro_rules! redisson_lock_worker {
    ($($lock:ty),*) => {$(
        #[async_trait]
        impl Worker for $lock {
            async fn acquire(&mut self) -> WorkerResult {
                // RFairLock's lock() gives up with an error when this waiter reaches the head
                // of the queue while the lock is still held (or after 100 polls): the caller
                // has to try again.
                self.lock().await.map_err(err)
            }
            async fn release(&mut self) -> WorkerResult {
                // unlock() reports `false` after a full release too (its script returns 0
                // then), so only an error counts as a failure.
                self.unlock().await.map_err(err).map(drop)
            }
        }
    )*};
}

redisson_lock_worker!(redisson::AsyncRLock, redisson::AsyncRFairLock);

#[async_trait]
impl Worker for redisson::AsyncRSemaphore {
    async fn acquire(&mut self) -> WorkerResult {
        // acquire() is one attempt (`try_acquire(1, 0)`): loop as a caller must.
        while !redisson::AsyncRSemaphore::acquire(self)
            .await
            .map_err(err)?
        {
            tokio::time::sleep(CALLER_RETRY).await;
        }
        Ok(())
    }
    async fn release(&mut self) -> WorkerResult {
        redisson::AsyncRSemaphore::release(self, 1)
            .await
            .map_err(err)
    }
}

/// A distributed-lock-redis handle (a lock's or a semaphore ticket's).
struct DlrHandle<H>(H);

#[async_trait]
impl<H: LockHandle + 'static> Release for DlrHandle<H> {
    async fn release_guard(self) -> WorkerResult {
        self.0.release().await.map_err(err)
    }
}

#[async_trait]
impl Acquire for distributed_lock_redis::RedisDistributedLock {
    type Guard = DlrHandle<distributed_lock_redis::RedisLockHandle>;
    async fn acquire_guard(&self) -> Result<Self::Guard, String> {
        // With one server, acquire(None) tries once and reports a timeout when the lock is
        // held; it does not wait. Loop as a caller must.
        loop {
            match DistributedLock::acquire(self, None).await {
                Ok(handle) => return Ok(DlrHandle(handle)),
                Err(distributed_lock_core::error::LockError::Timeout(_)) => {
                    tokio::time::sleep(CALLER_RETRY).await
                }
                Err(e) => return Err(err(e)),
            }
        }
    }
}

#[async_trait]
impl Acquire for distributed_lock_redis::RedisDistributedSemaphore {
    type Guard = DlrHandle<distributed_lock_redis::RedisSemaphoreHandle>;
    async fn acquire_guard(&self) -> Result<Self::Guard, String> {
        DistributedSemaphore::acquire(self, None)
            .await
            .map(DlrHandle)
            .map_err(err)
    }
}
