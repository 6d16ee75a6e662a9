//! Waiter liveness: a waiter whose process is killed is evicted after its waiter timeout and
//! the queue moves on in order; a live waiter keeps its place however long it waits; a waiter
//! that gives up (timed out or cancelled) leaves at once and the next one inherits no delay.
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch::{FairLock, LockGuard};
use keylatch_tests::{
    client_with, command_calls, eventually, fair_waiter, queue_ids, raw, server, spawn_reporting,
    unique,
};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Fallback poll long enough that only wake-ups and the queue's own bounds move a waiter.
const SLOW_POLL: Duration = Duration::from_secs(60);

/// Starts `lock.lock()` and returns when the waiter is in the queue.
async fn queue_up(lock: &FairLock, id: &str) -> JoinHandle<(keylatch::Result<LockGuard>, Instant)> {
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move {
            let result = lock.lock().await;
            (result, Instant::now())
        }
    });
    let queued = eventually(Duration::from_secs(5), || async {
        lock.queue().await.unwrap().iter().any(|w| w.id == id)
    })
    .await;
    assert!(queued, "{id} did not queue");
    waiting
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_waiter_process_is_evicted_and_the_queue_moves_on_in_order() {
    const WAITER_TIMEOUT: Duration = Duration::from_secs(1);
    let server = server();
    let holder_client = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let b = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let c = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let name = unique("fair-crash");
    let holder = holder_client
        .fair_lock(&name)
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();

    // First in line: a waiter in another process.
    let (mut child, line) = spawn_reporting(
        env!("CARGO_BIN_EXE_keylatch-test-fair-waiter"),
        &[
            server.url(),
            name.clone(),
            WAITER_TIMEOUT.as_millis().to_string(),
        ],
        "the waiter process",
    )
    .await;
    let line = line.unwrap_or_default();
    let child_id = line
        .strip_prefix("queued ")
        .expect("queued <id>")
        .to_owned();

    let (second, second_id) = fair_waiter(&b, &name, WAITER_TIMEOUT);
    let (third, third_id) = fair_waiter(&c, &name, WAITER_TIMEOUT);
    let second_wait = queue_up(&second, &second_id).await;
    let third_wait = queue_up(&third, &third_id).await;
    assert_eq!(
        queue_ids(&second).await,
        vec![child_id.clone(), second_id.clone(), third_id.clone()]
    );
    // The child refreshes its place: after two waiter timeouts it is still first.
    tokio::time::sleep(WAITER_TIMEOUT * 2).await;
    assert_eq!(
        queue_ids(&second).await[0],
        child_id,
        "a live waiter lost its place"
    );

    child.kill().await.unwrap();
    let killed = Instant::now();
    // The release wakes the dead head; nobody answers until its deadline passes.
    holder.unlock().await.unwrap();
    let (guard, acquired) =
        tokio::time::timeout(WAITER_TIMEOUT + Duration::from_secs(10), second_wait)
            .await
            .expect("the queue never moved on")
            .unwrap();
    let guard = guard.unwrap();
    let moved_on = acquired - killed;
    println!(
        "killed waiter process: the next waiter got the lock {moved_on:?} after the kill (waiter timeout {WAITER_TIMEOUT:?})"
    );
    assert!(
        moved_on <= WAITER_TIMEOUT + Duration::from_secs(1),
        "the queue moved on only after {moved_on:?}"
    );
    assert!(!third_wait.is_finished(), "the third overtook the second");
    assert_eq!(
        queue_ids(&third).await,
        vec![third_id.clone()],
        "the dead waiter was evicted"
    );
    guard.unlock().await.unwrap();
    let (guard, _) = tokio::time::timeout(Duration::from_secs(5), third_wait)
        .await
        .expect("the third is woken by the release")
        .unwrap();
    guard.unwrap().unlock().await.unwrap();
    let mut conn = raw(&server).await;
    for key in [
        name.clone(),
        format!("redisson_lock_queue:{{{name}}}"),
        format!("redisson_lock_timeout:{{{name}}}"),
        format!("{{{name}}}:keylatch_waiters"),
    ] {
        let exists: bool = conn.exists(&key).await.unwrap();
        assert!(!exists, "{key} left behind");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_waiter_keeps_its_place_for_three_waiter_timeouts() {
    const WAITER_TIMEOUT: Duration = Duration::from_millis(500);
    let server = server();
    let holder_client = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let b = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let c = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let name = unique("fair-live");
    let holder = holder_client
        .fair_lock(&name)
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    // The head waits on the holder's 30 s lease and a 60 s poll: it does not retry on its own,
    // so only the refresh keeps its deadline. The second retries at each deadline of the head
    // and would evict it the moment it passed.
    let (first, first_id) = fair_waiter(&b, &name, WAITER_TIMEOUT);
    let (second, second_id) = fair_waiter(&c, &name, WAITER_TIMEOUT);
    let first_wait = queue_up(&first, &first_id).await;
    let second_wait = queue_up(&second, &second_id).await;
    let renewed_before = b.stats().watchdog.renewed_keys;
    let started = Instant::now();
    let mut samples = 0;
    while started.elapsed() < WAITER_TIMEOUT * 3 {
        let queue = first.queue().await.unwrap();
        let order: Vec<&str> = queue.iter().map(|w| w.id.as_str()).collect();
        assert_eq!(
            order,
            vec![first_id.as_str(), second_id.as_str()],
            "after {:?}",
            started.elapsed()
        );
        assert!(queue.iter().all(|w| !w.expires_in.is_zero()), "{queue:?}");
        samples += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let refreshes = b.stats().watchdog.renewed_keys - renewed_before;
    println!(
        "head waited {:?} (3 x {WAITER_TIMEOUT:?}): first in all {samples} samples, {refreshes} refreshes",
        started.elapsed()
    );
    assert!(
        refreshes >= 6,
        "expected the head's deadline to be refreshed, got {refreshes}"
    );
    holder.unlock().await.unwrap();
    let (guard, first_at) = first_wait.await.unwrap();
    guard.unwrap().unlock().await.unwrap();
    let (guard, second_at) = second_wait.await.unwrap();
    guard.unwrap().unlock().await.unwrap();
    assert!(first_at < second_at, "the second overtook the first");
    assert_eq!(b.stats().watchdog.holds, 0, "the refresh outlived the wait");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_that_give_up_leave_at_once_and_pass_on_no_delay() {
    // A long waiter timeout: a waiter left behind in the queue would hold the next one up
    // for 10 s.
    const WAITER_TIMEOUT: Duration = Duration::from_secs(10);
    let server = server();
    let a = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let b = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let mut conn = raw(&server).await;

    // 1. A bounded wait times out: it is out of the queue when `try_lock_for` returns.
    let name = unique("fair-timed-out");
    let holder = a
        .fair_lock(&name)
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    let (impatient, impatient_id) = fair_waiter(&b, &name, WAITER_TIMEOUT);
    let (patient, patient_id) = fair_waiter(&a, &name, WAITER_TIMEOUT);
    let timed_out = tokio::spawn({
        let impatient = impatient.clone();
        async move {
            impatient
                .try_lock_for(Duration::from_millis(400), None)
                .await
        }
    });
    let queued = eventually(Duration::from_secs(5), || async {
        queue_ids(&patient).await == vec![impatient_id.clone()]
    })
    .await;
    assert!(queued);
    let patient_wait = queue_up(&patient, &patient_id).await;
    assert!(timed_out.await.unwrap().unwrap().is_none());
    assert_eq!(
        queue_ids(&patient).await,
        vec![patient_id.clone()],
        "the timed-out wait is still queued"
    );
    let released = Instant::now();
    holder.unlock().await.unwrap();
    let (guard, acquired) = tokio::time::timeout(Duration::from_secs(5), patient_wait)
        .await
        .expect("the next waiter was held up")
        .unwrap();
    guard.unwrap().unlock().await.unwrap();
    println!(
        "timed-out head: the next waiter got the lock {:?} after the release",
        acquired - released
    );

    // 2. A cancelled head while the lock is held by a lease that runs out (no release
    //    message): leaving wakes the new head, which then waits for the lease, not for the
    //    old head's 10 s deadline or its 60 s poll.
    let name = unique("fair-cancelled");
    let lease = Duration::from_millis(1500);
    let _: () = conn.hset(&name, "someone-else:1", 1).await.unwrap();
    let _: () = conn.pexpire(&name, lease.as_millis() as i64).await.unwrap();
    let leased_at = Instant::now();
    let (first, first_id) = fair_waiter(&b, &name, WAITER_TIMEOUT);
    let (second, second_id) = fair_waiter(&a, &name, WAITER_TIMEOUT);
    let first_wait = queue_up(&first, &first_id).await;
    let second_wait = queue_up(&second, &second_id).await;
    // Let the second settle into its sleep (subscribed, second attempt done: it sleeps until
    // the head's deadline) before the head goes.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let settled = eventually(Duration::from_secs(5), || async {
        a.stats().subscribers == 1
    })
    .await;
    assert!(settled, "{:?}", a.stats());
    tokio::time::sleep(Duration::from_millis(50)).await;
    first_wait.abort();
    let _ = first_wait.await;
    let left = eventually(Duration::from_secs(2), || async {
        queue_ids(&second).await == vec![second_id.clone()]
    })
    .await;
    assert!(
        left,
        "the cancelled wait is still queued: {:?}",
        queue_ids(&second).await
    );
    let (guard, acquired) = tokio::time::timeout(Duration::from_secs(8), second_wait)
        .await
        .expect("the next waiter inherited the cancelled one's delay")
        .unwrap();
    let after = acquired - leased_at;
    println!(
        "cancelled head: the next waiter got the lock {after:?} after a {lease:?} lease began"
    );
    assert!(
        after <= lease + Duration::from_secs(1),
        "got it only after {after:?}"
    );
    guard.unwrap().unlock().await.unwrap();
    for client in [&a, &b] {
        client.wait_idle().await;
        assert_eq!(client.stats().watchdog.holds, 0);
    }
}

/// One hand-over: `holder` takes the lock, `waiter` queues behind it (seen with a plain
/// `LLEN`, so no script is counted), the holder releases. Returns how long after the release
/// the waiter got the lock; with the 60 s fallback poll only its wake-up message can end its
/// wait within the 10 s allowed.
async fn hand_over(
    conn: &keylatch::redis::aio::MultiplexedConnection,
    holder: &FairLock,
    waiter: &FairLock,
) -> Duration {
    let held = holder.lock().await.unwrap();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move {
            let guard = waiter.lock().await.unwrap();
            let acquired = Instant::now();
            guard.unlock().await.unwrap();
            acquired
        }
    });
    let queue = format!("redisson_lock_queue:{{{}}}", holder.name());
    let queued = eventually(Duration::from_secs(5), || {
        let (mut conn, queue) = (conn.clone(), queue.clone());
        async move { conn.llen::<_, usize>(&queue).await.unwrap() == 1 }
    })
    .await;
    assert!(queued, "the waiter did not queue");
    let released = Instant::now();
    held.unlock().await.unwrap();
    let acquired = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("woken by its message, not by the 60 s poll")
        .unwrap();
    acquired - released
}

/// Every fair waiter has a channel of its own, and owners are new for each acquisition: one
/// pattern subscription per client and lock carries them all, so waits after the first cost
/// no SUBSCRIBE and no second attempt, and every wait is still ended by its wake-up message
/// (the fallback poll is 60 s): the lock handed over in it, with no request of the waiter's.
/// Once nobody waits, the pattern goes after the linger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pattern_carries_the_wake_ups_of_every_waiter_of_a_client() {
    let server = server();
    let holder_client = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let waiter_client = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let mut conn = raw(&server).await;
    // A plain name, and one with every glob character (escaped in the pattern).
    for name in [unique("fair-pattern"), unique("fair*pat?[te]r\\n")] {
        let holder = holder_client.fair_lock(&name);
        let waiter = waiter_client.fair_lock(&name);
        let letters_before = waiter_client.stats().letters;
        let before = (
            command_calls(&mut conn, "psubscribe").await,
            command_calls(&mut conn, "subscribe").await,
            command_calls(&mut conn, "evalsha").await,
        );
        let rounds = 5u64;
        for round in 0..rounds {
            let after = hand_over(&conn, &holder, &waiter).await;
            println!("round {round}: the waiter acquired {after:?} after the release");
        }
        let after = (
            command_calls(&mut conn, "psubscribe").await,
            command_calls(&mut conn, "subscribe").await,
            command_calls(&mut conn, "evalsha").await,
        );
        // Per round: the holder's lock and unlock (which hands the lock to the waiter), the
        // waiter's queueing attempt and its unlock; the first wait alone tries once more after
        // subscribing (and that attempt takes the grant if the release came before it).
        let (psubscribes, subscribes, scripts) =
            (after.0 - before.0, after.1 - before.1, after.2 - before.2);
        let letters = waiter_client.stats().letters - letters_before;
        println!(
            "{rounds} waits: {psubscribes} PSUBSCRIBE, {subscribes} SUBSCRIBE, {scripts} EVALSHA, {letters} grants taken from the message"
        );
        assert_eq!(psubscribes, 1, "one pattern for every wait of the client");
        assert_eq!(subscribes, 0, "no channel subscribed per waiter");
        assert!(
            (rounds * 4..=rounds * 4 + 1).contains(&scripts),
            "an acquire request after a grant, or a second attempt after a later wait: {scripts} scripts"
        );
        assert!(
            letters >= rounds - 1,
            "only {letters} of {rounds} hand-offs were taken from the message"
        );
    }
    // Nobody waits: the pattern goes once the linger has passed.
    let gone = eventually(Duration::from_secs(5), || {
        let mut conn = conn.clone();
        async move {
            let patterns: i64 = keylatch::redis::cmd("PUBSUB")
                .arg("NUMPAT")
                .query_async(&mut conn)
                .await
                .unwrap();
            patterns == 0
        }
    })
    .await;
    assert!(gone, "the pattern outlived the linger");
}

/// A server that refuses patterns (here `PSUBSCRIBE` is renamed away; an ACL user whose
/// channel rules do not name the pattern is refused the same way): fair waiters fall back to
/// their own channels and are still woken by their messages, not by the 60 s poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_patterns_waiters_use_their_own_channels() {
    let server = keylatch_testkit::RedisServer::builder()
        .config_line("rename-command PSUBSCRIBE \"\"")
        .start()
        .unwrap();
    let holder_client = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let waiter_client = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let name = unique("fair-no-pattern");
    let holder = holder_client.fair_lock(&name);
    let waiter = waiter_client.fair_lock(&name);
    let conn = raw(&server).await;
    for round in 0..3 {
        let after = hand_over(&conn, &holder, &waiter).await;
        println!("round {round} without patterns: acquired {after:?} after the release");
    }
    assert!(!waiter_client.stats().hub_patterns);
}

/// Each pattern costs the server a little on every publish, so a client holds at most
/// `Config::pubsub_patterns` of them: with a budget of 1, waiters on a second fair lock take
/// their own channels, and every waiter is still woken by its message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_holds_no_more_patterns_than_its_budget() {
    let server = server();
    let holder_client = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let waiter_client = keylatch::Client::connect_with(
        keylatch::Config::builder()
            .url(server.url())
            .fallback_poll(SLOW_POLL)
            .pubsub_patterns(1)
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    let names = [unique("fair-budget-a"), unique("fair-budget-b")];
    let mut held = Vec::new();
    let mut waiting = Vec::new();
    for name in &names {
        held.push(holder_client.fair_lock(name).lock().await.unwrap());
        let waiter = waiter_client.fair_lock(name);
        waiting.push(tokio::spawn(async move {
            waiter.lock().await.unwrap().unlock().await.unwrap();
        }));
        let queued = eventually(Duration::from_secs(5), || async {
            holder_client.fair_lock(name).queue().await.unwrap().len() == 1
        })
        .await;
        assert!(queued, "{name}: the waiter did not queue");
    }
    let mut conn = raw(&server).await;
    let patterns: i64 = keylatch::redis::cmd("PUBSUB")
        .arg("NUMPAT")
        .query_async(&mut conn)
        .await
        .unwrap();
    let channels: Vec<String> = keylatch::redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg("redisson_lock__channel:*")
        .query_async(&mut conn)
        .await
        .unwrap();
    println!("budget 1, two fair locks waited on: {patterns} pattern, channels {channels:?}");
    assert_eq!(patterns, 1, "one pattern, the budget");
    assert_eq!(
        channels.len(),
        1,
        "the second lock's waiter on its own channel"
    );
    for guard in held {
        guard.unlock().await.unwrap();
    }
    for wait in waiting {
        tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .expect("woken by its message, not by the 60 s poll")
            .unwrap();
    }
}
