//! The fair lock's direct grant: a release hands the free lock to the keylatch waiter at the
//! head of the queue and tells it so in the wake-up message, so the waiter has the lock with
//! no request of its own. Each test checks that the grant really happened (the letters taken,
//! the requests counted on the server), and that nothing is left behind or given twice.
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch::{FairLock, LockGuard};
use keylatch_tests::{
    client_with, command_calls, eventually, raw, server, spawn_reporting, unique,
};

const SLOW_POLL: Duration = Duration::from_secs(60);

/// A client whose waits end only by their messages (the fallback poll is 60 s).
async fn slow_client(server: &keylatch_tests::RedisServer) -> keylatch::Client {
    client_with(server, Duration::from_secs(30), SLOW_POLL).await
}

/// What every test here starts from: a server, a holder's and a waiter's client (both slow:
/// see [`slow_client`]), a raw connection and a fresh lock name.
struct Scene {
    server: keylatch_tests::RedisServer,
    holder_client: keylatch::Client,
    waiter_client: keylatch::Client,
    conn: keylatch::redis::aio::MultiplexedConnection,
    name: String,
}

impl Scene {
    async fn new(prefix: &str) -> Scene {
        let server = server();
        Scene {
            holder_client: slow_client(&server).await,
            waiter_client: slow_client(&server).await,
            conn: raw(&server).await,
            name: unique(prefix),
            server,
        }
    }
}

/// The grant hash of the fair lock `name`: offers and grant marks.
fn grants_key(name: &str) -> String {
    format!("{{{name}}}:keylatch_grants")
}

/// Every key of the fair lock `name`.
fn keys(name: &str) -> [String; 6] {
    [
        name.to_owned(),
        format!("redisson_lock_queue:{{{name}}}"),
        format!("redisson_lock_timeout:{{{name}}}"),
        format!("{{{name}}}:keylatch_waiters"),
        grants_key(name),
        format!("redisson_lock_token:{{{name}}}"),
    ]
}

/// Asserts that nothing of the lock is left but the fencing counter.
async fn assert_clean(conn: &mut keylatch::redis::aio::MultiplexedConnection, name: &str) {
    for key in &keys(name)[..5] {
        let exists: bool = conn.exists(key).await.unwrap();
        let kind: String = keylatch::redis::cmd("TYPE")
            .arg(key)
            .query_async(conn)
            .await
            .unwrap();
        assert!(!exists, "{key} ({kind}) was left behind");
    }
}

/// Waits until the queue holds `n` waiters.
async fn queued(lock: &FairLock, n: usize) {
    let queued = eventually(Duration::from_secs(10), || async {
        lock.queue().await.unwrap().len() == n
    })
    .await;
    assert!(queued, "{n} waiters did not queue");
}

/// A wait, polled only by the test: `poll_until` drives it until `done` says so, then it sits
/// unpolled (as if its task were busy elsewhere) until the test polls or drops it.
struct Driven {
    wait: std::pin::Pin<Box<dyn std::future::Future<Output = keylatch::Result<LockGuard>> + Send>>,
}

impl Driven {
    fn new(lock: FairLock) -> Driven {
        Driven {
            wait: Box::pin(async move { lock.lock().await }),
        }
    }

    /// A wait of `client` on `lock`, driven until it is the only waiter queued (seen through
    /// `probe`), subscribed, and its second attempt (after subscribing) has finished; then left
    /// unpolled. Returns it with its waiter id.
    async fn parked(
        client: &keylatch::Client,
        lock: FairLock,
        probe: &FairLock,
    ) -> (Driven, String) {
        let mut wait = Driven::new(lock);
        wait.poll_until(|| async {
            probe.queue().await.unwrap().len() == 1 && client.stats().subscribers >= 1
        })
        .await;
        wait.poll_until(|| async { client.stats().background_pending == 0 })
            .await;
        let id = probe.queue().await.unwrap()[0].id.clone();
        (wait, id)
    }

    async fn poll_until<F, Fut>(&mut self, mut done: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        for _ in 0..1000 {
            tokio::select! {
                biased;
                result = &mut self.wait => panic!("the wait ended early: {:?}", result.map(|g| g.name().to_owned())),
                () = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
            if done().await {
                return;
            }
        }
        panic!("the wait never got there");
    }
}

/// One release, one hand-over: the holder's release is the only request on the server, the
/// waiter takes the lock from the letter (with the next fencing token and the grant's lease),
/// and once it unlocks nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_hands_the_lock_to_the_head_with_no_request_of_its_own() {
    let scene = Scene::new("fair-grant").await;
    let Scene {
        holder_client,
        waiter_client,
        name,
        ..
    } = &scene;
    let mut conn = scene.conn.clone();
    // A fixed lease no longer than the waiter timeout (so nothing renews anything here), and
    // a waiter timeout long enough that no refresh falls inside the measured step.
    let lease = Duration::from_secs(2);
    let lock = |client: &keylatch::Client| {
        client
            .fair_lock(name)
            .with_fencing(true)
            .with_waiter_timeout(Duration::from_secs(30))
    };
    let held = lock(holder_client).lock_with_lease(lease).await.unwrap();
    let start = command_calls(&mut conn, "evalsha").await;
    let waiter = lock(waiter_client);
    let waiting = tokio::spawn(async move { waiter.lock_with_lease(lease).await });
    // The waiter's first attempt queues it; it subscribes and tries once more; then it sleeps.
    let settled = eventually(Duration::from_secs(10), || {
        let mut conn = conn.clone();
        async move { command_calls(&mut conn, "evalsha").await - start >= 2 }
    })
    .await;
    assert!(settled, "the waiter did not queue");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let queue = lock(holder_client).queue().await.unwrap();
    assert_eq!(queue.len(), 1, "one waiter queued");
    let waiter_id = queue[0].id.clone();

    let before = command_calls(&mut conn, "evalsha").await;
    let holder_token = held.fencing_token().unwrap();
    held.unlock().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter got the lock from the message, not the 60 s poll")
        .unwrap()
        .unwrap();
    let requests = command_calls(&mut conn, "evalsha").await - before;
    let letters = waiter_client.stats().letters;
    let count: Option<u64> = conn.hget(name, &waiter_id).await.unwrap();
    let pttl: i64 = conn.pttl(name).await.unwrap();
    let mark: Option<String> = conn.hget(grants_key(name), &waiter_id).await.unwrap();
    let token = guard.fencing_token().unwrap();
    println!(
        "hand-over: {requests} script call(s), {letters} letter(s); hold count {count:?}, \
         PTTL {pttl} ms, mark {mark:?}; tokens {holder_token} then {token}"
    );
    assert_eq!(
        requests, 1,
        "the holder's release alone: the waiter sent nothing"
    );
    assert_eq!(letters, 1, "the waiter took the lock from the letter");
    assert_eq!(count, Some(1), "the waiter holds the lock once");
    assert!(
        (1..=2000).contains(&pttl),
        "the grant's lease is the waiter's: {pttl} ms"
    );
    // The mark is '=<token>:<attempt>': the waiter's second attempt (after subscribing)
    // made the offer the grant answers.
    let attempt = mark
        .as_deref()
        .and_then(|m| m.strip_prefix(&format!("={token}:")))
        .and_then(|n| n.parse::<u64>().ok());
    assert_eq!(
        attempt,
        Some(2),
        "the grant mark carries the token and the attempt: {mark:?}"
    );
    assert!(
        token > holder_token,
        "fencing tokens increase across a grant"
    );
    assert!(lock(holder_client).queue().await.unwrap().is_empty());
    // Re-entering the granted hold through its owner counts up (the mark is not taken again).
    let again = lock(waiter_client)
        .with_owner(guard.owner())
        .lock_with_lease(lease)
        .await
        .unwrap();
    let count: Option<u64> = conn.hget(name, &waiter_id).await.unwrap();
    assert_eq!(count, Some(2), "a re-entry of a granted hold counts up");
    again.unlock().await.unwrap();
    guard.unlock().await.unwrap();
    assert_clean(&mut conn, name).await;
    assert_eq!(waiter_client.stats().watchdog.holds, 0);
}

/// A wait that ends (here: dropped) after the lock was handed to it, before it took the
/// letter: its leave releases the hold and hands the lock on to the next waiter, long before
/// the dropped waiter's 30 s grant would have ended. The dropped waiter never appears as a
/// holder again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_dropped_with_the_lock_on_its_way_hands_it_on() {
    let scene = Scene::new("fair-grant-drop").await;
    let Scene {
        holder_client,
        waiter_client: dropped_client,
        name,
        server,
        ..
    } = &scene;
    let mut conn = scene.conn.clone();
    let next_client = slow_client(server).await;
    let grants = grants_key(name);
    let held = holder_client.fair_lock(name).lock().await.unwrap();
    let probe = holder_client.fair_lock(name);

    // The first waiter queues and subscribes, then is no longer polled. Its waiter timeout
    // (and so its grant's lease) is 30 s.
    let first_lock = dropped_client
        .fair_lock(name)
        .with_waiter_timeout(Duration::from_secs(30));
    let (first, first_id) = Driven::parked(dropped_client, first_lock, &probe).await;
    let next_lock = next_client.fair_lock(name);
    let next = tokio::spawn(async move { next_lock.lock().await });
    queued(&probe, 2).await;

    held.unlock().await.unwrap();
    // The lock is the first waiter's now, by grant; it never sees the letter.
    let mark: Option<String> = conn.hget(&grants, &first_id).await.unwrap();
    let count: Option<u64> = conn.hget(name, &first_id).await.unwrap();
    assert!(
        mark.as_deref().is_some_and(|m| m.starts_with("=:")),
        "the lock was handed to the first waiter: {mark:?}"
    );
    assert_eq!(count, Some(1));
    drop(first);

    // Handed on by the leave, by grant: by letter, or by the next waiter's attempt if that
    // was still on its way (its second, after subscribing, on a loaded machine).
    let guard = tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .expect("the next waiter got the lock, handed on by the leave, not after 30 s")
        .unwrap()
        .unwrap();
    println!(
        "handed on; the next waiter took {} letter(s)",
        next_client.stats().letters
    );
    let count: Option<u64> = conn.hget(name, &first_id).await.unwrap();
    assert_eq!(count, None, "the dropped waiter holds nothing");
    assert_eq!(
        dropped_client.stats().letters,
        0,
        "the dropped wait took no letter"
    );
    guard.unlock().await.unwrap();
    dropped_client.wait_idle().await;
    assert_clean(&mut conn, name).await;
    assert_eq!(dropped_client.stats().watchdog.holds, 0);
}

/// A letter lost with the pub/sub connection: the waiter's next attempt (woken by the
/// reconnection) finds the lock handed to it and takes it — once, with a hold count of 1, so
/// one unlock frees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_letter_is_taken_by_the_next_attempt() {
    let scene = Scene::new("fair-grant-lost").await;
    let Scene {
        holder_client,
        waiter_client,
        name: prefix,
        ..
    } = &scene;
    let mut conn = scene.conn.clone();
    let mut taken_by_attempt = 0;
    for round in 0..10 {
        let name = format!("{prefix}-{round}");
        let held = holder_client.fair_lock(&name).lock().await.unwrap();
        let probe = holder_client.fair_lock(&name);
        let waiter = waiter_client.fair_lock(&name);
        let waiting = tokio::spawn(async move { waiter.lock().await });
        queued(&probe, 1).await;
        let subscribed = eventually(Duration::from_secs(10), || async {
            waiter_client.stats().subscribers >= 1
        })
        .await;
        assert!(subscribed);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let waiter_id = probe.queue().await.unwrap()[0].id.clone();
        let letters = waiter_client.stats().letters;
        // Both pub/sub connections go; the release follows at once, before the waiter's hub
        // is back (mostly: a round where it was back first takes the letter).
        let _: i64 = keylatch::redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query_async(&mut conn)
            .await
            .unwrap();
        held.unlock().await.unwrap();
        let guard = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the waiter got the lock after the reconnection")
            .unwrap()
            .unwrap();
        let by_letter = waiter_client.stats().letters - letters;
        let count: Option<u64> = conn.hget(&name, &waiter_id).await.unwrap();
        let mark: Option<String> = conn.hget(grants_key(&name), &waiter_id).await.unwrap();
        println!("round {round}: by letter {by_letter}, count {count:?}, mark {mark:?}");
        assert_eq!(count, Some(1), "the grant is taken once");
        if by_letter == 0 {
            taken_by_attempt += 1;
            assert_eq!(
                mark, None,
                "the attempt that took the grant cleared its mark"
            );
        }
        guard.unlock().await.unwrap();
        assert_clean(&mut conn, &name).await;
        kill_pubsub_settle(waiter_client, holder_client).await;
    }
    println!("{taken_by_attempt} of 10 grants taken by an attempt");
    assert!(
        taken_by_attempt >= 1,
        "no letter was lost: the case was not tested"
    );
}

/// Waits until both clients' hubs are connected again.
async fn kill_pubsub_settle(a: &keylatch::Client, b: &keylatch::Client) {
    let back = eventually(Duration::from_secs(10), || async {
        a.stats().hub_connected && b.stats().hub_connected
    })
    .await;
    assert!(back, "the hubs did not reconnect");
}

/// A waiter process killed just before the lock is handed to it (its queue deadline has not
/// passed yet): the grant ends no later than that deadline, not after the lock's 30 s lease
/// nor a whole waiter timeout after the grant, so the next waiter gets the lock once it ends;
/// and the grant mark left behind expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_to_a_dead_waiter_holds_the_queue_no_longer_than_its_deadline() {
    const WAITER_TIMEOUT: Duration = Duration::from_millis(3000);
    const AFTER_KILL: Duration = Duration::from_millis(1000);
    let scene = Scene::new("fair-grant-dead").await;
    let Scene {
        holder_client,
        waiter_client: next_client,
        name,
        server,
        ..
    } = &scene;
    let mut conn = scene.conn.clone();
    let grants = grants_key(name);
    let held = holder_client.fair_lock(name).lock().await.unwrap();
    let (mut child, line) = spawn_reporting(
        env!("CARGO_BIN_EXE_keylatch-test-fair-waiter"),
        &[
            server.url(),
            name.clone(),
            WAITER_TIMEOUT.as_millis().to_string(),
            "grant".to_owned(),
        ],
        "the waiter process",
    )
    .await;
    let child_id = line
        .unwrap_or_default()
        .strip_prefix("queued ")
        .expect("queued <id>")
        .to_owned();
    child.kill().await.unwrap();
    // Its last refresh was at most a third of its waiter timeout before the kill: at the
    // release, between about 1 000 ms (less any stall of this test) and 2 000 ms of its
    // deadline are left.
    tokio::time::sleep(AFTER_KILL).await;
    held.unlock().await.unwrap();
    let count: Option<u64> = conn.hget(name, &child_id).await.unwrap();
    let pttl: i64 = conn.pttl(name).await.unwrap();
    let grants_ttl: i64 = conn.pttl(&grants).await.unwrap();
    println!(
        "the dead waiter was handed the lock: count {count:?}, PTTL {pttl} ms; the grant hash \
         expires in {grants_ttl} ms"
    );
    assert_eq!(count, Some(1), "the lock was handed to the dead waiter");
    let left = (WAITER_TIMEOUT - AFTER_KILL).as_millis() as i64;
    assert!(
        (1..=left + 100).contains(&pttl),
        "the grant ends with the waiter's deadline (at most {left} ms from now): {pttl} ms"
    );
    assert!(
        grants_ttl > 0,
        "the grant mark never expires: PTTL {grants_ttl}"
    );
    // The next waiter's first attempt queues it with the holder's PTTL as its bound: it gets
    // the lock once the grant has ended, well before the lock's 30 s lease.
    let next_lock = next_client
        .fair_lock(name)
        .with_waiter_timeout(WAITER_TIMEOUT);
    let guard = tokio::time::timeout(Duration::from_secs(10), next_lock.lock())
        .await
        .expect("the next waiter got the lock once the dead waiter's grant ended")
        .unwrap();
    guard.unlock().await.unwrap();
    next_client.wait_idle().await;
    let left: i64 = conn.exists(&keys(name)[..4]).await.unwrap();
    assert_eq!(left, 0, "a hold or queue entry was left behind");
}

/// `force_unlock` of a hold handed to a waiter that has not taken it yet takes the grant mark
/// with it; the waiter, taking its letter afterwards, holds a guard whose hold is gone, as any
/// holder whose lock was forced: its unlock says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_takes_an_untaken_grant_with_it() {
    let scene = Scene::new("fair-grant-force").await;
    let Scene {
        holder_client,
        waiter_client,
        name,
        ..
    } = &scene;
    let mut conn = scene.conn.clone();
    let grants = grants_key(name);
    let held = holder_client.fair_lock(name).lock().await.unwrap();
    let probe = holder_client.fair_lock(name);
    let (mut waiting, waiter_id) =
        Driven::parked(waiter_client, waiter_client.fair_lock(name), &probe).await;
    held.unlock().await.unwrap();
    let mark: Option<String> = conn.hget(&grants, &waiter_id).await.unwrap();
    assert!(
        mark.is_some_and(|m| m.starts_with('=')),
        "the lock was handed over"
    );
    assert!(probe.force_unlock().await.unwrap(), "the grant was a hold");
    let mark: Option<String> = conn.hget(&grants, &waiter_id).await.unwrap();
    assert_eq!(mark, None, "force_unlock deleted the grant mark");
    let guard = tokio::time::timeout(Duration::from_secs(10), &mut waiting.wait)
        .await
        .expect("the waiter took its letter")
        .unwrap();
    assert!(
        matches!(guard.unlock().await, Err(keylatch::Error::NotHeld { .. })),
        "the forced hold is reported gone"
    );
    waiter_client.wait_idle().await;
    assert_clean(&mut conn, name).await;
}
