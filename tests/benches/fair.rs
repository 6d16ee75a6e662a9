//! keylatch's fair lock (with and without the direct grant) beside the reentrant lock and raw
//! Redis round trips, measured side by side in one run on one throwaway redis-server. Prints
//! figures and ratios; asserts nothing.
//!
//! ```text
//! cargo bench -p keylatch --bench fair            # full run
//! KEYLATCH_BENCH_QUICK=1 cargo bench -p keylatch --bench fair
//! ```
//!
//! Without `--bench` (as `cargo test --all-targets` runs it) this is a smoke run of a few
//! seconds that only shows the harness works.
mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{RAW_SCRIPT, command_counts, command_delta, micros, percentile, raw_eval};
use keylatch::redis;
use keylatch::{DistributedLock, Owner};
use keylatch_testkit::RedisServer;

const WAITERS: usize = 16;

struct Sizes {
    uncontended: usize,
    handoffs: usize,
    blocks: usize,
    fifo_rounds: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Reentrant,
    /// The fair lock as it comes: a release hands the lock to the head of the queue.
    Fair,
    /// The fair lock without the direct grant: a release wakes the head, which acquires.
    FairWake,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Reentrant => "reentrant",
            Kind::Fair => "fair",
            Kind::FairWake => "fair-wake",
        }
    }

    fn lock(self, client: &keylatch::Client, name: &str) -> Arc<dyn DistributedLock> {
        match self {
            Kind::Reentrant => Arc::new(client.lock(name)),
            Kind::Fair => Arc::new(client.fair_lock(name)),
            Kind::FairWake => Arc::new(client.fair_lock(name).with_direct_grant(false)),
        }
    }
}

/// Pairs served out of arrival order.
fn inversions(order: &[usize]) -> usize {
    let mut count = 0;
    for (a, x) in order.iter().enumerate() {
        count += order[a + 1..].iter().filter(|y| *y < x).count();
    }
    count
}

/// Gaps from a release to the next acquisition while 16 tasks hand one key around: all of
/// them, and those where the next holder is another task (a real hand-off, not the releasing
/// task taking the lock straight back).
#[derive(Default)]
struct Gaps {
    all: Vec<Duration>,
    handed_over: Vec<Duration>,
}

async fn handoffs(
    client: &keylatch::Client,
    kind: Kind,
    name: &str,
    waiters: usize,
    per_waiter: usize,
) -> Gaps {
    let events: Arc<Mutex<Vec<(Instant, Instant, usize)>>> = Arc::default();
    let mut tasks = Vec::new();
    for task in 0..waiters {
        let lock = kind.lock(client, name);
        let events = events.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..per_waiter {
                let guard = lock.lock().await.unwrap();
                let acquired = Instant::now();
                let released = Instant::now();
                guard.unlock().await.unwrap();
                events.lock().unwrap().push((acquired, released, task));
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut events = events.lock().unwrap().clone();
    events.sort();
    let mut gaps = Gaps::default();
    for w in events.windows(2) {
        let gap = w[1].0.saturating_duration_since(w[0].1);
        gaps.all.push(gap);
        if w[0].2 != w[1].2 {
            gaps.handed_over.push(gap);
        }
    }
    gaps
}

/// Rounds of 16 waiters arriving 2 ms apart behind a holder; returns (inversions against the
/// start order, inversions against the server's queue order for the fair lock).
async fn fifo(
    clients: &[keylatch::Client],
    kind: Kind,
    name: &str,
    rounds: usize,
) -> (usize, usize, usize) {
    let mut against_start = 0;
    let mut against_queue = 0;
    let mut pairs = 0;
    for _ in 0..rounds {
        let gate = match kind {
            Kind::Reentrant => Arc::new(clients[0].lock(name).with_owner(Owner::unique()))
                as Arc<dyn DistributedLock>,
            Kind::Fair | Kind::FairWake => {
                Arc::new(clients[0].fair_lock(name).with_owner(Owner::unique()))
            }
        };
        let held = gate.lock_with_lease(Duration::from_secs(30)).await.unwrap();
        let baseline = subscribed(clients);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut ids = Vec::new();
        let mut tasks = Vec::new();
        let start = tokio::time::Instant::now();
        for i in 0..WAITERS {
            let client = &clients[i % clients.len()];
            let owner = Owner::unique();
            ids.push(client.owner_id(owner).to_string());
            let lock: Arc<dyn DistributedLock> = match kind {
                Kind::Reentrant => Arc::new(client.lock(name).with_owner(owner)),
                Kind::Fair | Kind::FairWake => Arc::new(client.fair_lock(name).with_owner(owner)),
            };
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep_until(start + Duration::from_millis(2 * i as u64)).await;
                let guard = lock.lock().await.unwrap();
                order.lock().unwrap().push(i);
                guard.unlock().await.unwrap();
            }));
        }
        // Everyone has made a first attempt once every waiter is queued (fair) or subscribed
        // (reentrant; counted above what was subscribed before the round).
        let deadline = Instant::now() + Duration::from_secs(10);
        let probe = clients[0].fair_lock(name);
        loop {
            let arrived = match kind {
                Kind::Fair | Kind::FairWake => probe.queue().await.unwrap().len(),
                Kind::Reentrant => subscribed(clients).saturating_sub(baseline),
            };
            if arrived >= WAITERS || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let queued: Vec<usize> = if kind == Kind::Fair {
            let queue = clients[0].fair_lock(name).queue().await.unwrap();
            queue
                .iter()
                .filter_map(|w| ids.iter().position(|id| *id == w.id))
                .collect()
        } else {
            Vec::new()
        };
        held.unlock().await.unwrap();
        for task in tasks {
            task.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        against_start += inversions(&order);
        if kind == Kind::Fair {
            // Rank each waiter by its place in the server's queue, then count.
            let ranked: Vec<usize> = order
                .iter()
                .map(|i| queued.iter().position(|q| q == i).unwrap_or(usize::MAX))
                .collect();
            against_queue += inversions(&ranked);
        }
        pairs += WAITERS * (WAITERS - 1) / 2;
    }
    (against_start, against_queue, pairs)
}

fn subscribed(clients: &[keylatch::Client]) -> usize {
    clients.iter().map(|c| c.stats().subscribers).sum()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` does not: a smoke run then.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let quick = std::env::var_os("KEYLATCH_BENCH_QUICK").is_some();
    let sizes = if smoke {
        Sizes {
            uncontended: 50,
            handoffs: 64,
            blocks: 1,
            fifo_rounds: 1,
        }
    } else if quick {
        Sizes {
            uncontended: 2_000,
            handoffs: 800,
            blocks: 2,
            fifo_rounds: 5,
        }
    } else {
        Sizes {
            uncontended: 10_000,
            handoffs: 4_000,
            blocks: 4,
            fifo_rounds: 30,
        }
    };
    let server = RedisServer::start().expect("start redis-server (run ./scripts/setup.sh)");
    let config = keylatch::Config::builder()
        .url(server.url())
        .build()
        .expect("config");
    let client = keylatch::Client::connect_with(config.clone())
        .await
        .expect("connect");
    let raw_client = redis::Client::open(server.url()).unwrap();
    let mut raw = raw_client.get_multiplexed_async_connection().await.unwrap();
    let script = redis::Script::new(RAW_SCRIPT);
    raw_eval(&mut raw, &script, "warm").await;

    println!(
        "keylatch fair lock benchmark ({} run)",
        if smoke {
            "smoke"
        } else if quick {
            "quick"
        } else {
            "full"
        }
    );
    println!(
        "machine: {} cpus, redis-server on loopback; figures are noisy when other work shares the cpus",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();

    // 1. Uncontended lock + unlock, one task: fair, reentrant and two raw EVALSHAs interleaved.
    let fair = client.fair_lock("bench:fair:uncontended");
    let plain = client.lock("bench:plain:uncontended");
    let (mut fair_times, mut plain_times, mut raw_times) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..sizes.uncontended {
        let t = Instant::now();
        raw_eval(&mut raw, &script, "bench:raw").await;
        raw_eval(&mut raw, &script, "bench:raw").await;
        raw_times.push(t.elapsed());
        let t = Instant::now();
        plain.lock().await.unwrap().unlock().await.unwrap();
        plain_times.push(t.elapsed());
        let t = Instant::now();
        fair.lock().await.unwrap().unlock().await.unwrap();
        fair_times.push(t.elapsed());
    }
    for v in [&mut fair_times, &mut plain_times, &mut raw_times] {
        v.sort();
    }
    let rt_p50 = percentile(&raw_times, 0.5) / 2;
    println!(
        "1. uncontended lock+unlock, 1 task ({} samples each)",
        sizes.uncontended
    );
    for (label, times) in [
        ("fair", &fair_times),
        ("reentrant", &plain_times),
        ("2x EVALSHA", &raw_times),
    ] {
        println!(
            "   {label:<10} p50 {:7.1} us  p99 {:7.1} us",
            micros(percentile(times, 0.5)),
            micros(percentile(times, 0.99))
        );
    }
    println!(
        "   ratio p50: fair {:.2}x reentrant, {:.2}x two raw round trips",
        micros(percentile(&fair_times, 0.5)) / micros(percentile(&plain_times, 0.5)),
        micros(percentile(&fair_times, 0.5)) / micros(percentile(&raw_times, 0.5))
    );
    println!();

    // 2. Hand-off, 2, 8, 16 and 64 waiters on one key: blocks of the two locks alternate, so
    //    drift (other work on the machine) hits both alike.
    let mut summary = Vec::new();
    for waiters in [2, 8, WAITERS, 64] {
        let per_waiter = (sizes.handoffs / sizes.blocks / waiters).max(2);
        let mut gaps: BTreeMap<&str, Gaps> = BTreeMap::new();
        let mut commands: BTreeMap<&str, String> = BTreeMap::new();
        for block in 0..sizes.blocks {
            for kind in [Kind::Reentrant, Kind::Fair, Kind::FairWake] {
                let name = format!("bench:handoff:{}:{waiters}:{block}", kind.label());
                let before = command_counts(&mut raw).await;
                let block = handoffs(&client, kind, &name, waiters, per_waiter).await;
                let after = command_counts(&mut raw).await;
                commands.insert(
                    kind.label(),
                    command_delta(&before, &after, waiters * per_waiter),
                );
                let entry = gaps.entry(kind.label()).or_default();
                entry.all.extend(block.all);
                entry.handed_over.extend(block.handed_over);
            }
        }
        println!(
            "2. hand-off, {waiters} waiters on one key, one client ({} blocks of {} hand-offs per lock, alternating)",
            sizes.blocks,
            waiters * per_waiter
        );
        for g in gaps.values_mut() {
            g.all.sort();
            g.handed_over.sort();
        }
        for kind in [Kind::Reentrant, Kind::Fair, Kind::FairWake] {
            let g = &gaps[kind.label()];
            println!(
                "   {:<10} gap p50 {:7.1} us  p99 {:7.1} us  ({:.2} raw round trips at p50)",
                kind.label(),
                micros(percentile(&g.all, 0.5)),
                micros(percentile(&g.all, 0.99)),
                micros(percentile(&g.all, 0.5)) / micros(rt_p50)
            );
            println!(
                "              to another task ({:.0} %): p50 {:7.1} us  p99 {:7.1} us; the rest went back to the task that had just released",
                100.0 * g.handed_over.len() as f64 / g.all.len().max(1) as f64,
                micros(percentile(&g.handed_over, 0.5)),
                micros(percentile(&g.handed_over, 0.99)),
            );
            println!(
                "              per acquisition (evalsha usec: server time in scripts): {}",
                commands[kind.label()]
            );
        }
        let (f, w, r) = (&gaps["fair"], &gaps["fair-wake"], &gaps["reentrant"]);
        let ratio =
            |a: &[Duration], b: &[Duration], p| micros(percentile(a, p)) / micros(percentile(b, p));
        println!(
            "   ratio fair / reentrant: p50 {:.2}x, p99 {:.2}x (target <= 1.2x); against the reentrant lock's hand-offs to another task only: p50 {:.2}x, p99 {:.2}x",
            ratio(&f.all, &r.all, 0.5),
            ratio(&f.all, &r.all, 0.99),
            ratio(&f.all, &r.handed_over, 0.5),
            ratio(&f.all, &r.handed_over, 0.99),
        );
        println!(
            "   ratio fair / fair without the direct grant: p50 {:.2}x, p99 {:.2}x; fair-wake / reentrant: p50 {:.2}x",
            ratio(&f.all, &w.all, 0.5),
            ratio(&f.all, &w.all, 0.99),
            ratio(&w.all, &r.all, 0.5),
        );
        println!();
        summary.push((
            waiters,
            ratio(&f.all, &r.all, 0.5),
            ratio(&f.all, &r.handed_over, 0.5),
            ratio(&w.all, &r.all, 0.5),
            micros(percentile(&f.all, 0.5)) / micros(rt_p50),
        ));
    }
    println!(
        "hand-off p50, fair / reentrant (all hand-offs; to another task only); without the direct grant; fair in raw round trips:"
    );
    for (waiters, all, other, wake, trips) in &summary {
        println!(
            "   {waiters:>3} waiters: {all:.2}x; {other:.2}x; without the grant {wake:.2}x; {trips:.2} round trips"
        );
    }
    println!();

    // 3. FIFO: rounds of 16 waiters on 3 clients arriving 2 ms apart behind a holder.
    let clients = [
        client.clone(),
        keylatch::Client::connect_with(config.clone())
            .await
            .unwrap(),
        keylatch::Client::connect_with(config.clone())
            .await
            .unwrap(),
    ];
    println!(
        "3. FIFO, {} rounds of {WAITERS} waiters on 3 clients arriving 2 ms apart behind a holder",
        sizes.fifo_rounds
    );
    for kind in [Kind::Reentrant, Kind::Fair] {
        let name = format!("bench:fifo:{}", kind.label());
        let (start, queue, pairs) = fifo(&clients, kind, &name, sizes.fifo_rounds).await;
        if kind == Kind::Fair {
            println!(
                "   {:<10} {start} inversions of {pairs} pairs against arrival ({queue} against the server's queue order; target 0)",
                kind.label()
            );
        } else {
            println!(
                "   {:<10} {start} inversions of {pairs} pairs against arrival",
                kind.label()
            );
        }
    }
    // Parked subscriptions linger 250 ms after a wait.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stats = client.stats();
    println!();
    println!(
        "client, half a second later: {} pub/sub channels left, {} watchdog entries left",
        stats.channels, stats.watchdog.holds
    );
}
