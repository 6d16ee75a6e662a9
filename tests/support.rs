//! Helpers several test files share: driving futures by hand, pausing the server, checking
//! that nothing is left subscribed, timeout storms, helper processes, fair-lock waiters and the
//! exclusion detector. All re-exported at the crate root.

use std::pin::pin;
use std::process::Stdio;
use std::task::{Context, Poll};
use std::time::Duration;

use keylatch::redis::{self, AsyncCommands};
use keylatch::{DistributedLock, FairLock, LockGuard, MAX_LEASE, Owner};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::{RedisServer, eventually, raw, server_channels};

/// Polls `fut` once and drops it; returns its output if that one poll completed it (on
/// loopback a reply can arrive within the first poll).
pub fn poll_once<F: Future>(fut: F) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let waker = futures_util::task::noop_waker();
    match fut.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

/// Leases every primitive must refuse: zero, below a millisecond, above [`MAX_LEASE`].
pub fn invalid_leases() -> [Duration; 3] {
    [
        Duration::ZERO,
        Duration::from_micros(10),
        MAX_LEASE + Duration::from_secs(1),
    ]
}

/// Compiles only if `T` is `Send + Sync + 'static`.
pub fn send_sync_static<T: Send + Sync + 'static>(_: &T) {}

/// Compiles only if `T` is `Send + 'static`.
pub fn send_static<T: Send + 'static>(_: &T) {}

/// `CLIENT PAUSE ms ALL`: the server takes requests but answers none for `ms` milliseconds.
pub async fn pause(conn: &mut redis::aio::MultiplexedConnection, ms: u64) {
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(ms)
        .arg("ALL")
        .query_async(conn)
        .await
        .unwrap();
}

/// Pauses the server for 300 ms (see [`pause`]) and drops `fut` after 50 ms, so its request is
/// sent but not answered: the server runs it after the drop. Returns whether `fut` was still
/// waiting when it was dropped.
pub async fn dropped_in_flight<F: Future>(
    conn: &mut redis::aio::MultiplexedConnection,
    fut: F,
) -> bool {
    pause(conn, 300).await;
    tokio::time::timeout(Duration::from_millis(50), fut)
        .await
        .is_err()
}

/// The server's clock (`TIME`) in ms.
pub async fn server_ms(conn: &mut redis::aio::MultiplexedConnection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    secs * 1000 + micros / 1000
}

/// Asserts that `client` drops its last channel within 5 s.
pub async fn assert_client_unsubscribed(client: &keylatch::Client) {
    let unsubscribed = eventually(Duration::from_secs(5), || async {
        client.stats().channels == 0
    })
    .await;
    assert!(
        unsubscribed,
        "a subscription was left behind: {:?}",
        client.stats()
    );
}

/// Asserts that within 5 s the server has no subscribed channel whose name contains `name`,
/// and no subscribed pattern at all (`PUBSUB NUMPAT`: the server cannot list patterns by
/// name, and in these tests only keylatch subscribes to any).
pub async fn assert_server_unsubscribed(conn: &redis::aio::MultiplexedConnection, name: &str) {
    let gone = eventually(Duration::from_secs(5), || {
        let mut conn = conn.clone();
        async move { server_channels(&mut conn, name).await == 0 }
    })
    .await;
    assert!(gone, "the server still has a subscription for {name}");
    let patterns = |conn: &redis::aio::MultiplexedConnection| {
        let mut conn = conn.clone();
        async move {
            let n: i64 = redis::cmd("PUBSUB")
                .arg("NUMPAT")
                .query_async(&mut conn)
                .await
                .expect("pubsub numpat");
            n
        }
    };
    let no_pattern = eventually(Duration::from_secs(5), || async {
        patterns(conn).await == 0
    })
    .await;
    assert!(
        no_pattern,
        "the server still has {} subscribed pattern(s) (testing {name})",
        patterns(conn).await
    );
}

/// What a timeout storm does with a guard it got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// `unlock().await` it.
    Unlock,
    /// Drop it (the release runs in the background).
    Drop,
}

/// A timeout storm's tally: acquires that completed and acquires dropped by their timeout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Storm {
    /// Acquires that returned a guard in time.
    pub acquired: u64,
    /// Acquires dropped by their timeout.
    pub cancelled: u64,
}

impl Storm {
    /// Runs `rounds` acquires, the `i`-th bounded by `offset + i × 5 µs`, so the drop lands
    /// before, during or after the acquire's round trip; a guard it gets is handled as `then`
    /// says.
    pub async fn run<F, Fut>(&mut self, rounds: u64, offset: Duration, then: Then, mut acquire: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = keylatch::Result<LockGuard>>,
    {
        for i in 0..rounds {
            let wait = Duration::from_nanos(i * 5_000) + offset;
            match tokio::time::timeout(wait, acquire()).await {
                Ok(guard) => {
                    self.acquired += 1;
                    match then {
                        Then::Unlock => guard.unwrap().unlock().await.unwrap(),
                        Then::Drop => drop(guard.unwrap()),
                    }
                }
                Err(_) => self.cancelled += 1,
            }
        }
    }
}

/// Unlocks `guard` after `after`, in a task of its own.
pub fn unlock_after(guard: LockGuard, after: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        guard.unlock().await.unwrap();
    })
}

/// Starts `program` with `args` (stdout piped, killed when dropped) and reads the first line
/// it prints (`None` if it closed stdout first); panics if `who` does not report within 20 s.
pub async fn spawn_reporting(
    program: &str,
    args: &[String],
    who: &str,
) -> (tokio::process::Child, Option<String>) {
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("{who} reports within 20 s"))
        .unwrap();
    (child, line)
}

/// Kills every pub/sub connection on the server (`CLIENT KILL TYPE pubsub`, at least one) and
/// waits up to 5 s for `client`'s hub to reconnect.
pub async fn kill_pubsub_and_await_reconnect(
    conn: &mut redis::aio::MultiplexedConnection,
    client: &keylatch::Client,
) {
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(conn)
        .await
        .unwrap();
    assert!(killed >= 1, "no pub/sub connection was killed");
    let reconnected = eventually(Duration::from_secs(5), || async {
        client.stats().hub_reconnects >= 1 && client.stats().hub_connected
    })
    .await;
    assert!(reconnected, "the hub did not reconnect");
}

/// A fair-lock waiter with its own owner and the given waiter timeout, and its queue id.
pub fn fair_waiter(client: &keylatch::Client, name: &str, timeout: Duration) -> (FairLock, String) {
    let owner = Owner::unique();
    let id = client.owner_id(owner).to_string();
    (
        client
            .fair_lock(name)
            .with_owner(owner)
            .with_waiter_timeout(timeout),
        id,
    )
}

/// The ids in the fair lock's queue, head first.
pub async fn queue_ids(lock: &FairLock) -> Vec<String> {
    lock.queue()
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.id)
        .collect()
}

/// The exclusion detector: one task per lock in `locks`, each `iterations` times taking its
/// lock and incrementing `counter` with a read, a yield and a write (on its own connection)
/// inside. Any overlap loses an increment; returns the final count.
pub async fn increments_under<L>(
    server: &RedisServer,
    locks: Vec<L>,
    counter: &str,
    iterations: u64,
) -> u64
where
    L: DistributedLock + 'static,
{
    let mut tasks = Vec::new();
    for lock in locks {
        let mut conn = raw(server).await;
        let counter = counter.to_owned();
        tasks.push(tokio::spawn(async move {
            for _ in 0..iterations {
                let guard = lock.lock().await.expect("lock");
                let value: Option<u64> = conn.get(&counter).await.expect("get");
                tokio::task::yield_now().await;
                let _: () = conn
                    .set(&counter, value.unwrap_or(0) + 1)
                    .await
                    .expect("set");
                guard.unlock().await.expect("unlock");
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    let mut conn = raw(server).await;
    conn.get(counter).await.expect("get")
}

/// The plain semaphore's permits taken without a guard, for tests of permits that are not
/// owned: they stay taken until someone releases them by count ([`keylatch::Semaphore::release`]).
pub trait TakeUnguarded {
    /// Takes `n` permits, waiting as long as it takes.
    fn take(&self, n: u32) -> impl Future<Output = keylatch::Result<()>> + Send;
    /// Tries once to take `n` permits; whether it did.
    fn try_take(&self, n: u32) -> impl Future<Output = keylatch::Result<bool>> + Send;
    /// Takes `n` permits, waiting at most `wait`; whether it did.
    fn try_take_for(
        &self,
        n: u32,
        wait: Duration,
    ) -> impl Future<Output = keylatch::Result<bool>> + Send;
}

impl TakeUnguarded for keylatch::Semaphore {
    async fn take(&self, n: u32) -> keylatch::Result<()> {
        let permit = self
            .acquire_many(n, keylatch::AcquireOptions::new())
            .await?;
        permit.expect("an unbounded wait returns a permit").forget();
        Ok(())
    }

    async fn try_take(&self, n: u32) -> keylatch::Result<bool> {
        self.try_take_for(n, Duration::ZERO).await
    }

    async fn try_take_for(&self, n: u32, wait: Duration) -> keylatch::Result<bool> {
        let options = keylatch::AcquireOptions::new().with_wait(wait);
        Ok(self
            .acquire_many(n, options)
            .await?
            .map(keylatch::SemaphorePermit::forget)
            .is_some())
    }
}

/// Every event formatted by the global tracing subscriber that [`capture`] installs, in one
/// buffer (no colour codes).
#[derive(Clone, Debug, Default)]
pub struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// What has been captured so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Installs, once per test binary, a global `fmt` subscriber at `level` that writes into the
/// returned buffer.
pub fn capture(level: tracing::Level) -> Captured {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    captured
}

/// A 3-primary cluster and two clients of it: one from the seed list (`redis+cluster://`), one
/// from a single node's URL (cluster mode detected).
pub async fn cluster_pair() -> (
    keylatch_testkit::RedisCluster,
    keylatch::Client,
    keylatch::Client,
) {
    let cluster = tokio::task::spawn_blocking(keylatch_testkit::RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster");
    let connect = |url: String| async move {
        let config = keylatch::Config::builder()
            .url(url)
            .build()
            .expect("config");
        keylatch::Client::connect_with(config)
            .await
            .expect("connect")
    };
    let a = connect(cluster.seed_url()).await;
    let b = connect(cluster.url()).await;
    (cluster, a, b)
}

/// Runs this test binary again as a child, only the ignored test `test`, with the variables of
/// `remove` taken out of its environment and those of `set` put in; returns the rest of the
/// line it printed after `prefix` (a reading of the configuration it saw).
pub fn child_reading(test: &str, prefix: &str, remove: &[&str], set: &[(&str, &str)]) -> String {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child.args(["--ignored", "--exact", test, "--nocapture"]);
    for var in remove {
        child.env_remove(var);
    }
    for (name, value) in set {
        child.env(name, value);
    }
    let output = child.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no reading in {stdout}"))
        .to_owned()
}
