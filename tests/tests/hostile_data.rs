//! Hostile or damaged data: each key of each primitive is corrupted in turn (wrong type,
//! garbage, negative, huge), and every call on it either works or is refused with a typed
//! error that leaves the keyspace as it was.
use std::time::Duration;

use keylatch::redis::{self, AsyncCommands};
use keylatch::{AcquireOptions, Error};
use keylatch_tests::{client, keyspace, raw, server, unique};

/// How a key is damaged.
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// A list where something else belongs.
    List,
    /// A string of garbage.
    Garbage,
    /// A negative count.
    Negative,
    /// A count far beyond any limit.
    Huge,
    /// A hash whose fields hold garbage.
    HashGarbage,
    /// A zset with garbage members.
    ZsetGarbage,
}

const DAMAGES: [Damage; 6] = [
    Damage::List,
    Damage::Garbage,
    Damage::Negative,
    Damage::Huge,
    Damage::HashGarbage,
    Damage::ZsetGarbage,
];

async fn damage(conn: &mut redis::aio::MultiplexedConnection, key: &str, how: Damage) {
    let _: () = conn.del(key).await.unwrap();
    match how {
        Damage::List => conn.rpush::<_, _, ()>(key, "junk").await.unwrap(),
        Damage::Garbage => conn
            .set::<_, _, ()>(key, "\u{0}garbage\u{ff}")
            .await
            .unwrap(),
        Damage::Negative => conn.set::<_, _, ()>(key, "-5").await.unwrap(),
        Damage::Huge => conn
            .set::<_, _, ()>(key, "99999999999999999999999")
            .await
            .unwrap(),
        Damage::HashGarbage => conn
            .hset_multiple::<_, _, _, ()>(key, &[("mode", "sideways"), ("x:1", "many")])
            .await
            .unwrap(),
        Damage::ZsetGarbage => conn.zadd::<_, _, _, ()>(key, "\u{1}", 1).await.unwrap(),
    }
    // Damage that expires, so a lock waiting on it does not wait forever.
    let _: () = conn.pexpire(key, 60_000).await.unwrap();
}

/// Runs `call` on damaged data: a typed refusal must leave the keyspace untouched. Returns
/// (worked, refused, what went wrong).
async fn check<T>(
    conn: &mut redis::aio::MultiplexedConnection,
    what: &str,
    call: impl Future<Output = keylatch::Result<T>>,
) -> (u32, u32, Option<String>) {
    let before = keyspace(conn).await;
    match tokio::time::timeout(Duration::from_secs(5), call).await {
        Ok(Ok(_)) => (1, 0, None),
        Ok(Err(err)) => {
            let typed = matches!(
                err,
                Error::WrongType { .. }
                    | Error::UnexpectedReply { .. }
                    | Error::NoTtl { .. }
                    | Error::InvalidPermits { .. }
            );
            if !typed {
                return (0, 1, Some(format!("{what}: not a typed refusal: {err:?}")));
            }
            if keyspace(conn).await != before {
                return (0, 1, Some(format!("{what}: refused ({err}) but wrote")));
            }
            (0, 1, None)
        }
        Err(_) => (0, 0, Some(format!("{what}: hung on damaged data"))),
    }
}

#[tokio::test]
async fn damaged_keys_get_typed_errors_and_no_write() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let once = AcquireOptions::new().with_wait(Duration::ZERO);
    let (mut worked, mut refused) = (0, 0);
    let mut problems: Vec<String> = Vec::new();
    for how in DAMAGES {
        let n = unique("hostile");
        let lock_keys = [n.clone(), format!("redisson_lock_token:{{{n}}}")];
        let fair_keys = [
            n.clone(),
            format!("redisson_lock_queue:{{{n}}}"),
            format!("redisson_lock_timeout:{{{n}}}"),
            format!("{{{n}}}:keylatch_waiters"),
        ];
        let rw_keys = [n.clone(), format!("{{{n}}}:write_intent")];
        let sem_keys = [n.clone()];
        let exp_keys = [n.clone(), format!("{{{n}}}:timeout")];
        let mut tally = |r: (u32, u32, Option<String>)| {
            worked += r.0;
            refused += r.1;
            problems.extend(r.2);
        };
        for key in &lock_keys {
            damage(&mut conn, key, how).await;
            let lock = client.lock(&n).with_fencing(true);
            tally(
                check(&mut conn, &format!("lock {key} {how:?}"), async {
                    let guard = lock.acquire(once).await?;
                    if let Some(guard) = guard {
                        guard.unlock().await?;
                    }
                    Ok(())
                })
                .await,
            );
            tally(
                check(
                    &mut conn,
                    &format!("lock force {key} {how:?}"),
                    lock.force_unlock(),
                )
                .await,
            );
            let _: () = conn.del(key).await.unwrap();
        }
        for key in &fair_keys {
            damage(&mut conn, key, how).await;
            let fair = client.fair_lock(&n);
            tally(
                check(&mut conn, &format!("fair {key} {how:?}"), async {
                    if let Some(guard) = fair.try_lock_for(Duration::from_millis(50), None).await? {
                        guard.unlock().await?;
                    }
                    Ok(())
                })
                .await,
            );
            tally(
                check(
                    &mut conn,
                    &format!("fair queue {key} {how:?}"),
                    fair.queue(),
                )
                .await,
            );
            let _: () = conn.del(key).await.unwrap();
        }
        for key in &rw_keys {
            damage(&mut conn, key, how).await;
            let rw = client.rw_lock(&n);
            tally(
                check(&mut conn, &format!("read {key} {how:?}"), async {
                    if let Some(guard) = rw.try_read().await? {
                        guard.unlock().await?;
                    }
                    Ok(())
                })
                .await,
            );
            tally(
                check(&mut conn, &format!("write {key} {how:?}"), async {
                    if let Some(guard) = rw
                        .write_lock()
                        .try_lock_for(Duration::from_millis(50), None)
                        .await?
                    {
                        guard.unlock().await?;
                    }
                    Ok(())
                })
                .await,
            );
            let _: () = conn.del(key).await.unwrap();
        }
        for key in &sem_keys {
            damage(&mut conn, key, how).await;
            let semaphore = client.semaphore(&n);
            tally(
                check(&mut conn, &format!("sem {key} {how:?}"), async {
                    if let Some(permit) = semaphore.try_acquire().await? {
                        permit.release().await?;
                    }
                    Ok(())
                })
                .await,
            );
            tally(
                check(
                    &mut conn,
                    &format!("sem add {key} {how:?}"),
                    semaphore.add_permits(1),
                )
                .await,
            );
            tally(
                check(
                    &mut conn,
                    &format!("sem count {key} {how:?}"),
                    semaphore.available_permits(),
                )
                .await,
            );
            let _: () = conn.del(key).await.unwrap();
        }
        for key in &exp_keys {
            damage(&mut conn, key, how).await;
            let expirable = client.permit_expirable_semaphore(&n);
            tally(
                check(&mut conn, &format!("exp {key} {how:?}"), async {
                    if let Some(permit) = expirable.try_acquire().await? {
                        permit.release().await?;
                    }
                    Ok(())
                })
                .await,
            );
            tally(
                check(
                    &mut conn,
                    &format!("exp count {key} {how:?}"),
                    expirable.available_permits(),
                )
                .await,
            );
            let _: () = conn.del(key).await.unwrap();
        }
    }
    client.wait_idle().await;
    println!("damaged data: {worked} calls worked, {refused} refused with a typed error");
    for problem in &problems {
        println!("  {problem}");
    }
    assert!(
        problems.is_empty(),
        "{} calls mishandled damaged data",
        problems.len()
    );
    assert!(refused > 0);
}
