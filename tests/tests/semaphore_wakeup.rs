//! Semaphore waiters are woken by the release's pub/sub message, survive the hub's connection
//! being killed, and, when no message comes at all, by the fallback poll.
use std::time::Duration;

use keylatch::redis::{self, AsyncCommands};
use keylatch_tests::{
    TakeUnguarded, client_with, command_calls, eventually, kill_pubsub_and_await_reconnect, raw,
    server, server_channels, unique,
};

const WATCHDOG: Duration = Duration::from_secs(30);
/// A fallback poll so long that only a message can explain an early wake-up.
const LONG_POLL: Duration = Duration::from_secs(60);
/// Far below the long poll: a wake-up before it was caused by a message.
const PROMPT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn release_wakes_a_waiter_through_pubsub() {
    let server = server();
    let holder = client_with(&server, WATCHDOG, LONG_POLL).await;
    let waiter = client_with(&server, WATCHDOG, LONG_POLL).await;

    // Plain: one permit, taken; the waiter needs it.
    let name = unique("sem-wake");
    holder.semaphore(&name).try_set_permits(1).await.unwrap();
    holder.semaphore(&name).take(1).await.unwrap();
    let semaphore = waiter.semaphore(&name);
    let started = tokio::time::Instant::now();
    let waiting = tokio::spawn(async move { semaphore.take(1).await.map(|()| started.elapsed()) });
    let subscribed = eventually(Duration::from_secs(5), || async {
        waiter.stats().subscribers == 1
    })
    .await;
    assert!(subscribed, "the waiter never subscribed");
    holder.semaphore(&name).release(1).await.unwrap();
    let waited = waiting.await.unwrap().unwrap();
    println!("plain: waiter acquired {waited:?} after it started (poll {LONG_POLL:?})");
    assert!(
        waited < PROMPT,
        "the release did not wake the waiter: {waited:?}"
    );

    // Expirable: the holder's permit has a long lease, so only the release can free it.
    let name = unique("xsem-wake");
    let xholder = holder.permit_expirable_semaphore(&name);
    xholder.try_set_permits(1).await.unwrap();
    let permit = xholder
        .acquire_with_lease(Duration::from_secs(120))
        .await
        .unwrap();
    let xsemaphore = waiter.permit_expirable_semaphore(&name);
    let started = tokio::time::Instant::now();
    let waiting = tokio::spawn(async move {
        xsemaphore
            .acquire()
            .await
            .map(|permit| (permit, started.elapsed()))
    });
    let subscribed = eventually(Duration::from_secs(5), || async {
        waiter.stats().subscribers == 1
    })
    .await;
    assert!(subscribed, "the expirable waiter never subscribed");
    permit.release().await.unwrap();
    let (permit, waited) = waiting.await.unwrap().unwrap();
    println!(
        "expirable: waiter acquired {waited:?} after it started (lease 120 s, poll {LONG_POLL:?})"
    );
    assert!(
        waited < PROMPT,
        "the release did not wake the waiter: {waited:?}"
    );
    permit.release().await.unwrap();
}

#[tokio::test]
async fn waiter_survives_a_killed_pubsub_connection() {
    let server = server();
    let holder = client_with(&server, WATCHDOG, LONG_POLL).await;
    let waiter = client_with(&server, WATCHDOG, LONG_POLL).await;
    let name = unique("sem-kill");
    let xname = unique("xsem-kill");
    holder.semaphore(&name).try_set_permits(1).await.unwrap();
    holder.semaphore(&name).take(1).await.unwrap();
    let xholder = holder.permit_expirable_semaphore(&xname);
    xholder.try_set_permits(1).await.unwrap();
    let permit = xholder
        .acquire_with_lease(Duration::from_secs(120))
        .await
        .unwrap();

    let semaphore = waiter.semaphore(&name);
    let xsemaphore = waiter.permit_expirable_semaphore(&xname);
    let started = tokio::time::Instant::now();
    let plain_waiting =
        tokio::spawn(async move { semaphore.take(1).await.map(|()| started.elapsed()) });
    let expirable_waiting = tokio::spawn(async move {
        xsemaphore
            .acquire()
            .await
            .map(|permit| (permit, started.elapsed()))
    });
    let subscribed = eventually(Duration::from_secs(5), || async {
        waiter.stats().subscribers == 2
    })
    .await;
    assert!(subscribed, "{:?}", waiter.stats());

    let mut conn = raw(&server).await;
    kill_pubsub_and_await_reconnect(&mut conn, &waiter).await;
    let resubscribed = eventually(Duration::from_secs(5), || {
        let mut conn = conn.clone();
        let (name, xname) = (name.clone(), xname.clone());
        async move {
            server_channels(&mut conn, &name).await == 1
                && server_channels(&mut conn, &xname).await == 1
        }
    })
    .await;
    assert!(resubscribed, "the hub did not resubscribe");

    holder.semaphore(&name).release(1).await.unwrap();
    permit.release().await.unwrap();
    let waited = plain_waiting.await.unwrap().unwrap();
    let (permit, xwaited) = expirable_waiting.await.unwrap().unwrap();
    println!(
        "after a killed pub/sub connection: plain waiter in after {waited:?}, expirable after {xwaited:?} (poll {LONG_POLL:?})"
    );
    assert!(
        waited < PROMPT && xwaited < PROMPT,
        "a waiter waited for the poll"
    );
    permit.release().await.unwrap();
}

/// Permits appear without any message (another program raises the count directly, as if the
/// message were lost): the fallback poll still lets the waiter in within its bound.
#[tokio::test]
async fn waiter_acquires_within_the_fallback_poll_when_no_message_comes() {
    let poll = Duration::from_millis(300);
    // The poll has ±20 % jitter; a retry takes a round trip or two.
    let bound = poll * 6 / 5 + Duration::from_secs(1);
    let server = server();
    let waiter = client_with(&server, WATCHDOG, poll).await;
    let name = unique("sem-lost-msg");
    let xname = unique("xsem-lost-msg");
    let xsemaphore = waiter.permit_expirable_semaphore(&xname);
    xsemaphore.try_set_permits(1).await.unwrap();
    let taken = xsemaphore.acquire().await.unwrap().forget();
    let mut conn = raw(&server).await;
    let _: () = conn.set(&name, 0).await.unwrap();

    let semaphore = waiter.semaphore(&name);
    let plain_waiting = tokio::spawn(async move { semaphore.take(2).await });
    let waiting_semaphore = xsemaphore.clone();
    let expirable_waiting = tokio::spawn(async move { waiting_semaphore.acquire().await });
    let subscribed = eventually(Duration::from_secs(5), || async {
        waiter.stats().subscribers == 2
    })
    .await;
    assert!(subscribed, "{:?}", waiter.stats());
    // Wait a poll interval, so the waiters are asleep, then add permits without a message.
    tokio::time::sleep(poll).await;
    let raised = tokio::time::Instant::now();
    let _: () = conn.incr(&name, 2).await.unwrap();
    let _: () = conn.incr(&xname, 1).await.unwrap();
    tokio::time::timeout(bound, plain_waiting)
        .await
        .expect("the plain waiter hung although permits were available")
        .unwrap()
        .unwrap();
    let plain = raised.elapsed();
    let permit = tokio::time::timeout(bound, expirable_waiting)
        .await
        .expect("the expirable waiter hung although a permit was available")
        .unwrap()
        .unwrap();
    println!(
        "no message: the plain waiter got in {plain:?} and the expirable one {:?} after the count was raised (poll {poll:?}, bound {bound:?})",
        raised.elapsed()
    );
    permit.release().await.unwrap();
    xsemaphore.release(&taken).await.unwrap();
}

/// Makes `name` a semaphore of `permits` permits and takes them all through `holder`: the
/// expirable one's permits (leased for 2 minutes, longer than any test) are returned, the plain
/// one's are simply out.
async fn take_all(
    holder: &keylatch::Client,
    name: &str,
    permits: u32,
    expirable: bool,
) -> Vec<keylatch::Permit> {
    let mut held = Vec::new();
    if expirable {
        let semaphore = holder.permit_expirable_semaphore(name);
        semaphore.try_set_permits(permits).await.unwrap();
        for _ in 0..permits {
            held.push(
                semaphore
                    .acquire_with_lease(Duration::from_secs(120))
                    .await
                    .unwrap(),
            );
        }
    } else {
        let semaphore = holder.semaphore(name);
        semaphore.try_set_permits(permits).await.unwrap();
        semaphore.take(permits).await.unwrap();
    }
    held
}

/// How long the test lets needlessly woken waiters run their acquire scripts before it counts
/// them: far longer than a script takes, so a waiter woken for nothing shows in the count.
const SETTLE: Duration = Duration::from_millis(500);

/// Waits until the server has run no script for 200 ms (at most 5 s), so that a count starts
/// after every waiter's own attempts, however loaded the machine.
async fn quiet(conn: &mut redis::aio::MultiplexedConnection) {
    let mut last = command_calls(conn, "evalsha").await;
    for _ in 0..25 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = command_calls(conn, "evalsha").await;
        if now == last {
            return;
        }
        last = now;
    }
}

/// Eight waiters of one client wait on a semaphore with no permit left. A release of one permit
/// wakes one of them, which takes it; the other seven keep sleeping instead of running their
/// acquire script for nothing. Three freed at once (a release of three; for the expirable
/// semaphore, whose permits are released one id per call, three added permits) wake three.
/// Plain and expirable alike.
#[tokio::test]
async fn a_release_wakes_as_many_waiters_as_it_frees_permits() {
    const WAITERS: usize = 8;
    let server = server();
    let holder = client_with(&server, WATCHDOG, LONG_POLL).await;
    let waiter = client_with(&server, WATCHDOG, LONG_POLL).await;
    let mut conn = raw(&server).await;

    for expirable in [false, true] {
        let name = unique(if expirable { "xsem-count" } else { "sem-count" });
        let mut held = take_all(&holder, &name, 1, expirable).await;
        let mut waiting = Vec::new();
        for _ in 0..WAITERS {
            let waiter = waiter.clone();
            let name = name.clone();
            waiting.push(tokio::spawn(async move {
                if expirable {
                    let permit = waiter
                        .permit_expirable_semaphore(&name)
                        .acquire()
                        .await
                        .unwrap();
                    permit.forget();
                } else {
                    waiter.semaphore(&name).take(1).await.unwrap();
                }
            }));
        }
        let subscribed = eventually(Duration::from_secs(5), || async {
            waiter.stats().subscribers == WAITERS
        })
        .await;
        assert!(subscribed, "{:?}", waiter.stats());
        // Let every waiter's first attempts finish before counting.
        quiet(&mut conn).await;

        let mut woken = 0;
        for freed in [1, 3] {
            let before = command_calls(&mut conn, "evalsha").await;
            match (expirable, held.pop()) {
                (true, Some(permit)) => permit.release().await.unwrap(),
                (true, None) => holder
                    .permit_expirable_semaphore(&name)
                    .add_permits(freed as i64)
                    .await
                    .unwrap(),
                (false, _) => holder.semaphore(&name).release(freed as u32).await.unwrap(),
            }
            woken += freed;
            let in_time = eventually(PROMPT, || async {
                waiting.iter().filter(|task| task.is_finished()).count() == woken
            })
            .await;
            assert!(
                in_time,
                "{kind}: {freed} freed permit(s) did not let {freed} more waiter(s) in before the \
                 fallback poll",
                kind = if expirable { "expirable" } else { "plain" }
            );
            tokio::time::sleep(SETTLE).await;
            quiet(&mut conn).await;
            let finished = waiting.iter().filter(|task| task.is_finished()).count();
            let scripts = command_calls(&mut conn, "evalsha").await - before;
            // The release (one script), then one acquire per freed permit; a waiter woken for
            // nothing would add one more, seven of them with a wake-everyone.
            let needless = scripts.saturating_sub(1 + freed as u64);
            println!(
                "{}: {freed} freed, {finished} of {WAITERS} waiters in, {scripts} scripts run \
                 ({needless} beyond the releases and the winning acquires)",
                if expirable { "expirable" } else { "plain" }
            );
            assert_eq!(
                finished, woken,
                "more waiters got in than permits were freed"
            );
            assert!(
                needless <= 1,
                "{needless} acquire scripts ran for nothing: the release woke more waiters than it \
                 freed permits"
            );
        }
        for task in waiting {
            task.abort();
        }
    }
}

/// A waiter for two permits and a waiter for one wait on the same semaphore, the larger one
/// first. One freed permit must reach the waiter for one at once (a counted wake-up spent on
/// the waiter for two would leave it asleep until the fallback poll); two more let the larger
/// one in. Plain and expirable alike.
#[tokio::test]
async fn a_waiter_for_several_permits_does_not_swallow_a_wake_up() {
    let server = server();
    let holder = client_with(&server, WATCHDOG, LONG_POLL).await;
    let waiter = client_with(&server, WATCHDOG, LONG_POLL).await;

    for expirable in [false, true] {
        let kind = if expirable { "expirable" } else { "plain" };
        let name = unique(if expirable { "xsem-mixed" } else { "sem-mixed" });
        let mut held = take_all(&holder, &name, 3, expirable).await;
        let (w, n) = (waiter.clone(), name.clone());
        let large = tokio::spawn(async move {
            if expirable {
                let permits = w
                    .permit_expirable_semaphore(&n)
                    .acquire_many(2, keylatch::AcquireOptions::new())
                    .await
                    .unwrap()
                    .expect("no wait bound");
                permits.len()
            } else {
                w.semaphore(&n).take(2).await.unwrap();
                2
            }
        });
        let subscribed = eventually(Duration::from_secs(5), || async {
            waiter.stats().subscribers == 1
        })
        .await;
        assert!(subscribed, "{:?}", waiter.stats());
        let (w, n) = (waiter.clone(), name.clone());
        let small = tokio::spawn(async move {
            if expirable {
                w.permit_expirable_semaphore(&n)
                    .acquire()
                    .await
                    .unwrap()
                    .forget();
            } else {
                w.semaphore(&n).take(1).await.unwrap();
            }
        });
        let subscribed = eventually(Duration::from_secs(5), || async {
            waiter.stats().subscribers == 2
        })
        .await;
        assert!(subscribed, "{:?}", waiter.stats());
        tokio::time::sleep(SETTLE).await;

        let release = |count: usize, held: &mut Vec<keylatch::Permit>| {
            let holder = holder.clone();
            let name = name.clone();
            let permits: Vec<_> = held.drain(..count.min(held.len())).collect();
            async move {
                if expirable {
                    for permit in permits {
                        permit.release().await.unwrap();
                    }
                } else {
                    holder.semaphore(&name).release(count as u32).await.unwrap();
                }
            }
        };
        release(1, &mut held).await;
        tokio::time::timeout(PROMPT, small)
            .await
            .unwrap_or_else(|_| {
                panic!("{kind}: the waiter for one permit slept through the freed permit")
            })
            .unwrap();
        assert!(!large.is_finished(), "{kind}: two permits taken from one");
        release(2, &mut held).await;
        let got = tokio::time::timeout(PROMPT, large)
            .await
            .unwrap_or_else(|_| {
                panic!("{kind}: the waiter for two slept through two freed permits")
            })
            .unwrap();
        assert_eq!(got, 2);
        println!("{kind}: the waiter for one got in first, then the waiter for two");
    }
}
