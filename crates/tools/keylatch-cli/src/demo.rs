//! `keylatch demo` on Redis: the use cases, each across real OS processes (copies of this
//! binary). On a `zk://` URL the demo is `demo_zk.rs`'s.

use std::process::Stdio;
use std::time::Duration;

use keylatch::redis::{self, AsyncCommands};
use keylatch::{Client, Config};
use tokio::process::Command;

use crate::cli::DemoWorkerArgs;
use crate::failure::{EX_SOFTWARE, Failure};

const FIFO_WORKERS: u32 = 5;
const READERS: u32 = 3;
const CAPPED_WORKERS: u32 = 8;
const PERMITS: u32 = 3;

/// Keeps the highest value a counter reached.
const RECORD_MAX: &str = r"
local now = redis.call('incr', KEYS[1])
local max = tonumber(redis.call('get', KEYS[2]) or '0')
if now > max then redis.call('set', KEYS[2], now) end
return now
";

/// Whether one property of a demo part held.
pub(crate) struct Outcome {
    pub(crate) property: &'static str,
    pub(crate) held: bool,
    pub(crate) detail: String,
}

/// Prints the summary of `outcomes`; the exit code: 0 when every property held, else 1.
pub(crate) fn summary(outcomes: &[Outcome]) -> u8 {
    println!("\nsummary");
    for outcome in outcomes {
        println!(
            "  [{}] {}: {}",
            if outcome.held { "held" } else { "FAILED" },
            outcome.property,
            outcome.detail
        );
    }
    u8::from(!outcomes.iter().all(|o| o.held))
}

fn spawn_worker(
    config: &Config,
    role: &str,
    name: &str,
    id: u32,
) -> Result<tokio::process::Child, Failure> {
    let exe = std::env::current_exe().map_err(|e| Failure::new(EX_SOFTWARE, e.to_string()))?;
    let mut command = Command::new(exe);
    crate::connection::pass_to(config, &mut command);
    command
        .args(["demo-worker", role, name, &id.to_string()])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Failure::new(EX_SOFTWARE, format!("cannot start a demo process: {e}")))
}

async fn wait_all(children: Vec<tokio::process::Child>) -> Result<(), Failure> {
    for mut child in children {
        let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
            .await
            .map_err(|_| Failure::new(EX_SOFTWARE, "a demo process did not finish within 60 s"))?
            .map_err(|e| Failure::new(EX_SOFTWARE, e.to_string()))?;
        if !status.success() {
            return Err(Failure::new(
                EX_SOFTWARE,
                format!("a demo process failed: {status}"),
            ));
        }
    }
    Ok(())
}

/// The demo's own key `what` beside the primitive `name`. The name in braces is a hash tag:
/// on a Redis Cluster it puts the key in the slot of the primitive's keys, so a script may
/// touch two of them.
fn aux(name: &str, what: &str) -> String {
    format!("{{{name}}}:{what}")
}

fn redis_err(err: redis::RedisError) -> Failure {
    Failure::from(keylatch_redis::from_redis(err))
}

/// Runs the three parts and prints a summary; exit 0 when every property held.
pub async fn demo(config: Config) -> Result<u8, Failure> {
    let client = Client::connect_with(config.clone()).await?;
    let base = format!("keylatch-demo:{}", client.id());
    println!(
        "keylatch demo against {}: every worker below is a separate OS process\n",
        config.url
    );
    let outcomes = vec![
        fifo(&client, &config, &format!("{base}:fifo")).await?,
        cache_refresh(&client, &config, &format!("{base}:cache")).await?,
        capped(&client, &config, &format!("{base}:capped")).await?,
    ];
    let code = summary(&outcomes);
    let mut conn = client.connection().await?;
    let keys: Vec<String> = conn.keys(format!("*{base}*")).await.map_err(redis_err)?;
    if !keys.is_empty() {
        let _: () = conn.del(&keys).await.map_err(redis_err)?;
    }
    Ok(code)
}

/// FIFO jobs on the fair lock: workers queue in a known order; they must run in that order.
async fn fifo(client: &Client, config: &Config, name: &str) -> Result<Outcome, Failure> {
    println!("1. FIFO jobs on the fair lock: {FIFO_WORKERS} worker processes queue up one by one");
    let lock = client.fair_lock(name);
    let gate = lock.lock().await?;
    let mut children = Vec::new();
    for id in 0..FIFO_WORKERS {
        children.push(spawn_worker(config, "fifo", name, id)?);
        // Wait until this worker is in the queue, so arrival order is known.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while lock.queue().await?.len() < (id + 1) as usize {
            if tokio::time::Instant::now() > deadline {
                return Err(Failure::new(EX_SOFTWARE, "a FIFO worker never queued"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        println!("   worker {id} arrived and waits");
    }
    gate.unlock().await?;
    wait_all(children).await?;
    let mut conn = client.connection().await?;
    let done: Vec<u32> = conn
        .lrange(aux(name, "done"), 0, -1)
        .await
        .map_err(redis_err)?;
    let arrival: Vec<u32> = (0..FIFO_WORKERS).collect();
    println!("   arrival order:    {arrival:?}");
    println!("   completion order: {done:?}");
    Ok(Outcome {
        property: "fair lock runs jobs in arrival order",
        held: done == arrival,
        detail: format!("arrival {arrival:?}, completion {done:?}"),
    })
}

/// Cache refresh with the read-write lock: readers never see a half-built cache.
async fn cache_refresh(client: &Client, config: &Config, name: &str) -> Result<Outcome, Failure> {
    println!(
        "2. cache refresh with the read-write lock: 1 refresher and {READERS} reader processes"
    );
    let mut children = vec![spawn_worker(config, "refresher", name, 0)?];
    for id in 0..READERS {
        children.push(spawn_worker(config, "reader", name, id)?);
    }
    wait_all(children).await?;
    let mut conn = client.connection().await?;
    let reads: u64 = conn.get(aux(name, "reads")).await.map_err(redis_err)?;
    let torn: Option<u64> = conn.get(aux(name, "torn")).await.map_err(redis_err)?;
    let overlap: Option<u64> = conn
        .get(aux(name, "readers-max"))
        .await
        .map_err(redis_err)?;
    let torn = torn.unwrap_or(0);
    let overlap = overlap.unwrap_or(0);
    println!("   {reads} reads, {torn} saw a half-built cache, up to {overlap} readers at once");
    Ok(Outcome {
        property: "readers never see a half-built cache",
        held: torn == 0 && reads > 0,
        detail: format!("{reads} reads, {torn} half-built, up to {overlap} readers together"),
    })
}

/// A semaphore caps concurrency at K across processes.
async fn capped(client: &Client, config: &Config, name: &str) -> Result<Outcome, Failure> {
    println!(
        "3. a semaphore caps concurrency: {CAPPED_WORKERS} worker processes, {PERMITS} permits"
    );
    client
        .permit_expirable_semaphore(name)
        .try_set_permits(PERMITS)
        .await?;
    let mut children = Vec::new();
    for id in 0..CAPPED_WORKERS {
        children.push(spawn_worker(config, "capped", name, id)?);
    }
    wait_all(children).await?;
    let mut conn = client.connection().await?;
    let max: u64 = conn.get(aux(name, "active-max")).await.map_err(redis_err)?;
    println!("   highest concurrency seen: {max} (cap {PERMITS})");
    Ok(Outcome {
        property: "the semaphore never lets more than K run",
        held: max <= u64::from(PERMITS) && max > 0,
        detail: format!("highest concurrency {max}, cap {PERMITS}"),
    })
}

/// One demo process.
pub async fn worker(config: Config, args: DemoWorkerArgs) -> Result<(), Failure> {
    let client = Client::connect_with(config).await?;
    let mut conn = client.connection().await?;
    let name = args.name.as_str();
    let record_max = redis::Script::new(RECORD_MAX);
    match args.role.as_str() {
        "fifo" => {
            let guard = client.fair_lock(name).lock().await?;
            let _: () = conn
                .rpush(aux(name, "done"), args.id)
                .await
                .map_err(redis_err)?;
            tokio::time::sleep(Duration::from_millis(30)).await;
            guard.unlock().await?;
        }
        "refresher" => {
            let rw = client.rw_lock(name);
            for version in 1..=6u32 {
                let guard = rw.write().await?;
                // Rebuild in two steps: a reader between them would see a half-built cache.
                let _: () = conn
                    .set(aux(name, "part-a"), version)
                    .await
                    .map_err(redis_err)?;
                tokio::time::sleep(Duration::from_millis(40)).await;
                let _: () = conn
                    .set(aux(name, "part-b"), version)
                    .await
                    .map_err(redis_err)?;
                guard.unlock().await?;
                tokio::time::sleep(Duration::from_millis(60)).await;
            }
            let _: () = conn
                .set(aux(name, "refreshed"), 1)
                .await
                .map_err(redis_err)?;
        }
        "reader" => {
            let rw = client.rw_lock(name);
            loop {
                let done: bool = conn
                    .exists(aux(name, "refreshed"))
                    .await
                    .map_err(redis_err)?;
                if done {
                    break;
                }
                let guard = rw.read().await?;
                let _: i64 = record_max
                    .key(aux(name, "readers"))
                    .key(aux(name, "readers-max"))
                    .invoke_async(&mut conn)
                    .await
                    .map_err(redis_err)?;
                let a: Option<u32> = conn.get(aux(name, "part-a")).await.map_err(redis_err)?;
                tokio::time::sleep(Duration::from_millis(10)).await;
                let b: Option<u32> = conn.get(aux(name, "part-b")).await.map_err(redis_err)?;
                let _: () = conn.incr(aux(name, "reads"), 1).await.map_err(redis_err)?;
                if a != b {
                    let _: () = conn.incr(aux(name, "torn"), 1).await.map_err(redis_err)?;
                }
                let _: () = conn
                    .decr(aux(name, "readers"), 1)
                    .await
                    .map_err(redis_err)?;
                guard.unlock().await?;
            }
        }
        "capped" => {
            let semaphore = client.permit_expirable_semaphore(name);
            let permit = semaphore.acquire().await?;
            let _: i64 = record_max
                .key(aux(name, "active"))
                .key(aux(name, "active-max"))
                .invoke_async(&mut conn)
                .await
                .map_err(redis_err)?;
            tokio::time::sleep(Duration::from_millis(150)).await;
            let _: () = conn.decr(aux(name, "active"), 1).await.map_err(redis_err)?;
            permit.release().await?;
        }
        other => {
            return Err(Failure::new(
                crate::failure::EX_USAGE,
                format!("unknown demo role {other:?}"),
            ));
        }
    }
    Ok(())
}
