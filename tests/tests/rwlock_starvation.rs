//! No writer starvation: while a writer waits, new readers wait behind it. Its intent is kept
//! fresh while it waits, withdrawn (waking the deferred readers) when it gives up, and expires
//! when its process dies.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use keylatch::Owner;
use keylatch::redis::{self, AsyncCommands};
use keylatch_tests::{client, client_with, eventually, raw, server, unique};
use tokio::time::Instant;

const READERS: usize = 8;
/// The bound stated for a writer under continuous read load: it must get in within this.
/// The readers inside hold for about 2 ms each and the last one's release wakes the writer,
/// so a few milliseconds are expected; 5 s (the default writer intent timeout) is the bound.
const WRITER_BOUND: Duration = Duration::from_secs(5);

async fn server_millis(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    secs * 1000 + micros / 1000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_readers_in_tight_loops_do_not_starve_a_writer() {
    let server = server();
    let clients = [client(&server).await, client(&server).await];
    let name = unique("rw-starve");
    let inside = format!("{name}-readers-inside");
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for i in 0..READERS {
        let rw = clients[i % 2].rw_lock(&name);
        let mut conn = raw(&server).await;
        let (inside, stop, reads) = (inside.clone(), stop.clone(), reads.clone());
        readers.push(tokio::spawn(async move {
            // Bounded: stops when told, or after this many reads.
            for _ in 0..100_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let guard = rw.read().await.expect("read");
                reads.fetch_add(1, Ordering::Relaxed);
                let _: i64 = conn.incr(&inside, 1).await.expect("incr");
                tokio::time::sleep(Duration::from_millis(2)).await;
                let _: i64 = conn.decr(&inside, 1).await.expect("decr");
                guard.unlock().await.expect("read unlock");
            }
        }));
    }
    let warm = eventually(Duration::from_secs(10), || async {
        reads.load(Ordering::Relaxed) >= 200
    })
    .await;
    assert!(warm, "the readers did not get going");

    let rw = clients[0].rw_lock(&name);
    let mut conn = raw(&server).await;
    let reads_before = reads.load(Ordering::Relaxed);
    let started = Instant::now();
    let guard = rw
        .write_lock()
        .try_lock_for(WRITER_BOUND, None)
        .await
        .expect("write")
        .unwrap_or_else(|| panic!("the writer starved: not in within {WRITER_BOUND:?}"));
    let waited = started.elapsed();
    let granted_meanwhile = reads.load(Ordering::Relaxed) - reads_before;
    let readers_inside: i64 = conn.get(&inside).await.expect("get");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let readers_inside_later: i64 = conn.get(&inside).await.expect("get");
    let granted_while_writing = reads.load(Ordering::Relaxed) - reads_before - granted_meanwhile;
    guard.unlock().await.expect("write unlock");
    let reads_after_write = reads.load(Ordering::Relaxed);
    let resumed = eventually(Duration::from_secs(10), || async {
        reads.load(Ordering::Relaxed) >= reads_after_write + 100
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.await.expect("reader");
    }
    println!(
        "{READERS} readers in tight loops ({} reads in all): the writer got in after {waited:?} \
         (bound {WRITER_BOUND:?}); reads granted while it waited: {granted_meanwhile}",
        reads.load(Ordering::Relaxed)
    );
    assert_eq!(readers_inside, 0, "a reader was inside with the writer");
    assert_eq!(readers_inside_later, 0, "a reader got in while writing");
    assert_eq!(granted_while_writing, 0, "a read was granted while writing");
    // Each reader may have had one read granted before the writer's intent was recorded, and
    // one more counted late; after that, new readers wait behind the writer.
    assert!(
        granted_meanwhile <= 2 * READERS as u64,
        "{granted_meanwhile} reads were granted while the writer waited"
    );
    assert!(resumed, "the readers did not resume after the writer");
    let left: Vec<String> = conn.keys(format!("*{name}}}*")).await.expect("keys");
    assert!(left.is_empty(), "keys left behind: {left:?}");
}

#[tokio::test]
async fn a_writer_that_gives_up_lets_the_deferred_readers_in_at_once() {
    let server = server();
    // A long fallback poll: only the withdrawal's message can wake the deferred reader early.
    let client = client_with(&server, Duration::from_secs(30), Duration::from_secs(10)).await;
    let name = unique("rw-give-up");
    let mut conn = raw(&server).await;
    let holder = client
        .rw_lock(&name)
        .with_owner(Owner::unique())
        .read()
        .await
        .unwrap();
    let writer = client.rw_lock(&name).with_owner(Owner::unique());
    let gave_up = tokio::spawn(async move {
        let got = writer
            .write_lock()
            .try_lock_for(Duration::from_millis(500), None)
            .await
            .unwrap();
        assert!(got.is_none(), "a reader holds the lock");
        Instant::now()
    });
    let intent = format!("{{{name}}}:write_intent");
    let waiting = eventually(Duration::from_secs(5), || {
        let mut conn = conn.clone();
        let intent = intent.clone();
        async move { conn.exists::<_, bool>(&intent).await.unwrap() }
    })
    .await;
    assert!(waiting, "the writer recorded no intent");
    let reader = client.rw_lock(&name).with_owner(Owner::unique());
    assert!(
        reader.try_read().await.unwrap().is_none(),
        "a new reader must defer to the waiting writer"
    );
    let deferred = tokio::spawn(async move {
        let guard = reader
            .read_lock()
            .try_lock_for(Duration::from_secs(20), None)
            .await
            .unwrap()
            .expect("in once the writer gives up");
        (Instant::now(), guard)
    });
    let gave_up = gave_up.await.unwrap();
    let (got_in, guard) = deferred.await.unwrap();
    let after = got_in.saturating_duration_since(gave_up);
    println!("the deferred reader got in {after:?} after the writer gave up");
    // Without the wake-up it would sleep until the intent's deadline (5 s) or the poll (10 s).
    assert!(
        after < Duration::from_secs(2),
        "the deferred reader was not woken: {after:?}"
    );
    let exists: bool = conn.exists(&intent).await.unwrap();
    assert!(!exists, "the intent was not withdrawn");
    guard.unlock().await.unwrap();
    holder.unlock().await.unwrap();
}

#[tokio::test]
async fn the_intent_stays_fresh_while_waiting_and_a_dead_writers_intent_expires() {
    let server = server();
    let client = client(&server).await;
    let name = unique("rw-intent");
    let mut conn = raw(&server).await;
    let intent = format!("{{{name}}}:write_intent");
    let holder = client
        .rw_lock(&name)
        .with_owner(Owner::unique())
        .read()
        .await
        .unwrap();

    // A writer with a 300 ms intent waits 1.5 s: the watchdog keeps its intent fresh.
    let writer = client
        .rw_lock(&name)
        .with_owner(Owner::unique())
        .with_writer_intent_timeout(Duration::from_millis(300));
    let waiting = tokio::spawn(async move {
        writer
            .write_lock()
            .try_lock_for(Duration::from_millis(1500), None)
            .await
            .unwrap()
            .is_none()
    });
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let now = server_millis(&mut conn).await;
    let entries: Vec<(String, f64)> = conn.zrange_withscores(&intent, 0, -1).await.unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(
        entries[0].1 as u64 > now,
        "the intent was not refreshed: deadline {} <= now {now}",
        entries[0].1
    );
    assert!(
        client
            .rw_lock(&name)
            .with_owner(Owner::unique())
            .try_read()
            .await
            .unwrap()
            .is_none(),
        "after 3 intent timeouts, new readers still defer to the waiting writer"
    );
    assert!(waiting.await.unwrap(), "a reader holds the lock");
    let exists: bool = conn.exists(&intent).await.unwrap();
    assert!(!exists, "the intent outlived the wait");

    // A writer that died while waiting: its intent stops being refreshed and expires.
    let now = server_millis(&mut conn).await;
    let _: () = redis::pipe()
        .zadd(&intent, "dead-writer:1", now + 500)
        .pexpire(&intent, 500)
        .query_async(&mut conn)
        .await
        .unwrap();
    let reader = client.rw_lock(&name).with_owner(Owner::unique());
    assert!(reader.try_read().await.unwrap().is_none(), "deferred");
    let started = Instant::now();
    let guard = reader
        .read_lock()
        .try_lock_for(Duration::from_secs(5), None)
        .await
        .unwrap()
        .expect("in once the dead writer's intent expires");
    println!(
        "a dead writer's 500 ms intent kept a new reader out for {:?}",
        started.elapsed()
    );
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "within the intent's deadline + 1 s"
    );
    guard.unlock().await.unwrap();
    holder.unlock().await.unwrap();
    let left: Vec<String> = conn.keys(format!("*{name}*")).await.unwrap();
    assert!(left.is_empty(), "keys left behind: {left:?}");
}
