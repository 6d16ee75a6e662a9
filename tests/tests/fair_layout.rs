//! The fair lock writes Redisson's layout: the hash, the queue list, the deadline zset (server
//! clock), one wake-up channel per waiter with message `0`; `try_lock` never queues;
//! reentrancy, fencing and `force_unlock` work as on the reentrant lock.
use std::time::Duration;

use futures_util::StreamExt;
use keylatch::redis::AsyncCommands;
use keylatch::{Error, FairLock, LockGuard, Owner};
use keylatch_tests::{
    client, client_with, eventually, fair_waiter, pubsub, queue_ids, raw, server, server_ms, unique,
};
use tokio::task::JoinHandle;

const SLOW_POLL: Duration = Duration::from_secs(60);

fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

fn timeout_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

fn waiters_key(name: &str) -> String {
    format!("{{{name}}}:keylatch_waiters")
}

fn spawn_lock(lock: &FairLock) -> JoinHandle<keylatch::Result<LockGuard>> {
    let lock = lock.clone();
    tokio::spawn(async move { lock.lock().await })
}

async fn wait_for_queue(lock: &FairLock, ids: &[&str]) {
    let ok = eventually(Duration::from_secs(5), || async {
        queue_ids(lock).await == ids
    })
    .await;
    assert!(ok, "queue {:?}, expected {ids:?}", queue_ids(lock).await);
}

#[tokio::test]
async fn queue_zset_channels_and_messages_match_redisson() {
    let server = server();
    let holder_client = client(&server).await;
    let waiters = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let name = unique("fair-layout");
    let mut conn = raw(&server).await;
    let mut pubsub = pubsub(&server).await;
    pubsub
        .psubscribe(format!("redisson_lock__channel:{{{name}}}*"))
        .await
        .unwrap();

    let holder = holder_client
        .fair_lock(&name)
        .lock_with_lease(Duration::from_secs(20))
        .await
        .unwrap();
    let fields: Vec<(String, String)> = conn.hgetall(&name).await.unwrap();
    assert_eq!(
        fields,
        vec![(holder.owner_id().to_string(), "1".to_owned())]
    );
    let pttl: i64 = conn.pttl(&name).await.unwrap();
    assert!((19_000..=20_000).contains(&pttl), "pttl {pttl}");

    let timeout = Duration::from_secs(2);
    let (first, first_id) = fair_waiter(&waiters, &name, timeout);
    let (second, second_id) = fair_waiter(&waiters, &name, timeout);
    let first_wait = spawn_lock(&first);
    wait_for_queue(&first, &[&first_id]).await;
    let second_wait = spawn_lock(&second);
    wait_for_queue(&first, &[&first_id, &second_id]).await;

    let listed: Vec<String> = conn.lrange(queue_key(&name), 0, -1).await.unwrap();
    assert_eq!(listed, vec![first_id.clone(), second_id.clone()]);
    let now = server_ms(&mut conn).await;
    for id in [&first_id, &second_id] {
        // The liveness deadline is keylatch's own; Redisson's zset gets the deadline plus the
        // slack Redisson's scripts see (60 s, no Redisson waiter ahead).
        let deadline: f64 = conn.zscore(waiters_key(&name), id).await.unwrap();
        let left = deadline as i64 - now;
        assert!(
            (1_000..=2_000).contains(&left),
            "deadline {left} ms ahead of the server clock"
        );
        let score: f64 = conn.zscore(timeout_key(&name), id).await.unwrap();
        assert_eq!(score - deadline, 60_000.0, "Redisson's score of {id}");
    }
    // Redisson's keys never expire (a Redisson waiter's place would go with them); keylatch's
    // deadline zset outlives its latest deadline by the slack.
    for key in [queue_key(&name), timeout_key(&name)] {
        let ttl: i64 = conn.pttl(&key).await.unwrap();
        assert_eq!(ttl, -1, "{key}: pttl {ttl}");
    }
    let ttl: i64 = conn.pttl(waiters_key(&name)).await.unwrap();
    assert!((60_000..=62_000).contains(&ttl), "pttl {ttl}");
    let listed = first.queue().await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(
        listed
            .iter()
            .all(|w| w.expires_in <= timeout && !w.expires_in.is_zero())
    );

    // The release wakes the head, on its own channel, with `0`.
    holder.unlock().await.unwrap();
    let mut messages = pubsub.on_message();
    let msg = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("a wake-up message")
        .unwrap();
    assert_eq!(
        msg.get_channel_name(),
        format!("redisson_lock__channel:{{{name}}}:{first_id}")
    );
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    let guard = first_wait.await.unwrap().unwrap();
    assert_eq!(guard.owner_id().to_string(), first_id);
    let listed: Vec<String> = conn.lrange(queue_key(&name), 0, -1).await.unwrap();
    assert_eq!(
        listed,
        vec![second_id.clone()],
        "the new holder left the queue"
    );
    // Watchdog mode: the hash's TTL is the watchdog timeout.
    let pttl: i64 = conn.pttl(&name).await.unwrap();
    assert!((29_000..=30_000).contains(&pttl), "pttl {pttl}");

    guard.unlock().await.unwrap();
    let msg = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("a wake-up message")
        .unwrap();
    assert_eq!(
        msg.get_channel_name(),
        format!("redisson_lock__channel:{{{name}}}:{second_id}")
    );
    second_wait.await.unwrap().unwrap().unlock().await.unwrap();
    // The last release has no one to wake, and nothing is left.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), messages.next())
            .await
            .is_err(),
        "a message with nobody queued"
    );
    for key in [
        name.clone(),
        queue_key(&name),
        timeout_key(&name),
        waiters_key(&name),
    ] {
        let exists: bool = conn.exists(&key).await.unwrap();
        assert!(!exists, "{key} left behind");
    }
}

#[tokio::test]
async fn try_lock_never_queues_and_never_overtakes() {
    let server = server();
    let client = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let name = unique("fair-try");
    let mut conn = raw(&server).await;
    let (holder_lock, _) = fair_waiter(&client, &name, Duration::from_secs(5));
    let holder = holder_lock
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    let (other, _) = fair_waiter(&client, &name, Duration::from_secs(5));
    for _ in 0..20 {
        assert!(other.try_lock().await.unwrap().is_none());
    }
    let exists: bool = conn.exists(queue_key(&name)).await.unwrap();
    assert!(!exists, "try_lock queued");
    assert_eq!(client.stats().watchdog.holds, 1, "only the holder");

    // The lock free but someone queued: a newcomer's try_lock does not barge in.
    let (queued, queued_id) = fair_waiter(&client, &name, Duration::from_secs(5));
    let waiting = spawn_lock(&queued);
    wait_for_queue(&queued, &[&queued_id]).await;
    // Free the lock without waking anyone (as if the lease ran out).
    let _: () = conn.del(&name).await.unwrap();
    drop(holder);
    client.wait_idle().await;
    assert!(
        other.try_lock().await.unwrap().is_none(),
        "overtook the queue"
    );
    assert_eq!(queue_ids(&queued).await, vec![queued_id.clone()]);
    // The head takes it (its wait is bounded by the holder's lease or the fallback poll; a
    // nudge through force_unlock wakes it now).
    assert!(!queued.force_unlock().await.unwrap());
    let guard = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the head was woken")
        .unwrap()
        .unwrap();
    guard.unlock().await.unwrap();
    let guard = other
        .try_lock()
        .await
        .unwrap()
        .expect("free and nobody queued");
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn reentrancy_fencing_and_force_unlock() {
    let server = server();
    let client = client(&server).await;
    let other = client_with(&server, Duration::from_secs(30), SLOW_POLL).await;
    let name = unique("fair-reentrant");
    let mut conn = raw(&server).await;
    let lock = client
        .fair_lock(&name)
        .with_owner(Owner::unique())
        .with_fencing(true);
    let g1 = lock.lock().await.unwrap();
    let g2 = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    assert!(lock.is_held_by_current_owner().await.unwrap());
    assert!(g2.fencing_token().unwrap() > g1.fencing_token().unwrap());
    let last_token = g2.fencing_token().unwrap();
    let exists: bool = conn.exists(queue_key(&name)).await.unwrap();
    assert!(!exists, "a re-entry queued");
    g2.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert!(lock.remaining_ttl().await.unwrap().is_some());

    // Someone queues; force_unlock frees the lock and wakes them.
    let (waiting_lock, waiting_id) = fair_waiter(&other, &name, Duration::from_secs(5));
    let waiting = spawn_lock(&waiting_lock);
    wait_for_queue(&lock, &[&waiting_id]).await;
    assert!(lock.force_unlock().await.unwrap());
    let guard = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("force_unlock woke the head")
        .unwrap()
        .unwrap();
    assert!(matches!(g1.unlock().await, Err(Error::NotHeld { .. })));
    assert!(lock.is_locked().await.unwrap());
    assert!(!lock.is_held_by_current_owner().await.unwrap());
    guard.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.remaining_ttl().await.unwrap(), None);
    assert!(!lock.force_unlock().await.unwrap());
    let token: u64 = conn
        .get(format!("redisson_lock_token:{{{name}}}"))
        .await
        .unwrap();
    assert_eq!(token, last_token, "the counter holds the last token issued");
}
