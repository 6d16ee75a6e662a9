//! Dropping a read or write acquire at any point leaves nothing behind: no hash, no per-hold
//! key, no writer intent, no watchdog entry, no subscription (locally or on the server).
use std::time::Duration;

use keylatch::Owner;
use keylatch::redis::{self, AsyncCommands};
use keylatch_tests::{
    RedisServer, Storm, Then, assert_client_unsubscribed, assert_server_unsubscribed, client,
    dropped_in_flight, poll_once, raw, server, unique, unlock_after,
};

/// Every key of the lock: the hash `name` and the `{name}:…` keys (per-hold keys, intent).
async fn lock_keys(conn: &mut redis::aio::MultiplexedConnection, name: &str) -> Vec<String> {
    let mut keys: Vec<String> = conn.keys(name).await.unwrap();
    let derived: Vec<String> = conn.keys(format!("{{{name}}}:*")).await.unwrap();
    keys.extend(derived);
    keys
}

async fn assert_clean(client: &keylatch::Client, server: &RedisServer, name: &str) {
    client.wait_idle().await;
    let mut conn = raw(server).await;
    let left = lock_keys(&mut conn, name).await;
    assert!(left.is_empty(), "left behind: {left:?}");
    let stats = client.stats();
    assert_eq!(
        stats.watchdog.holds, 0,
        "a watchdog entry (hold or intent) was left behind"
    );
    assert_client_unsubscribed(client).await;
    assert_server_unsubscribed(&conn, name).await;
}

#[tokio::test]
async fn poll_once_or_abort_mid_wait_leaves_nothing() {
    let server = server();
    let client = client(&server).await;
    let other = keylatch_tests::client(&server).await;
    let name = unique("rw-poll-once");
    let rw = client.rw_lock(&name);
    for _ in 0..30 {
        poll_once(rw.read());
        poll_once(rw.write());
        poll_once(rw.try_read());
        poll_once(rw.try_write());
        poll_once(rw.read_lock().lock_with_lease(Duration::from_secs(5)));
        poll_once(rw.write_lock().lock_with_lease(Duration::from_secs(5)));
    }
    // Readers aborted while a writer holds; writers aborted while a reader holds (their
    // intents recorded, then withdrawn).
    for (holder_writes, waiter_writes) in [(true, false), (false, true), (true, true)] {
        let holder_rw = other.rw_lock(&name);
        let holder = if holder_writes {
            holder_rw.write().await.unwrap()
        } else {
            holder_rw.read().await.unwrap()
        };
        for _ in 0..20 {
            let rw = rw.clone();
            let waiting = tokio::spawn(async move {
                if waiter_writes {
                    rw.write().await
                } else {
                    rw.read().await
                }
            });
            tokio::time::sleep(Duration::from_millis(2)).await;
            waiting.abort();
            let _ = waiting.await;
        }
        holder.unlock().await.unwrap();
    }
    assert_clean(&client, &server, &name).await;
    assert_clean(&other, &server, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_timeout_storms_leave_nothing() {
    let server = server();
    let client = client(&server).await;
    let other = keylatch_tests::client(&server).await;
    let name = unique("rw-read-storm");
    // One owner scope, so that the second storm's reads are re-entries.
    let rw = client.rw_lock(&name).with_owner(Owner::unique());
    let mut storm = Storm::default();
    // Uncontended: the drop lands before, during or after the acquire's round trip.
    storm
        .run(300, Duration::ZERO, Then::Unlock, || rw.read())
        .await;
    // Re-entrant: the owner already holds a read hold, so drops land on re-entries.
    let held = rw.read().await.unwrap();
    storm
        .run(200, Duration::ZERO, Then::Drop, || rw.read())
        .await;
    client.wait_idle().await;
    assert_eq!(
        rw.read_lock().hold_count().await.unwrap(),
        1,
        "dropped re-entries changed the hold count"
    );
    held.unlock().await.unwrap();
    // Contended: another client writes for a while, so drops land mid-wait; it lets go
    // half-way through.
    let writing = other
        .rw_lock(&name)
        .write_lock()
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    let release = unlock_after(writing, Duration::from_millis(300));
    storm
        .run(300, Duration::ZERO, Then::Drop, || rw.read())
        .await;
    release.await.unwrap();
    println!(
        "read storm: {} acquired, {} cancelled",
        storm.acquired, storm.cancelled
    );
    assert!(
        storm.cancelled > 0 && storm.acquired > 0,
        "the storm missed an outcome"
    );
    assert_clean(&client, &server, &name).await;
    assert_eq!(other.stats().watchdog.holds, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_timeout_storms_leave_nothing() {
    let server = server();
    let client = client(&server).await;
    let other = keylatch_tests::client(&server).await;
    let name = unique("rw-write-storm");
    let rw = client.rw_lock(&name);
    let mut storm = Storm::default();
    storm
        .run(300, Duration::ZERO, Then::Unlock, || rw.write())
        .await;
    let Storm {
        mut acquired,
        mut cancelled,
    } = storm;
    // Contended by a reader on another client: the writer records its intent, and drops land
    // before, while and after it is recorded.
    let mut conn = raw(&server).await;
    let intent = format!("{{{name}}}:write_intent");
    let mut intents_seen = 0;
    for round in 0..2 {
        let reading = other
            .rw_lock(&name)
            .read_lock()
            .lock_with_lease(Duration::from_secs(30))
            .await
            .unwrap();
        let release = unlock_after(reading, Duration::from_millis(300));
        for i in 0..300u64 {
            let wait = Duration::from_nanos(i * 5_000 + round * 1_000_000);
            match tokio::time::timeout(wait, rw.write()).await {
                Ok(guard) => {
                    acquired += 1;
                    drop(guard.unwrap());
                }
                Err(_) => cancelled += 1,
            }
            if i % 50 == 0 && conn.exists::<_, bool>(&intent).await.unwrap() {
                intents_seen += 1;
            }
        }
        release.await.unwrap();
    }
    // Held throughout: every drop lands before, while or after the intent is recorded, and
    // no later acquire removes it; the withdrawals must.
    let reading = other.rw_lock(&name).read().await.unwrap();
    for i in 0..200u64 {
        let wait = Duration::from_nanos(i * 10_000 + 200_000);
        let result = tokio::time::timeout(wait, rw.write()).await;
        assert!(result.is_err(), "a reader holds the lock");
        cancelled += 1;
        if i % 20 == 0 && conn.exists::<_, bool>(&intent).await.unwrap() {
            intents_seen += 1;
        }
    }
    client.wait_idle().await;
    let exists: bool = conn.exists(&intent).await.unwrap();
    assert!(!exists, "cancelled writers left their intent");
    reading.unlock().await.unwrap();
    println!(
        "write storm: {acquired} acquired, {cancelled} cancelled, intent seen {intents_seen} \
         times mid-storm"
    );
    assert!(cancelled > 0 && acquired > 0, "the storm missed an outcome");
    assert_clean(&client, &server, &name).await;
    assert_eq!(other.stats().watchdog.holds, 0);
    // Nothing keeps new readers out afterwards.
    let reader = other.rw_lock(&name).with_owner(Owner::unique());
    let guard = reader.try_read().await.unwrap().expect("no stale intent");
    guard.unlock().await.unwrap();
}

/// Pauses the server so a request is sent but not answered, drops the future meanwhile, and
/// lets the server run it afterwards: the undo must cancel its effect.
#[tokio::test]
async fn acquires_dropped_in_flight_are_undone_after_the_server_runs_them() {
    let server = server();
    let client = client(&server).await;
    let other = keylatch_tests::client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("rw-in-flight");
    let rw = client.rw_lock(&name).with_owner(Owner::unique());

    // A fresh read, then a fresh write, dropped while the server is paused.
    for write in [false, true] {
        let fut = async {
            if write {
                rw.write().await
            } else {
                rw.read().await
            }
        };
        assert!(
            dropped_in_flight(&mut conn, fut).await,
            "the paused server answered"
        );
        client.wait_idle().await;
        let left = lock_keys(&mut conn, &name).await;
        assert!(left.is_empty(), "the dropped acquire left {left:?}");
        assert_eq!(client.stats().watchdog.holds, 0);
    }

    // A read re-entry dropped the same way: the count goes back to what the guards account
    // for, and so do the per-hold keys.
    let r1 = rw.read().await.unwrap();
    let r2 = rw.read().await.unwrap();
    assert!(dropped_in_flight(&mut conn, rw.read()).await);
    client.wait_idle().await;
    assert_eq!(rw.read_lock().hold_count().await.unwrap(), 2);
    let holds: Vec<String> = conn.keys(format!("{{{name}}}:*")).await.unwrap();
    assert_eq!(holds.len(), 2, "{holds:?}");

    // A read unlock dropped in flight still releases exactly once.
    assert!(dropped_in_flight(&mut conn, r2.unlock()).await);
    client.wait_idle().await;
    assert_eq!(rw.read_lock().hold_count().await.unwrap(), 1);
    r1.unlock().await.unwrap();

    // A waiting writer dropped in flight: the server records its intent after the drop; the
    // withdrawal, queued behind it, removes it.
    let reading = other
        .rw_lock(&name)
        .read_lock()
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    assert!(dropped_in_flight(&mut conn, rw.write()).await);
    client.wait_idle().await;
    let intent: bool = conn
        .exists(format!("{{{name}}}:write_intent"))
        .await
        .unwrap();
    assert!(!intent, "the dropped writer's intent was left behind");
    reading.unlock().await.unwrap();
    assert_clean(&client, &server, &name).await;
}

/// The lines `MONITOR` shows from now until `marker` is echoed (a bound of 10 s).
struct Monitor {
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Monitor {
    async fn start(server: &RedisServer) -> Monitor {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", server.port()))
            .await
            .unwrap();
        stream.write_all(b"MONITOR\r\n").await.unwrap();
        let mut reader = BufReader::new(stream);
        let mut ok = String::new();
        reader.read_line(&mut ok).await.unwrap();
        assert!(ok.starts_with("+OK"), "{ok}");
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = lines.clone();
        let task = tokio::spawn(async move {
            let mut line = String::new();
            while reader.read_line(&mut line).await.unwrap_or(0) > 0 {
                seen.lock().unwrap().push(std::mem::take(&mut line));
            }
        });
        Monitor { lines, task }
    }

    /// Every line up to the echo of `marker`, sent now through `conn`.
    async fn until(
        &self,
        conn: &mut redis::aio::MultiplexedConnection,
        marker: &str,
    ) -> Vec<String> {
        let _: String = redis::cmd("ECHO")
            .arg(marker)
            .query_async(conn)
            .await
            .unwrap();
        for _ in 0..1000 {
            let lines = self.lines.lock().unwrap().clone();
            if lines.iter().any(|l| l.contains(marker)) {
                return lines;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("MONITOR never showed {marker}");
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The client address (`127.0.0.1:port`) of a `MONITOR` line.
fn sender(line: &str) -> &str {
    line.split_once(" [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .and_then(|(db_addr, _)| db_addr.split_once(' '))
        .map_or("", |(_, addr)| addr)
}

#[tokio::test]
async fn a_withdrawn_intent_goes_on_the_connection_of_the_acquire_that_recorded_it() {
    // Commands on different connections may run in any order; a withdrawal sent on another
    // connection than the write acquire could run first and leave the intent for its timeout.
    let server = server();
    let client = client(&server).await;
    assert!(
        client.config().connections > 1,
        "the race needs two connections"
    );
    let other = keylatch_tests::client(&server).await;
    let mut conn = raw(&server).await;
    let monitor = Monitor::start(&server).await;
    // Several names: on two connections, a name and its intent key hash to different ones
    // for about half of them.
    let names: Vec<String> = (0..8).map(|_| unique("rw-withdraw-route")).collect();
    for name in &names {
        let reading = other.rw_lock(name).read().await.unwrap();
        let refused = client
            .rw_lock(name)
            .write_lock()
            .try_lock_for(Duration::from_millis(30), None)
            .await
            .unwrap();
        assert!(refused.is_none(), "a reader holds it");
        reading.unlock().await.unwrap();
    }
    client.wait_idle().await;
    let lines = monitor.until(&mut conn, "rw-withdraw-route-marker").await;
    for name in &names {
        let intent = format!("\"{{{name}}}:write_intent\"");
        let acquires: Vec<&str> = lines
            .iter()
            .filter(|l| l.contains(&intent) && l.contains("redisson_lock_token:"))
            .map(|l| sender(l))
            .collect();
        let withdrawals: Vec<&str> = lines
            .iter()
            .filter(|l| l.contains(&intent) && l.contains("\"redisson_rwlock:"))
            .map(|l| sender(l))
            .collect();
        assert!(
            !acquires.is_empty() && !withdrawals.is_empty(),
            "{name}: {lines:?}"
        );
        for withdrawal in &withdrawals {
            assert!(
                acquires.contains(withdrawal),
                "{name}: withdrawn from {withdrawal}, acquired from {acquires:?}"
            );
        }
    }
    for name in &names {
        assert_clean(&client, &server, name).await;
    }
}
