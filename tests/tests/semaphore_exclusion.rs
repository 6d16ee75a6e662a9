//! Semaphores cap concurrency: 8 workers on 2 clients with 3 permits are never more than 3
//! inside at once (and more than one is), and many `acquire_many(n)` at once keep the counts
//! exact.
//!
//! Two independent detectors, on keys the semaphores never touch: a counter `INCR`ed on entry
//! and `DECR`ed on exit (the `INCR`'s reply is how many are inside, the maximum is recorded),
//! and three slot keys each holder must claim with `SET NX` (a fourth holder finds none free).
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use keylatch::redis::{self, AsyncCommands};
use keylatch::{DistributedLock, Error};
use keylatch_tests::{TakeUnguarded, client, raw, server, unique};

const WORKERS: usize = 8;
const PERMITS: u32 = 3;
const ITERATIONS: usize = 25;

/// Joins a worker, bounded: a semaphore that leaked permits fails the test instead of hanging.
async fn joined<T>(task: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("a worker was still waiting after 60 s")
        .unwrap()
}

/// Records what the detectors saw.
#[derive(Default)]
struct Detector {
    max_inside: AtomicU64,
    no_free_slot: AtomicU64,
    entries: AtomicU64,
}

impl Detector {
    /// Inside the critical section: enter, claim a slot, yield and sleep, leave.
    async fn inside(
        &self,
        conn: &mut redis::aio::MultiplexedConnection,
        name: &str,
        worker: usize,
    ) {
        let counter = format!("{name}:detector:inside");
        let inside: u64 = conn.incr(&counter, 1).await.unwrap();
        self.max_inside.fetch_max(inside, Ordering::SeqCst);
        self.entries.fetch_add(1, Ordering::SeqCst);
        let mut slot = None;
        for i in 0..PERMITS {
            let key = format!("{name}:detector:slot:{i}");
            let claimed: bool = redis::cmd("SET")
                .arg(&key)
                .arg(worker)
                .arg("NX")
                .query_async::<Option<String>>(conn)
                .await
                .unwrap()
                .is_some();
            if claimed {
                slot = Some(key);
                break;
            }
        }
        if slot.is_none() {
            self.no_free_slot.fetch_add(1, Ordering::SeqCst);
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(2)).await;
        if let Some(key) = slot {
            let _: () = conn.del(&key).await.unwrap();
        }
        let _: i64 = conn.decr(&counter, 1).await.unwrap();
    }

    fn report(&self, what: &str) {
        let max = self.max_inside.load(Ordering::SeqCst);
        let no_slot = self.no_free_slot.load(Ordering::SeqCst);
        let entries = self.entries.load(Ordering::SeqCst);
        println!(
            "{what}: {entries} critical sections, at most {max} inside at once, {no_slot} found no free slot"
        );
        assert_eq!(entries, (WORKERS * ITERATIONS) as u64);
        assert!(
            max <= u64::from(PERMITS),
            "{what}: {max} holders at once with {PERMITS} permits"
        );
        assert_eq!(no_slot, 0, "{what}: a holder found every slot taken");
        assert!(max > 1, "{what}: never more than one holder at once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_semaphore_caps_eight_workers_on_two_clients_at_three() {
    let server = server();
    let clients = [client(&server).await, client(&server).await];
    let name = unique("sem-cap");
    assert!(
        clients[0]
            .semaphore(&name)
            .try_set_permits(PERMITS)
            .await
            .unwrap()
    );
    let detector = Arc::new(Detector::default());
    let mut tasks = Vec::new();
    for worker in 0..WORKERS {
        let semaphore = clients[worker % 2].semaphore(&name);
        let detector = detector.clone();
        let mut conn = raw(&server).await;
        let name = name.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..ITERATIONS {
                // Half the workers use acquire/release, half the guard form.
                if worker % 2 == 0 {
                    semaphore.take(1).await.unwrap();
                    detector.inside(&mut conn, &name, worker).await;
                    semaphore.release(1).await.unwrap();
                } else {
                    let guard = semaphore.as_lock().lock().await.unwrap();
                    detector.inside(&mut conn, &name, worker).await;
                    if i % 2 == 0 {
                        guard.unlock().await.unwrap();
                    } else {
                        drop(guard);
                    }
                }
            }
        }));
    }
    for task in tasks {
        joined(task).await;
    }
    for client in &clients {
        client.wait_idle().await;
    }
    detector.report("plain semaphore");
    let available = clients[0]
        .semaphore(&name)
        .available_permits()
        .await
        .unwrap();
    assert_eq!(
        available,
        u64::from(PERMITS),
        "permits were lost or doubled"
    );
    for client in &clients {
        assert_eq!(client.stats().watchdog.holds, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expirable_semaphore_caps_eight_workers_on_two_clients_at_three() {
    let server = server();
    let clients = [client(&server).await, client(&server).await];
    let name = unique("xsem-cap");
    let semaphore = clients[0].permit_expirable_semaphore(&name);
    assert!(semaphore.try_set_permits(PERMITS).await.unwrap());
    let detector = Arc::new(Detector::default());
    let mut tasks = Vec::new();
    for worker in 0..WORKERS {
        let semaphore = clients[worker % 2].permit_expirable_semaphore(&name);
        let detector = detector.clone();
        let mut conn = raw(&server).await;
        let name = name.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..ITERATIONS {
                match worker % 3 {
                    0 => {
                        let permit = semaphore.acquire().await.unwrap();
                        detector.inside(&mut conn, &name, worker).await;
                        permit.release().await.unwrap();
                    }
                    1 => {
                        let permit = semaphore
                            .acquire_with_lease(Duration::from_secs(30))
                            .await
                            .unwrap();
                        detector.inside(&mut conn, &name, worker).await;
                        if i % 2 == 0 {
                            permit.release().await.unwrap();
                        } else {
                            drop(permit);
                        }
                    }
                    _ => {
                        let guard = semaphore.as_lock().lock().await.unwrap();
                        detector.inside(&mut conn, &name, worker).await;
                        guard.unlock().await.unwrap();
                    }
                }
            }
        }));
    }
    for task in tasks {
        joined(task).await;
    }
    for client in &clients {
        client.wait_idle().await;
    }
    detector.report("expirable semaphore");
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        u64::from(PERMITS)
    );
    assert_eq!(semaphore.acquired_permits().await.unwrap(), 0);
    let mut conn = raw(&server).await;
    let zset: bool = conn.exists(semaphore.timeout_key()).await.unwrap();
    assert!(!zset, "the timeout zset outlived the last permit");
    for client in &clients {
        assert_eq!(client.stats().watchdog.holds, 0);
    }
}

/// Many tasks take several permits at once; an independent counter tracks how many permits
/// are out (`INCRBY n` after acquiring, `DECRBY n` before releasing): it never exceeds the
/// total, and at the end every permit is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_acquire_many_at_once_keep_counts_exact() {
    const TOTAL: u32 = 12;
    const TASKS: usize = 16;
    const ROUNDS: usize = 15;
    let server = server();
    let clients = [client(&server).await, client(&server).await];
    let plain = unique("sem-many");
    let expirable = unique("xsem-many");
    assert!(
        clients[0]
            .semaphore(&plain)
            .try_set_permits(TOTAL)
            .await
            .unwrap()
    );
    assert!(
        clients[0]
            .permit_expirable_semaphore(&expirable)
            .try_set_permits(TOTAL)
            .await
            .unwrap()
    );
    let max_out = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let client = clients[t % 2].clone();
        let (plain, expirable) = (plain.clone(), expirable.clone());
        let max_out = max_out.clone();
        let mut conn = raw(&server).await;
        tasks.push(tokio::spawn(async move {
            let semaphore = client.semaphore(&plain);
            let xsemaphore = client.permit_expirable_semaphore(&expirable);
            let (out, xout) = (format!("{plain}:out"), format!("{expirable}:out"));
            let mut taken = [0u64; 2];
            for round in 0..ROUNDS {
                let n = 2 + ((t + round) % 4) as u32;
                // Plain: acquire_many, or try_acquire (which may fail).
                let got = if round % 3 == 0 {
                    semaphore.try_take(n).await.unwrap()
                } else {
                    semaphore.take(n).await.unwrap();
                    true
                };
                if got {
                    let now_out: u64 = conn.incr(&out, n).await.unwrap();
                    max_out[0].fetch_max(now_out, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    let _: i64 = conn.decr(&out, n).await.unwrap();
                    semaphore.release(n).await.unwrap();
                    taken[0] += u64::from(n);
                }
                // Expirable: several ids at once.
                let permits = xsemaphore
                    .acquire_many(n, keylatch::AcquireOptions::new())
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(permits.len(), n as usize);
                let now_out: u64 = conn.incr(&xout, n).await.unwrap();
                max_out[1].fetch_max(now_out, Ordering::SeqCst);
                tokio::task::yield_now().await;
                let _: i64 = conn.decr(&xout, n).await.unwrap();
                for permit in permits {
                    permit.release().await.unwrap();
                }
                taken[1] += u64::from(n);
            }
            taken
        }));
    }
    let mut taken = [0u64; 2];
    for task in tasks {
        let t = joined(task).await;
        taken[0] += t[0];
        taken[1] += t[1];
    }
    let max_plain = max_out[0].load(Ordering::SeqCst);
    let max_expirable = max_out[1].load(Ordering::SeqCst);
    println!(
        "acquire_many: plain {} permits taken in all, at most {max_plain} out at once; expirable {} taken, at most {max_expirable} out (total {TOTAL})",
        taken[0], taken[1]
    );
    assert!(max_plain <= u64::from(TOTAL) && max_expirable <= u64::from(TOTAL));
    assert!(
        max_plain > 4 && max_expirable > 4,
        "no concurrency exercised"
    );
    let semaphore = clients[0].semaphore(&plain);
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        u64::from(TOTAL)
    );
    let xsemaphore = clients[0].permit_expirable_semaphore(&expirable);
    assert_eq!(
        xsemaphore.available_permits().await.unwrap(),
        u64::from(TOTAL)
    );
    assert_eq!(xsemaphore.acquired_permits().await.unwrap(), 0);
    assert_eq!(xsemaphore.permits().await.unwrap(), Some(u64::from(TOTAL)));
    // Asking for more than the total fails at once, and changes nothing.
    let err = xsemaphore
        .acquire_many(TOTAL + 1, keylatch::AcquireOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidPermits { .. }), "{err:?}");
    assert_eq!(
        xsemaphore.available_permits().await.unwrap(),
        u64::from(TOTAL)
    );
}
