//! `keylatch demo` on a `zk://` URL: the demo's story told with what ZooKeeper has. Every
//! worker is a ZooKeeper session of its own (its own client, as a process of its own would
//! be), and the lost-session part pauses a real process (a copy of this binary) until the
//! server ends its session. What the workers saw is kept in this process, so nothing but the
//! locks' nodes is written to ZooKeeper; those are removed at the end.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use keylatch::{AcquireOptions, Client, Config};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::Mutex;

use crate::cli::DemoWorkerArgs;
use crate::demo::{Outcome, summary};
use crate::failure::{EX_SOFTWARE, EX_USAGE, Failure};
use crate::zk_raw::{BASE_PATH, RawZk};

const WORKERS: u32 = 4;
const ROUNDS: u32 = 5;
const FIFO_WORKERS: u32 = 5;
const READERS: u32 = 3;
const CAPPED_WORKERS: u32 = 8;
const PERMITS: u32 = 3;
/// The session timeout the paused process asks for (the server may grant more).
const PAUSED_SESSION: Duration = Duration::from_secs(2);
/// The demo-worker role of the process that is paused.
pub const HOLDER_ROLE: &str = "zk-holder";

fn software(message: impl Into<String>) -> Failure {
    Failure::new(EX_SOFTWARE, message)
}

/// Runs the parts, prints a summary, removes the demo's nodes; exit 0 when every property
/// held.
pub async fn demo(config: Config) -> Result<u8, Failure> {
    let client = Client::connect_with(config.clone()).await?;
    let scratch = format!("keylatch-demo-{}", client.id());
    println!(
        "keylatch demo against {} (ZooKeeper): every worker below is a ZooKeeper session of \
         its own\n",
        config.url
    );
    let outcomes = parts(&client, &config, &scratch).await;
    let _ = client.shutdown().await;
    if let Ok(raw) = RawZk::connect(&config).await {
        raw.remove_tree(&format!("{BASE_PATH}/{scratch}")).await;
    }
    Ok(summary(&outcomes?))
}

async fn parts(client: &Client, config: &Config, scratch: &str) -> Result<Vec<Outcome>, Failure> {
    Ok(vec![
        exclusion(config, &format!("{scratch}/exclusion")).await?,
        fifo(client, config, &format!("{scratch}/fifo")).await?,
        cache_refresh(config, &format!("{scratch}/cache")).await?,
        fencing(config, &format!("{scratch}/fencing")).await?,
        lost_session(client, config, &format!("{scratch}/lost")).await?,
        capped(config, &format!("{scratch}/capped")).await?,
    ])
}

/// Runs `work` in `n` tasks, each with a session of its own (shut down after it), and waits.
async fn sessions<F, Fut>(config: &Config, n: u32, work: F) -> Result<(), Failure>
where
    F: Fn(Client, u32) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<(), keylatch::Error>> + Send,
{
    let mut tasks = tokio::task::JoinSet::new();
    for id in 0..n {
        let (config, work) = (config.clone(), work.clone());
        tasks.spawn(async move {
            let client = Client::connect_with(config).await?;
            let result = work(client.clone(), id).await;
            let _ = client.shutdown().await;
            result
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| software(e.to_string()))??;
    }
    Ok(())
}

/// A fencing token for the eye: the number, or `none`.
fn token(token: Option<u64>) -> String {
    token.map_or_else(|| "none".to_owned(), |t| t.to_string())
}

/// Raises `max` to `now` if it is higher.
fn record_max(max: &AtomicU32, now: u32) {
    max.fetch_max(now, Ordering::SeqCst);
}

/// The reentrant lock excludes across sessions, and its holder re-enters.
async fn exclusion(config: &Config, name: &str) -> Result<Outcome, Failure> {
    println!(
        "1. the reentrant lock excludes across sessions: {WORKERS} sessions, {ROUNDS} rounds \
         each, re-entering once per round"
    );
    let counter = Arc::new(AtomicU32::new(0));
    let (inside, overlaps, reentered) = (
        Arc::new(AtomicU32::new(0)),
        Arc::new(AtomicU32::new(0)),
        Arc::new(AtomicU32::new(0)),
    );
    let name = name.to_owned();
    sessions(config, WORKERS, {
        let (counter, inside) = (counter.clone(), inside.clone());
        let (overlaps, reentered) = (overlaps.clone(), reentered.clone());
        move |client, _| {
            let (name, counter, inside) = (name.clone(), counter.clone(), inside.clone());
            let (overlaps, reentered) = (overlaps.clone(), reentered.clone());
            async move {
                let lock = client.lock(&name);
                for _ in 0..ROUNDS {
                    let guard = lock.lock().await?;
                    // The holder's owner re-enters: a count in the client, no second node.
                    let again = lock.with_owner(guard.owner()).lock().await?;
                    reentered.fetch_add(1, Ordering::SeqCst);
                    if inside.fetch_add(1, Ordering::SeqCst) > 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    // Read, wait, write: an overlapping holder would lose an increment.
                    let seen = counter.load(Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    counter.store(seen + 1, Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    again.unlock().await?;
                    guard.unlock().await?;
                }
                Ok(())
            }
        }
    })
    .await?;
    let (count, overlaps) = (
        counter.load(Ordering::SeqCst),
        overlaps.load(Ordering::SeqCst),
    );
    let expected = WORKERS * ROUNDS;
    let reentered = reentered.load(Ordering::SeqCst);
    println!(
        "   counter {count} (expected {expected}), {overlaps} overlaps, {reentered} re-entries"
    );
    Ok(Outcome {
        property: "the reentrant lock lets one session in at a time",
        held: count == expected && overlaps == 0 && reentered == expected,
        detail: format!("{count}/{expected} increments kept, {overlaps} overlaps"),
    })
}

/// The fair lock (ZooKeeper's sequential nodes) runs waiters in arrival order.
async fn fifo(client: &Client, config: &Config, name: &str) -> Result<Outcome, Failure> {
    println!("2. FIFO jobs on the fair lock: {FIFO_WORKERS} sessions queue up one by one");
    let zk = client
        .as_zookeeper()
        .ok_or_else(|| software("not a ZooKeeper client"))?;
    let gate = client.fair_lock(name).lock().await?;
    let done = Arc::new(Mutex::new(Vec::new()));
    let mut workers = tokio::task::JoinSet::new();
    for id in 0..FIFO_WORKERS {
        let (config, lock_name, done) = (config.clone(), name.to_owned(), done.clone());
        workers.spawn(async move {
            let client = Client::connect_with(config).await?;
            let guard = client.fair_lock(&lock_name).lock().await?;
            done.lock().await.push(id);
            tokio::time::sleep(Duration::from_millis(30)).await;
            guard.unlock().await?;
            client.shutdown().await
        });
        // Wait until this worker's node is queued (the gate's node and one per worker).
        let deadline = Instant::now() + Duration::from_secs(20);
        while zk.contenders(name, 0).await?.nodes.len() < id as usize + 2 {
            if Instant::now() > deadline {
                return Err(software("a FIFO worker never queued"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        println!("   session {id} arrived and waits");
    }
    gate.unlock().await?;
    while let Some(result) = workers.join_next().await {
        result.map_err(|e| software(e.to_string()))??;
    }
    let done = done.lock().await.clone();
    let arrival: Vec<u32> = (0..FIFO_WORKERS).collect();
    println!("   arrival order:    {arrival:?}");
    println!("   completion order: {done:?}");
    Ok(Outcome {
        property: "fair lock runs jobs in arrival order",
        held: done == arrival,
        detail: format!("arrival {arrival:?}, completion {done:?}"),
    })
}

/// What the cache-refresh part shares between its sessions.
#[derive(Default)]
struct Cache {
    part_a: AtomicU32,
    part_b: AtomicU32,
    refreshed: AtomicBool,
    reads: AtomicU32,
    torn: AtomicU32,
    readers: AtomicU32,
    readers_max: AtomicU32,
}

/// Cache refresh with the read-write lock: readers never see a half-built cache.
async fn cache_refresh(config: &Config, name: &str) -> Result<Outcome, Failure> {
    println!(
        "3. cache refresh with the read-write lock: 1 refresher and {READERS} reader sessions"
    );
    let cache = Arc::new(Cache::default());
    let name = name.to_owned();
    sessions(config, READERS + 1, {
        let cache = cache.clone();
        move |client, id| {
            let (cache, rw) = (cache.clone(), client.rw_lock(&name));
            async move {
                if id == READERS {
                    for version in 1..=6u32 {
                        let guard = rw.write().await?;
                        // Rebuilt in two steps: a reader between them would see a half.
                        cache.part_a.store(version, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(40)).await;
                        cache.part_b.store(version, Ordering::SeqCst);
                        guard.unlock().await?;
                        tokio::time::sleep(Duration::from_millis(60)).await;
                    }
                    cache.refreshed.store(true, Ordering::SeqCst);
                    return Ok(());
                }
                while !cache.refreshed.load(Ordering::SeqCst) {
                    let guard = rw.read().await?;
                    let now = cache.readers.fetch_add(1, Ordering::SeqCst) + 1;
                    record_max(&cache.readers_max, now);
                    let a = cache.part_a.load(Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    let b = cache.part_b.load(Ordering::SeqCst);
                    cache.reads.fetch_add(1, Ordering::SeqCst);
                    if a != b {
                        cache.torn.fetch_add(1, Ordering::SeqCst);
                    }
                    cache.readers.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().await?;
                }
                Ok(())
            }
        }
    })
    .await?;
    let reads = cache.reads.load(Ordering::SeqCst);
    let torn = cache.torn.load(Ordering::SeqCst);
    let overlap = cache.readers_max.load(Ordering::SeqCst);
    println!("   {reads} reads, {torn} saw a half-built cache, up to {overlap} readers at once");
    Ok(Outcome {
        property: "readers never see a half-built cache",
        held: torn == 0 && reads > 0,
        detail: format!("{reads} reads, {torn} half-built, up to {overlap} readers together"),
    })
}

/// Fencing tokens: each acquisition's token is its node's creation zxid, which only grows.
async fn fencing(config: &Config, name: &str) -> Result<Outcome, Failure> {
    println!("4. fencing tokens: two sessions take the lock in turn; each token is a zxid");
    let clients = [
        Client::connect_with(config.clone()).await?,
        Client::connect_with(config.clone()).await?,
    ];
    let mut tokens = Vec::new();
    let mut result = Ok(());
    for turn in 0..6 {
        let session = turn % 2;
        match clients[session].lock(name).lock().await {
            Ok(guard) => {
                let fencing_token = guard.fencing_token();
                println!(
                    "   session {session} holds it with token {}",
                    token(fencing_token)
                );
                tokens.push(fencing_token);
                if let Err(err) = guard.unlock().await {
                    result = Err(err);
                    break;
                }
            }
            Err(err) => {
                result = Err(err);
                break;
            }
        }
    }
    for client in &clients {
        let _ = client.shutdown().await;
    }
    result?;
    let increasing = tokens.iter().all(Option::is_some) && tokens.windows(2).all(|w| w[0] < w[1]);
    let shown: Vec<u64> = tokens.iter().flatten().copied().collect();
    Ok(Outcome {
        property: "fencing tokens (zxids) strictly increase from holder to holder",
        held: increasing,
        detail: format!("tokens {shown:?}"),
    })
}

/// Sends `sig` to `child`.
fn signal(child: &Child, sig: Signal) -> Result<(), Failure> {
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| software("the holder process is gone"))?;
    kill(Pid::from_raw(pid), sig).map_err(|e| software(format!("cannot send {sig}: {e}")))
}

/// The holder process's next line of output.
async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> Result<String, Failure> {
    match tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await {
        Ok(Ok(Some(line))) => Ok(line),
        _ => Err(software("the holder process said nothing within 60 s")),
    }
}

/// A paused holder's session ends on the server; another session gets the lock, and the
/// holder, woken, learns it from `lost()`.
async fn lost_session(client: &Client, config: &Config, name: &str) -> Result<Outcome, Failure> {
    println!("5. a session that ends loses its locks: a separate process holds, and is paused");
    let exe = std::env::current_exe().map_err(|e| software(e.to_string()))?;
    let mut command = Command::new(exe);
    crate::connection::pass_to(config, &mut command);
    // Its session's expiry is the point: keep the client's warnings about it quiet.
    command.env("RUST_LOG", "error");
    let mut holder = command
        .args(["demo-worker", HOLDER_ROLE, name, "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| software(format!("cannot start a demo process: {e}")))?;
    let stdout = holder
        .stdout
        .take()
        .ok_or_else(|| software("no pipe from the demo process"))?;
    let mut lines = BufReader::new(stdout).lines();
    let first: Option<u64> = next_line(&mut lines)
        .await?
        .strip_prefix("held ")
        .and_then(|t| t.parse().ok());
    println!(
        "   the process holds it (token {}); pausing it (SIGSTOP)",
        token(first)
    );
    signal(&holder, Signal::SIGSTOP)?;
    let started = Instant::now();
    let options = AcquireOptions::new().with_wait(Duration::from_secs(60));
    let taken = client.lock(name).acquire(options).await;
    signal(&holder, Signal::SIGCONT)?;
    let guard = taken?.ok_or_else(|| software("the paused holder's lock never freed"))?;
    let second = guard.fencing_token();
    println!(
        "   after {:.1} s the server ended its session: this session took the lock (token {})",
        started.elapsed().as_secs_f64(),
        token(second)
    );
    let said = next_line(&mut lines).await?;
    let reason = said.strip_prefix("lost ").map(str::to_owned);
    println!("   woken (SIGCONT), the process learned it from lost(): {said}");
    guard.unlock().await?;
    let status = holder.wait().await.map_err(|e| software(e.to_string()))?;
    let newer = matches!((first, second), (Some(a), Some(b)) if b > a);
    Ok(Outcome {
        property: "a holder whose session ended learns it from lost()",
        held: newer && reason.is_some() && status.success(),
        detail: format!(
            "reason {}, token {} then {}",
            reason.as_deref().unwrap_or("none"),
            token(first),
            token(second)
        ),
    })
}

/// ZooKeeper's semaphore (reached through `as_zookeeper()`) caps concurrency at K.
async fn capped(config: &Config, name: &str) -> Result<Outcome, Failure> {
    println!(
        "6. the ZooKeeper semaphore (client.as_zookeeper()) caps concurrency: {CAPPED_WORKERS} \
         sessions, {PERMITS} permits"
    );
    let (active, max) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let name = name.to_owned();
    sessions(config, CAPPED_WORKERS, {
        let (active, max) = (active.clone(), max.clone());
        move |client, _| {
            let (name, active, max) = (name.clone(), active.clone(), max.clone());
            async move {
                let Some(zk) = client.as_zookeeper() else {
                    return Ok(());
                };
                let permit = zk.semaphore(&name, PERMITS)?.acquire().await?;
                record_max(&max, active.fetch_add(1, Ordering::SeqCst) + 1);
                tokio::time::sleep(Duration::from_millis(150)).await;
                active.fetch_sub(1, Ordering::SeqCst);
                permit.release().await
            }
        }
    })
    .await?;
    let max = max.load(Ordering::SeqCst);
    println!("   highest concurrency seen: {max} (cap {PERMITS})");
    Ok(Outcome {
        property: "the semaphore never lets more than K run",
        held: max <= PERMITS && max > 0,
        detail: format!("highest concurrency {max}, cap {PERMITS}"),
    })
}

/// The process that holds a lock and is paused: prints `held TOKEN`, then `lost REASON`
/// once its guard reports the hold lost (exit 0), or fails after 60 s.
pub async fn worker(mut config: Config, args: DemoWorkerArgs) -> Result<(), Failure> {
    if args.role != HOLDER_ROLE {
        return Err(Failure::new(
            EX_USAGE,
            format!("unknown demo role {:?}", args.role),
        ));
    }
    config.watchdog_timeout = PAUSED_SESSION;
    let client = Client::connect_with(config).await?;
    let guard = client.lock(&args.name).lock().await?;
    println!("held {}", guard.fencing_token().unwrap_or_default());
    let lost = tokio::time::timeout(Duration::from_secs(60), guard.lost()).await;
    let reason = guard.loss_reason();
    guard.forget();
    let _ = client.shutdown().await;
    match (lost, reason) {
        (Ok(()), Some(reason)) => println!("lost {reason}"),
        (Ok(()), None) => println!("lost"),
        (Err(_), _) => return Err(software("the hold was not lost within 60 s")),
    }
    Ok(())
}
