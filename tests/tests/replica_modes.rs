//! Replica acknowledgement modes on real replicas: "all connected replicas"
//! (`Config::replicas_all_connected`, Redisson's `checkLockSyncedSlaves`) with 0, 1 and 2
//! replicas; `WAITAOF` (`Config::replicas_aof`) on a build that has it, with `appendonly yes`
//! (Valkey 9.1 or Redis 8.2 from `.servers/`, run in a child process of this binary, skipped
//! with a printed reason when none is installed); and its fallback to `WAIT` on Redis 7.0.
//! Every failed acknowledgement is `Error::NotReplicated` and leaves nothing behind.
use std::process::Command;
use std::time::{Duration, Instant};

use keylatch::{AcquireOptions, Client, Config, ConfigBuilder, Error};
use keylatch_testkit::{RedisServer, SERVER_ENV, report_skip, server_build, server_program};

const ACK: Duration = Duration::from_millis(1500);

fn start(aof: bool, primary: Option<&RedisServer>) -> RedisServer {
    let mut builder = RedisServer::builder()
        .arg("--appendonly")
        .arg(if aof { "yes" } else { "no" })
        .arg("--appendfsync")
        .arg("always")
        .arg("--repl-diskless-sync")
        .arg("yes")
        .arg("--repl-diskless-sync-delay")
        .arg("0");
    if let Some(primary) = primary {
        builder = builder
            .arg("--replicaof")
            .arg("127.0.0.1")
            .arg(primary.port().to_string());
    }
    builder.start().expect("start a server")
}

/// Waits until `primary` reports `n` replicas online.
fn wait_online(primary: &RedisServer, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = primary.cli(&["INFO", "replication"]).unwrap();
        let online = info.lines().filter(|l| l.contains("state=online")).count();
        if online >= n && info.contains(&format!("connected_slaves:{n}")) {
            return;
        }
        assert!(Instant::now() < deadline, "replicas not online: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `replica`'s append-only file is ready (the rewrite after its sync is done).
fn wait_aof_ready(replica: &RedisServer) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = replica.cli(&["INFO", "persistence"]).unwrap();
        if [
            "aof_enabled:1",
            "aof_rewrite_in_progress:0",
            "aof_rewrite_scheduled:0",
        ]
        .iter()
        .all(|want| info.contains(want))
        {
            return;
        }
        assert!(Instant::now() < deadline, "replica's AOF not ready: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until a write on one connection is acknowledged by `WAITAOF 1 1` (the first after a
/// replica's sync is not).
async fn wait_aof_acknowledged(primary: &RedisServer) {
    let client = keylatch::redis::Client::open(primary.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (counts,): (Vec<i64>,) = keylatch::redis::pipe()
            .cmd("SET")
            .arg("app:aof-probe")
            .arg(1)
            .ignore()
            .cmd("WAITAOF")
            .arg(1)
            .arg(1)
            .arg(200)
            .query_async(&mut conn)
            .await
            .unwrap();
        if counts == [1, 1] {
            return;
        }
        assert!(Instant::now() < deadline, "WAITAOF: {counts:?}");
    }
}

/// One connection, so the server facts read with one acquisition serve the next.
async fn connect(server: &RedisServer, ack: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Client {
    let builder = Config::builder()
        .url(server.url())
        .connections(1)
        .response_timeout(Duration::from_secs(5));
    Client::connect_with(ack(builder).build().expect("config"))
        .await
        .expect("connect")
}

/// Acquires `name` on `client` without waiting and releases it.
async fn lock_once(client: &Client, name: &str) -> Result<(), Error> {
    let guard = client
        .lock(name)
        .acquire(AcquireOptions::new().with_wait(Duration::ZERO))
        .await?
        .expect("the lock is free");
    guard.unlock().await
}

/// `client`'s acquisition of `name` fails with these counts, and `plain` then takes the lock
/// at once: the refused acquisition was undone.
async fn refused(client: &Client, plain: &Client, name: &str, acknowledged: u32, wanted: u32) {
    let err = lock_once(client, name).await.expect_err("not acknowledged");
    assert!(
        matches!(err, Error::NotReplicated { acknowledged: a, wanted: w, .. } if a == acknowledged && w == wanted),
        "{name}: {err:?}, expected {acknowledged} of {wanted}"
    );
    let guard = plain
        .lock(name)
        .try_lock()
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{name}: the refused acquisition left a hold behind"));
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_connected_replicas_with_none_one_and_two() {
    let primary = start(false, None);
    let client = connect(&primary, |b| b.replicas_all_connected(ACK)).await;
    let plain = Client::connect(&primary.url()).await.unwrap();

    // No replica: nothing to wait for.
    lock_once(&client, "app:all-none").await.unwrap();

    // One replica: it acknowledges; paused, it cannot, and the acquisition is undone.
    let first = start(false, Some(&primary));
    wait_online(&primary, 1);
    // The count the primary reports is read with each acquisition, for the next one.
    lock_once(&client, "app:all-one").await.unwrap();
    lock_once(&client, "app:all-one").await.unwrap();
    first.pause().unwrap();
    refused(&client, &plain, "app:all-one", 0, 1).await;
    first.resume().unwrap();

    // Two replicas: one acknowledgement is enough; none is not.
    let second = start(false, Some(&primary));
    wait_online(&primary, 2);
    lock_once(&client, "app:all-two").await.unwrap();
    lock_once(&client, "app:all-two").await.unwrap();
    second.pause().unwrap();
    lock_once(&client, "app:all-two")
        .await
        .expect("one of two replicas acknowledged");
    first.pause().unwrap();
    refused(&client, &plain, "app:all-two", 0, 2).await;
    first.resume().unwrap();
    second.resume().unwrap();
    client.shutdown().await.unwrap();
    plain.shutdown().await.unwrap();
}

/// `WAITAOF` on a build that has it: the primary's file and the replica's count; a replica
/// that misses the write, or runs without AOF, does not; a primary whose AOF is turned off
/// makes the client wait with `WAIT` instead.
async fn waitaof_counts_append_only_files() {
    println!("build: {}", server_build().unwrap().describe());
    let primary = start(true, None);
    let replica = start(true, Some(&primary));
    wait_online(&primary, 1);
    wait_aof_ready(&replica);
    wait_aof_acknowledged(&primary).await;
    let client = connect(&primary, |b| {
        b.replicas(1, Duration::from_millis(1500))
            .replicas_aof(true)
    })
    .await;
    let plain = Client::connect(&primary.url()).await.unwrap();
    lock_once(&client, "app:aof").await.unwrap();
    // The replica misses the write: only the primary's own file has it.
    replica.pause().unwrap();
    refused(&client, &plain, "app:aof", 1, 2).await;
    replica.resume().unwrap();
    wait_online(&primary, 1);
    wait_aof_acknowledged(&primary).await;
    lock_once(&client, "app:aof").await.unwrap();
    // A replica without AOF acknowledges WAIT, never WAITAOF.
    replica.cli(&["CONFIG", "SET", "appendonly", "no"]).unwrap();
    refused(&client, &plain, "app:aof", 1, 2).await;
    // The primary's AOF turned off: WAITAOF is refused once (and undone), then the client
    // knows and waits with WAIT, which the replica acknowledges.
    primary.cli(&["CONFIG", "SET", "appendonly", "no"]).unwrap();
    let outcomes = [
        lock_once(&client, "app:aof").await,
        lock_once(&client, "app:aof").await,
    ];
    assert!(outcomes[1].is_ok(), "{outcomes:?}");
    client.shutdown().await.unwrap();
    plain.shutdown().await.unwrap();
}

/// On a build without `WAITAOF` (Redis 7.0) `replicas_aof` waits with `WAIT`: the replica's
/// acknowledgement is enough and the counts are the replicas'.
async fn waitaof_falls_back_to_wait() {
    println!("build: {}", server_build().unwrap().describe());
    let primary = start(true, None);
    let replica = start(false, Some(&primary));
    wait_online(&primary, 1);
    let client = connect(&primary, |b| b.replicas(1, ACK).replicas_aof(true)).await;
    let plain = Client::connect(&primary.url()).await.unwrap();
    lock_once(&client, "app:fallback")
        .await
        .expect("WAIT, acknowledged by a replica without AOF");
    replica.pause().unwrap();
    refused(&client, &plain, "app:fallback", 0, 1).await;
    replica.resume().unwrap();
    client.shutdown().await.unwrap();
    plain.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run in a child process by waitaof_on_a_build_that_has_it"]
async fn child_waitaof() {
    waitaof_counts_append_only_files().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run in a child process by waitaof_falls_back_on_7_0"]
async fn child_fallback() {
    waitaof_falls_back_to_wait().await;
}

/// `(major, minor)` of `program --version`.
fn version(program: &str) -> Option<(u32, u32)> {
    let out = Command::new(program).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v = text.split_whitespace().find_map(|w| w.strip_prefix("v="))?;
    let mut parts = v.split('.').map(|p| p.parse().unwrap_or(0));
    Some((parts.next()?, parts.next()?))
}

/// Runs the ignored test `name` of this binary in a child whose testkit runs `program`.
fn run_child(name: &str, program: &str) {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", name, "--nocapture"])
        .env(SERVER_ENV, program)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{name} with {program}:\n{stdout}\n{stderr}"
    );
}

#[test]
fn waitaof_on_a_build_that_has_it() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let current = server_program();
    let program = if version(&current).is_some_and(|v| v >= (7, 2)) {
        Some(current)
    } else {
        ["valkey-9.1/valkey-server", "redis-8.2/redis-server"]
            .iter()
            .map(|p| root.join(".servers").join(p))
            .find(|p| version(&p.to_string_lossy()).is_some_and(|v| v >= (7, 2)))
            .map(|p| p.to_string_lossy().into_owned())
    };
    match program {
        Some(program) => run_child("child_waitaof", &program),
        None => report_skip(
            "no build with WAITAOF (Redis/Valkey 7.2+) installed; \
             scripts/setup.sh --servers puts Valkey 9.1 and Redis 8.2 under .servers/",
        ),
    }
}

#[test]
fn waitaof_falls_back_on_7_0() {
    let program = [server_program(), "redis-server".to_owned()]
        .into_iter()
        .find(|p| version(p).is_some_and(|v| v < (7, 2)));
    match program {
        Some(program) => run_child("child_fallback", &program),
        None => report_skip("no build without WAITAOF (Redis 7.0) installed"),
    }
}
