//! `keylatch queue transfer`: a transfer agent that moves due elements of delayed queues to
//! their lists, as Redisson's transfer task does, for deployments whose consumers are Java
//! clients reading the list (keylatch's own takes need no agent). Imports `failure` and `run`.
//!
//! It never stalls silently. Each queue has a loop that scans (one transfer script call),
//! then sleeps until the next due time by the server's clock, a message on the queue's
//! channel, a re-scan order, or `--max-sleep`, whichever comes first. A monitor watches the
//! client's pub/sub connection: each time it is re-established (the hub re-subscribes every
//! channel), the monitor orders every loop to re-scan and prints a recovery line. A scan that
//! fails is logged and retried with back-off; the first scan that works again is a recovery
//! too. Either way the loop goes on, and `--max-sleep` bounds every sleep.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use keylatch::Client;
use keylatch::queue::{Bytes, DelayedQueue, MOVE_BATCH};
use keylatch_redis::{PubSubHub, Subscription, WakeMode};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::failure::{EX_USAGE, Failure};

/// How often the monitor looks at the pub/sub connection.
const MONITOR_EVERY: Duration = Duration::from_millis(100);
/// How often a pub/sub connection that stays down is reported.
const DOWN_REPORT_EVERY: Duration = Duration::from_secs(5);
/// The first pause after a failed scan (doubled up to `--max-sleep`, 2 s at most).
const FIRST_BACKOFF: Duration = Duration::from_millis(50);

#[derive(Debug, Default)]
struct Stats {
    moved: AtomicU64,
    recoveries: AtomicU64,
}

impl Stats {
    /// Counts one recovery and prints its line; returns its number.
    fn recovered(&self, what: std::fmt::Arguments<'_>) -> u64 {
        let n = self.recoveries.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::warn!(target: "keylatch::queue", recovery = n, "{what}");
        println!("recovery {n}: {what}");
        n
    }
}

/// Runs the agent over `names` until SIGINT or SIGTERM; exit code 0 then.
pub async fn transfer(
    client: &Client,
    names: &[String],
    max_sleep: Duration,
) -> Result<u8, Failure> {
    let redis = client
        .as_redis()
        .ok_or_else(|| Failure::new(EX_USAGE, "the delayed queue needs Redis"))?;
    if max_sleep.is_zero() {
        return Err(Failure::new(EX_USAGE, "--max-sleep must be more than 0"));
    }
    let mut queues = Vec::with_capacity(names.len());
    for name in names {
        let queue = client.delayed_queue::<Bytes>(name)?;
        redis.validate_name(queue.name())?;
        queues.push(queue);
    }
    let stats = Arc::new(Stats::default());
    let (rescan, orders) = watch::channel(0u64);
    let hub = redis.hub().clone();
    let mut loops = tokio::task::JoinSet::new();
    for queue in queues {
        let subscription = subscribe(&hub, &queue).await;
        loops.spawn(scan_loop(
            hub.clone(),
            queue,
            subscription,
            max_sleep,
            stats.clone(),
            orders.clone(),
        ));
    }
    println!(
        "transfer agent: {} queue(s) ({}), sleeping at most {}",
        names.len(),
        names.join(", "),
        humantime::format_duration(max_sleep)
    );
    let code = tokio::select! {
        () = monitor(&hub, &stats, &rescan, max_sleep) => 0,
        _ = crate::run::interruption() => 0,
    };
    loops.shutdown().await;
    println!(
        "transfer agent: stopped; moved {} element(s), {} recovery(ies)",
        stats.moved.load(Ordering::Relaxed),
        stats.recoveries.load(Ordering::Relaxed)
    );
    Ok(code)
}

/// The queue's channel subscription, or `None` (logged) when the server refused it: the loop
/// then scans every `--max-sleep` and tries again.
async fn subscribe(hub: &PubSubHub, queue: &DelayedQueue<Bytes>) -> Option<Subscription> {
    match hub
        .subscribe(queue.channel(), WakeMode::All, Duration::from_secs(2))
        .await
    {
        Ok(subscription) => Some(subscription),
        Err(err) => {
            tracing::warn!(target: "keylatch::queue", queue = queue.name(), error = %err, "cannot subscribe");
            eprintln!(
                "keylatch: queue {:?}: cannot subscribe to {}: {err}; scanning every --max-sleep",
                queue.name(),
                queue.channel()
            );
            None
        }
    }
}

/// Watches the pub/sub connection: orders a re-scan and prints a recovery line each time it
/// was re-established, and reports it while it stays down. Never returns.
async fn monitor(hub: &PubSubHub, stats: &Stats, rescan: &watch::Sender<u64>, max_sleep: Duration) {
    let mut seen = hub.reconnects();
    let mut down_since: Option<Instant> = None;
    let mut reported = Instant::now();
    loop {
        tokio::time::sleep(MONITOR_EVERY).await;
        let reconnects = hub.reconnects();
        if reconnects != seen {
            seen = reconnects;
            rescan.send_modify(|n| *n += 1);
            stats.recovered(format_args!(
                "pub/sub connection re-established ({reconnects} since start): channels \
                 re-subscribed, every queue re-scanned"
            ));
        }
        if hub.is_connected() {
            down_since = None;
            continue;
        }
        let since = *down_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= DOWN_REPORT_EVERY && reported.elapsed() >= DOWN_REPORT_EVERY {
            reported = Instant::now();
            let down = humantime::format_duration(Duration::from_millis(
                u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX),
            ));
            tracing::warn!(target: "keylatch::queue", %down, "pub/sub connection down");
            eprintln!(
                "keylatch: pub/sub connection down for {down}; scanning every {} meanwhile",
                humantime::format_duration(max_sleep)
            );
        }
    }
}

/// One queue's loop: scan, then sleep until the next due time, a message, a re-scan order or
/// `max_sleep`. Never returns.
async fn scan_loop(
    hub: PubSubHub,
    queue: DelayedQueue<Bytes>,
    mut subscription: Option<Subscription>,
    max_sleep: Duration,
    stats: Arc<Stats>,
    mut orders: watch::Receiver<u64>,
) {
    let name = queue.name().to_owned();
    let mut failures = 0u32;
    let mut backoff = FIRST_BACKOFF;
    loop {
        if subscription.is_none() {
            subscription = subscribe(&hub, &queue).await;
        }
        orders.borrow_and_update();
        // Armed before the scan: a message published during it is not missed.
        let notified = subscription.as_ref().map(Subscription::notified);
        let mut notified = std::pin::pin!(notified);
        if let Some(armed) = notified.as_mut().as_pin_mut() {
            armed.enable();
        }
        let pause = match queue.transfer().await {
            Ok(done) => {
                if failures > 0 {
                    stats.recovered(format_args!(
                        "queue {name:?}: scans work again after {failures} failed; re-scanned, \
                         {} moved",
                        done.moved
                    ));
                    failures = 0;
                    backoff = FIRST_BACKOFF;
                }
                if done.moved > 0 {
                    stats.moved.fetch_add(done.moved, Ordering::Relaxed);
                    tracing::debug!(target: "keylatch::queue", queue = %name, moved = done.moved, "moved due elements");
                }
                if done.moved >= u64::from(MOVE_BATCH) {
                    // More may be due: scan again at once.
                    continue;
                }
                done.next_in.map_or(max_sleep, |next| {
                    next.clamp(Duration::from_millis(1), max_sleep)
                })
            }
            Err(err) => {
                failures += 1;
                let pause = backoff;
                backoff = (backoff * 2).min(max_sleep).min(Duration::from_secs(2));
                tracing::warn!(target: "keylatch::queue", queue = %name, failures, error = %err, "scan failed");
                eprintln!(
                    "keylatch: queue {name:?}: scan failed ({failures} in a row): {err}; again in {}",
                    humantime::format_duration(pause)
                );
                pause
            }
        };
        let message = async {
            match notified.as_mut().as_pin_mut() {
                Some(armed) => armed.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = message => {}
            () = tokio::time::sleep(pause) => {}
            _ = orders.changed() => {}
        }
    }
}
