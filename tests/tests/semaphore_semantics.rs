//! The semaphores' layout (Redisson's keys, values and messages) and behaviour: setting and
//! changing counts, permits not owned by anyone (plain), leases, the watchdog, lease updates,
//! releases by id and the guard forms (permit-expirable).
use std::time::Duration;

use futures_util::StreamExt;
use keylatch::redis::{self, AsyncCommands};
use keylatch::{DistributedLock, Error};
use keylatch_tests::redisson::hex_bytes;
use keylatch_tests::{TakeUnguarded, client, client_with, pubsub, raw, server, server_ms, unique};

async fn next_message(
    messages: &mut (impl futures_util::Stream<Item = redis::Msg> + Unpin),
) -> (String, String) {
    let msg = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("a message arrives")
        .unwrap();
    (
        msg.get_channel_name().to_owned(),
        msg.get_payload::<String>().unwrap(),
    )
}

#[tokio::test]
async fn plain_layout_and_messages_are_redissons() {
    let server = server();
    let client = client(&server).await;
    let name = unique("sem-layout");
    let channel = format!("redisson_sc:{{{name}}}");
    let mut conn = raw(&server).await;
    let mut pubsub = pubsub(&server).await;
    pubsub.subscribe(&channel).await.unwrap();
    let mut messages = pubsub.on_message();
    let semaphore = client.semaphore(&name);
    assert_eq!(semaphore.channel(), channel);

    assert!(semaphore.try_set_permits(5).await.unwrap());
    assert!(
        !semaphore.try_set_permits(9).await.unwrap(),
        "set only when absent"
    );
    let count: String = conn.get(&name).await.unwrap();
    assert_eq!(count, "5");
    let pttl: i64 = conn.pttl(&name).await.unwrap();
    assert_eq!(pttl, -1, "the permit count has no TTL");
    assert_eq!(
        next_message(&mut messages).await,
        (channel.clone(), "5".into())
    );

    semaphore.take(2).await.unwrap();
    assert_eq!(conn.get::<_, String>(&name).await.unwrap(), "3");
    semaphore.release(1).await.unwrap();
    assert_eq!(
        next_message(&mut messages).await,
        (channel.clone(), "4".into())
    );
    semaphore.add_permits(3).await.unwrap();
    assert_eq!(
        next_message(&mut messages).await,
        (channel.clone(), "7".into())
    );
    semaphore.add_permits(-2).await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 5);
    assert_eq!(semaphore.drain_permits().await.unwrap(), 5);
    assert_eq!(conn.get::<_, String>(&name).await.unwrap(), "0");
    assert!(!semaphore.try_take(1).await.unwrap());

    // Request markers: `{name}:req:<32 hex>`, each with a TTL of the request window (a
    // release's: an hour, deleted once its reply is seen).
    let markers: Vec<String> = conn.keys(format!("{{{name}}}:req:*")).await.unwrap();
    assert!(!markers.is_empty());
    for marker in &markers {
        let id = marker.rsplit(':').next().unwrap();
        assert_eq!(id.len(), 32, "{marker}");
        let pttl: i64 = conn.pttl(marker).await.unwrap();
        assert!((1..=3_600_000).contains(&pttl), "{marker}: pttl {pttl}");
    }
    // Settled markers are deleted by later calls through the same handle, in batches once 8
    // have gathered: they never pile up.
    for _ in 0..50 {
        semaphore.release(1).await.unwrap();
        semaphore.take(1).await.unwrap();
    }
    let markers: Vec<String> = conn.keys(format!("{{{name}}}:req:*")).await.unwrap();
    println!(
        "100 calls through one handle leave {} markers",
        markers.len()
    );
    assert!(markers.len() <= 10, "{} markers pile up", markers.len());
    // A release's marker lives an hour, so it is deleted soon after its reply is seen.
    let releases_settled = keylatch_tests::eventually(Duration::from_secs(5), || async {
        let mut conn = raw(&server).await;
        let markers: Vec<String> = conn.keys(format!("{{{name}}}:req:*")).await.unwrap();
        let mut long_lived = 0;
        for marker in &markers {
            let pttl: i64 = conn.pttl(marker).await.unwrap();
            if pttl > 30_000 {
                long_lived += 1;
            }
        }
        long_lived == 0
    })
    .await;
    assert!(releases_settled, "a release's marker was left for its hour");

    // A count written by someone else (Redisson's `trySetPermits`) is used as is.
    let _: () = conn.set(&name, 2).await.unwrap();
    assert!(semaphore.try_take(2).await.unwrap());
    assert_eq!(conn.get::<_, String>(&name).await.unwrap(), "0");
}

#[tokio::test]
async fn expirable_layout_is_redissons() {
    let server = server();
    let client = client_with(&server, Duration::from_secs(9), Duration::from_secs(2)).await;
    let name = unique("xsem-layout");
    let mut conn = raw(&server).await;
    let semaphore = client.permit_expirable_semaphore(&name);
    assert_eq!(semaphore.timeout_key(), format!("{{{name}}}:timeout"));
    assert_eq!(semaphore.total_key(), format!("{{{name}}}:permits"));
    assert_eq!(semaphore.channel(), format!("redisson_sc:{{{name}}}"));
    let mut pubsub = pubsub(&server).await;
    pubsub.subscribe(semaphore.channel()).await.unwrap();
    let mut messages = pubsub.on_message();

    assert!(semaphore.try_set_permits(3).await.unwrap());
    assert!(!semaphore.try_set_permits(3).await.unwrap());
    assert_eq!(next_message(&mut messages).await.1, "3");
    assert_eq!(conn.get::<_, String>(&name).await.unwrap(), "3");
    assert_eq!(conn.pttl::<_, i64>(&name).await.unwrap(), -1, "no ttl");
    // The total is available + held, as Redisson counts it: no key of its own.
    let total_key: bool = conn.exists(semaphore.total_key()).await.unwrap();
    assert!(!total_key, "a total key was written");

    let before = server_ms(&mut conn).await;
    let leased = semaphore
        .acquire_with_lease(Duration::from_secs(10))
        .await
        .unwrap();
    let watched = semaphore.acquire().await.unwrap();
    let after = server_ms(&mut conn).await;
    assert_eq!(leased.id().len(), 32);
    assert!(leased.id().chars().all(|c| c.is_ascii_hexdigit()));
    // Each id as Redisson stores it: the 16 bytes its hex form stands for.
    let members: Vec<(Vec<u8>, f64)> = conn
        .zrange_withscores(semaphore.timeout_key(), 0, -1)
        .await
        .unwrap();
    assert_eq!(members.len(), 2, "{members:?}");
    let score = |id: &str| {
        let raw = hex_bytes(id);
        assert_eq!(raw.len(), 16);
        members.iter().find(|(m, _)| *m == raw).unwrap().1 as i64
    };
    assert!((before + 10_000..=after + 10_000).contains(&score(leased.id())));
    assert!((before + 9_000..=after + 9_000).contains(&score(watched.id())));
    assert_eq!(conn.get::<_, String>(&name).await.unwrap(), "1");
    assert_eq!(semaphore.acquired_permits().await.unwrap(), 2);
    assert_eq!(semaphore.permits().await.unwrap(), Some(3));

    leased.release().await.unwrap();
    assert_eq!(next_message(&mut messages).await.1, "2");
    watched.release().await.unwrap();
    assert_eq!(next_message(&mut messages).await.1, "3");
    let zset: bool = conn.exists(semaphore.timeout_key()).await.unwrap();
    assert!(!zset, "the zset is gone with its last permit");
    semaphore.add_permits(2).await.unwrap();
    assert_eq!(next_message(&mut messages).await.1, "5");
    assert_eq!(semaphore.permits().await.unwrap(), Some(5));
    semaphore.add_permits(-4).await.unwrap();
    assert_eq!(semaphore.permits().await.unwrap(), Some(1));
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
}

#[tokio::test]
async fn plain_permits_are_not_owned_and_the_guard_form_follows_the_trait() {
    let server = server();
    let a = client(&server).await;
    let b = client(&server).await;
    let name = unique("sem-semantics");
    let semaphore = a.semaphore(&name);
    assert!(
        !semaphore.try_take(1).await.unwrap(),
        "missing means 0 permits"
    );
    assert!(
        !semaphore
            .try_take_for(1, Duration::from_millis(200))
            .await
            .unwrap()
    );
    semaphore.try_set_permits(1).await.unwrap();
    semaphore.take(1).await.unwrap();
    // Another client releases what this one acquired.
    b.semaphore(&name).release(1).await.unwrap();
    assert!(semaphore.try_take(1).await.unwrap());
    b.semaphore(&name).release(1).await.unwrap();

    let lock = semaphore.as_lock();
    assert_eq!(lock.name(), name);
    assert!(!lock.is_locked().await.unwrap());
    let guard = lock.lock().await.unwrap();
    assert!(lock.is_locked().await.unwrap(), "no permit left: locked");
    let refused = lock.force_unlock().await.unwrap_err();
    assert!(
        matches!(
            refused,
            Error::Unsupported {
                operation: "force_unlock",
                ..
            }
        ),
        "{refused}"
    );
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        0,
        "force_unlock changed nothing"
    );
    assert!(lock.try_lock().await.unwrap().is_none());
    assert!(guard.valid_until().is_some() && !guard.is_lost());
    guard.unlock().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);

    // A lease: this process gives the permit back when it ends, and the guard is lost.
    let lease = Duration::from_millis(300);
    let guard = lock.lock_with_lease(lease).await.unwrap();
    tokio::time::timeout(lease + Duration::from_secs(1), guard.lost())
        .await
        .expect("lost fires when the lease ends");
    let back = keylatch_tests::eventually(Duration::from_secs(2), || async {
        semaphore.available_permits().await.unwrap() == 1
    })
    .await;
    assert!(back, "the leased permit was not given back");
    let err = guard.unlock().await.unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "{err:?}");
    a.wait_idle().await;
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        1,
        "given back twice"
    );
    assert_eq!(a.stats().watchdog.holds, 0);
}

#[tokio::test]
async fn expirable_leases_watchdog_updates_and_releases_by_id() {
    let server = server();
    let watchdog = Duration::from_millis(600);
    let a = client_with(&server, watchdog, Duration::from_millis(200)).await;
    let b = client(&server).await;
    let name = unique("xsem-semantics");
    let semaphore = a.permit_expirable_semaphore(&name);
    assert_eq!(semaphore.permits().await.unwrap(), None);
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    semaphore.try_set_permits(2).await.unwrap();

    // A fixed lease ends: the permit is reclaimed, the guard is lost, its release is unknown.
    let lease = Duration::from_millis(300);
    let permit = semaphore.acquire_with_lease(lease).await.unwrap();
    tokio::time::timeout(lease + Duration::from_secs(1), permit.lost())
        .await
        .expect("lost fires when the lease ends");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        2,
        "not reclaimed"
    );
    let id = permit.id().to_owned();
    let err = permit.release().await.unwrap_err();
    assert!(
        matches!(&err, Error::UnknownPermit { id: i, .. } if *i == id),
        "{err:?}"
    );

    // Watchdog mode: renewed past its lease while held.
    let watched = semaphore.acquire().await.unwrap();
    tokio::time::sleep(watchdog * 3).await;
    assert!(!watched.is_lost());
    assert_eq!(
        semaphore.acquired_permits().await.unwrap(),
        1,
        "the watchdog did not renew"
    );
    let renewed = a.stats().watchdog.renewed_keys;
    assert!(renewed >= 3, "{renewed} renewals");
    watched.release().await.unwrap();

    // update_lease: a short lease made long survives its first end.
    let permit = semaphore.acquire_with_lease(lease).await.unwrap();
    semaphore
        .update_lease(permit.id(), Duration::from_secs(30))
        .await
        .unwrap();
    tokio::time::sleep(lease + Duration::from_millis(200)).await;
    assert_eq!(
        semaphore.acquired_permits().await.unwrap(),
        1,
        "update_lease did not extend"
    );

    // Anyone who knows the id may release it; the guard then finds it unknown.
    let id = permit.id().to_owned();
    b.permit_expirable_semaphore(&name)
        .release(&id)
        .await
        .unwrap();
    assert!(
        !b.permit_expirable_semaphore(&name)
            .try_release(&id)
            .await
            .unwrap()
    );
    assert!(matches!(
        semaphore.update_lease(&id, Duration::from_secs(1)).await,
        Err(Error::UnknownPermit { .. })
    ));
    assert!(matches!(
        permit.release().await,
        Err(Error::UnknownPermit { .. })
    ));

    // forget: the permit stays taken, no longer tracked here, until released by id.
    let permit = semaphore
        .acquire_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    let id = permit.forget();
    a.wait_idle().await;
    assert_eq!(semaphore.acquired_permits().await.unwrap(), 1);
    assert_eq!(a.stats().watchdog.holds, 0);
    b.permit_expirable_semaphore(&name)
        .release(&id)
        .await
        .unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);

    // The guard form, with the trait's lease semantics.
    let lock = semaphore.as_lock();
    let g1 = lock.lock().await.unwrap();
    let g2 = lock.lock_with_lease(Duration::from_secs(30)).await.unwrap();
    assert!(lock.is_locked().await.unwrap());
    assert!(lock.try_lock().await.unwrap().is_none());
    let refused = lock.force_unlock().await.unwrap_err();
    assert!(
        matches!(
            refused,
            Error::Unsupported {
                operation: "force_unlock",
                ..
            }
        ),
        "{refused}"
    );
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    g1.unlock().await.unwrap();
    drop(g2);
    a.wait_idle().await;
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    assert_eq!(a.stats().watchdog.holds, 0);
}
