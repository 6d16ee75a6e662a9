//! A worker process for the fault suite. It takes a lock in a loop (or holds it once), works
//! on an oracle counter kept on a second redis-server, and logs each event as a JSON line on
//! stdout for the checker (`keylatch_tests::checker`).
//!
//! ```text
//! keylatch-test-fault-worker --url URL --oracle URL --name NAME --id N
//!     [--iterations N] [--hold-ms N] [--watchdog-ms N] [--lease-ms N]
//!     [--response-timeout-ms N] [--hold-forever]
//!     [--mode reentrant|fair|read|write|permit|zk-permit] [--waiter-timeout-ms N] [--permits N]
//!     [--run-ms N] [--replicas N] [--replicas-timeout-ms N]
//! keylatch-test-fault-worker --mode redlock --url URL1,URL2,… --oracle URL --name NAME --id N
//!     [--run-ms N] [--hold-ms N] [--watchdog-ms N]
//! ```
//! `--run-ms` ends the loop once that much time has passed (else after `--iterations`);
//! `--replicas` turns replica acknowledgement on. With a `zk://` URL the lock modes run on
//! ZooKeeper, and `zk-permit` takes a permit of the facade's semaphore of `--permits` leases (`with_permits`).
//! Events: `acquired` (t, token, until: the local validity deadline, all in µs of wall-clock
//! time), `write` (ok: accepted by the fenced oracle), `released` (t, before the unlock call),
//! `unlock` (ok, error), `check` (lost), `error`, `done`.
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keylatch::DistributedLock;
use keylatch::redis::{self, AsyncCommands};
use tokio::time::Instant;

/// Writes the counter only if `token` is at least the newest token the oracle has seen.
const FENCED_SET: &str = r"
local newest = tonumber(redis.call('get', KEYS[2]) or '0')
if tonumber(ARGV[1]) < newest then return 0 end
redis.call('set', KEYS[2], ARGV[1])
redis.call('set', KEYS[1], ARGV[2])
return 1
";

fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros()
}

fn emit(line: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn until_us(guard: &keylatch::LockGuard) -> u128 {
    match guard.valid_until() {
        Some(until) => now_us() + until.saturating_duration_since(Instant::now()).as_micros(),
        None => now_us(),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut opts: HashMap<String, String> = HashMap::new();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let key = flag.trim_start_matches("--").to_owned();
        if key == "hold-forever" {
            opts.insert(key, String::new());
        } else {
            opts.insert(key, args.next().ok_or("a flag without a value")?);
        }
    }
    let get = |k: &str| opts.get(k).cloned();
    let num = |k: &str, default: u64| get(k).and_then(|v| v.parse().ok()).unwrap_or(default);
    let id = num("id", 0);
    let name = get("name").ok_or("--name")?;
    let mut config = keylatch::Config::builder()
        .url(get("url").ok_or("--url")?)
        .watchdog_timeout(Duration::from_millis(num("watchdog-ms", 1000)))
        .response_timeout(Duration::from_millis(num("response-timeout-ms", 1000)))
        .fallback_poll(Duration::from_millis(num("poll-ms", 500)));
    config = config.connect_timeout(Duration::from_secs(2));
    if let Some(replicas) = get("replicas") {
        config = config.replicas(
            replicas.parse()?,
            Duration::from_millis(num("replicas-timeout-ms", 500)),
        );
    }
    let run_until = get("run-ms")
        .and_then(|v| v.parse().ok())
        .map(|ms| Instant::now() + Duration::from_millis(ms));
    if get("mode").as_deref() == Some("redlock") {
        let urls = get("url").ok_or("--url")?;
        let settings = config.build()?;
        return redlock_loop(
            &urls,
            settings,
            &get("oracle").ok_or("--oracle")?,
            &name,
            id,
            Duration::from_millis(num("hold-ms", 0)),
            run_until.unwrap_or_else(|| Instant::now() + Duration::from_secs(10)),
        )
        .await;
    }
    let client = keylatch::Client::connect_with(config.build()?).await?;
    let lock: Arc<dyn DistributedLock> = match get("mode").as_deref().unwrap_or("reentrant") {
        "reentrant" => Arc::new(client.lock(&name).with_fencing(true)),
        "fair" => Arc::new(
            client
                .fair_lock(&name)
                .with_fencing(true)
                .with_waiter_timeout(Duration::from_millis(num("waiter-timeout-ms", 5000))),
        ),
        "read" => Arc::new(client.rw_lock(&name).read_lock()),
        "write" => Arc::new(client.rw_lock(&name).write_lock()),
        "permit" => {
            let semaphore = client.permit_expirable_semaphore(&name);
            let permits = u32::try_from(num("permits", 1))?;
            semaphore.try_set_permits(permits).await?;
            Arc::new(semaphore.as_lock())
        }
        "zk-permit" => {
            if client.as_zookeeper().is_none() {
                return Err("--mode zk-permit needs a zk:// URL".into());
            }
            let permits = u32::try_from(num("permits", 1))?;
            Arc::new(client.semaphore(&name).with_permits(permits).as_lock())
        }
        other => return Err(format!("unknown mode {other}").into()),
    };
    let oracle_client = redis::Client::open(get("oracle").ok_or("--oracle")?)?;
    let mut oracle = oracle_client.get_multiplexed_async_connection().await?;
    let counter = format!("{name}:counter");
    let newest = format!("{name}:newest-token");
    let fenced = redis::Script::new(FENCED_SET);
    let lease = get("lease-ms")
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis);
    let hold = Duration::from_millis(num("hold-ms", 0));
    emit(serde_json::json!({"ev": "ready", "w": id, "pid": std::process::id()}));

    if opts.contains_key("hold-forever") {
        let guard = match lease {
            Some(lease) => lock.lock_with_lease(lease).await?,
            None => lock.lock().await?,
        };
        let token = guard.fencing_token().unwrap_or(0);
        emit(
            serde_json::json!({"ev": "acquired", "w": id, "t": now_us(), "token": token, "until": until_us(&guard)}),
        );
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let lost = guard.is_lost();
            emit(
                serde_json::json!({"ev": "check", "w": id, "t": now_us(), "lost": lost, "until": until_us(&guard)}),
            );
            let ok: i64 = fenced
                .key(&counter)
                .key(&newest)
                .arg(token)
                .arg(token)
                .invoke_async(&mut oracle)
                .await?;
            emit(
                serde_json::json!({"ev": "write", "w": id, "t": now_us(), "ok": ok == 1, "lost": lost}),
            );
            if lost {
                let result = guard.unlock().await;
                emit(
                    serde_json::json!({"ev": "unlock", "w": id, "ok": result.is_ok(), "error": result.err().map(|e| e.to_string())}),
                );
                return Ok(());
            }
        }
    }

    let iterations = if run_until.is_some() {
        u64::MAX
    } else {
        num("iterations", 10)
    };
    for i in 0..iterations {
        if run_until.is_some_and(|end| Instant::now() >= end) {
            break;
        }
        let acquired = match lease {
            Some(lease) => lock.lock_with_lease(lease).await,
            None => lock.lock().await,
        };
        let guard = match acquired {
            Ok(guard) => guard,
            Err(err) => {
                emit(
                    serde_json::json!({"ev": "error", "w": id, "i": i, "op": "lock", "error": err.to_string()}),
                );
                continue;
            }
        };
        let token = guard.fencing_token().unwrap_or(0);
        emit(
            serde_json::json!({"ev": "acquired", "w": id, "i": i, "t": now_us(), "token": token, "until": until_us(&guard)}),
        );
        let value: Option<u64> = oracle.get(&counter).await?;
        if hold.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(hold).await;
        }
        if guard.is_lost() {
            emit(serde_json::json!({"ev": "check", "w": id, "i": i, "t": now_us(), "lost": true}));
        } else {
            let ok: i64 = fenced
                .key(&counter)
                .key(&newest)
                .arg(token)
                .arg(value.unwrap_or(0) + 1)
                .invoke_async(&mut oracle)
                .await?;
            emit(serde_json::json!({"ev": "write", "w": id, "i": i, "t": now_us(), "ok": ok == 1}));
        }
        emit(
            serde_json::json!({"ev": "released", "w": id, "i": i, "t": now_us(), "until": until_us(&guard)}),
        );
        let result = guard.unlock().await;
        if let Err(err) = &result {
            emit(
                serde_json::json!({"ev": "unlock", "w": id, "i": i, "ok": false, "error": err.to_string()}),
            );
        }
    }
    client.wait_idle().await;
    emit(serde_json::json!({"ev": "done", "w": id}));
    Ok(())
}

/// `--mode redlock`: a RedLock over the servers of `urls` (comma-separated); the critical
/// section reads the oracle counter and writes it back plus one (no fencing: a RedLock has no
/// token, so an overlap shows as a lost increment).
async fn redlock_loop(
    urls: &str,
    settings: keylatch::Config,
    oracle_url: &str,
    name: &str,
    id: u64,
    hold: Duration,
    until: Instant,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut clients = Vec::new();
    for url in urls.split(',') {
        let mut config = settings.clone();
        config.url = url.into();
        clients.push(keylatch::Client::connect_with(config).await?);
    }
    let lock = keylatch::RedLock::new(
        clients
            .iter()
            .map(|c| Arc::new(c.lock(name)) as Arc<dyn DistributedLock>),
    )?;
    let oracle_client = redis::Client::open(oracle_url)?;
    let mut oracle = oracle_client.get_multiplexed_async_connection().await?;
    let counter = format!("{name}:counter");
    emit(serde_json::json!({"ev": "ready", "w": id, "pid": std::process::id()}));
    let mut i = 0u64;
    while Instant::now() < until {
        i += 1;
        let guard = match lock.try_lock_for(Duration::from_secs(2), None).await {
            Ok(Some(guard)) => guard,
            Ok(None) => continue,
            Err(err) => {
                emit(
                    serde_json::json!({"ev": "error", "w": id, "i": i, "op": "lock", "error": err.to_string()}),
                );
                continue;
            }
        };
        let valid_us = |g: &keylatch::RedLockGuard| match g.valid_until() {
            Some(u) => now_us() + u.saturating_duration_since(Instant::now()).as_micros(),
            None => now_us(),
        };
        emit(
            serde_json::json!({"ev": "acquired", "w": id, "i": i, "t": now_us(), "token": 0, "until": valid_us(&guard), "parts": guard.guards().len()}),
        );
        let value: Option<u64> = oracle.get(&counter).await?;
        tokio::time::sleep(hold).await;
        if guard.is_lost() {
            emit(serde_json::json!({"ev": "check", "w": id, "i": i, "t": now_us(), "lost": true}));
        } else {
            let _: () = oracle.set(&counter, value.unwrap_or(0) + 1).await?;
            emit(serde_json::json!({"ev": "write", "w": id, "i": i, "t": now_us(), "ok": true}));
        }
        emit(
            serde_json::json!({"ev": "released", "w": id, "i": i, "t": now_us(), "until": valid_us(&guard)}),
        );
        if let Err(err) = guard.unlock().await {
            emit(
                serde_json::json!({"ev": "unlock", "w": id, "i": i, "ok": false, "error": err.to_string()}),
            );
        }
    }
    // Undos bound for a dead server would be retried for the whole settle window.
    for client in &clients {
        let _ = tokio::time::timeout(Duration::from_secs(2), client.wait_idle()).await;
    }
    emit(serde_json::json!({"ev": "done", "w": id}));
    Ok(())
}
