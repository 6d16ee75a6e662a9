//! The `worker` subcommand: one client process of a workload (reentrant, fair, redlock,
//! semaphore, rwlock or multilock), and the small helpers the harness runs inside namespaces (`probe`,
//! `dump-register`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use keylatch::redis::{self, AsyncCommands as _};
use keylatch::{Client, Config};

use crate::clock::now_ns;
use crate::history::{Event, HoldMode, Kind, Mode, Op};
use crate::locks::{Guard, Lock};
/// The register's value (the last accepted token) on the oracle.
pub const REGISTER: &str = "klc:register";
/// The register's log of accepted writes, `"<token> <write id>"`, in order.
pub const REGISTER_LOG: &str = "klc:register:log";

/// The unfenced counter on the oracle: a plain key every update reads and writes back plus
/// one, with no token. Two holders at once show here as a lost update.
pub const COUNTER: &str = "klc:counter";

/// The clock drift the docs state for a fixed lease (docs/choosing-a-primitive.md): 1 % of
/// the lease plus 2 ms. A fixed-lease hold ends, for the worker and the checker alike, at the
/// acquire's invoke + the lease less this.
pub fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

/// The fenced register: accepts a write only if its token is greater than the last accepted
/// one, and logs it.
const REGISTER_LUA: &str = r"
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
if token > last then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('RPUSH', KEYS[2], ARGV[1] .. ' ' .. ARGV[2])
  return 1
end
return 0
";

/// How long the register's oracle gets to answer.
const ORACLE_TIMEOUT: Duration = Duration::from_secs(2);

/// A worker's settings (see the `worker` subcommand).
#[derive(Debug, Clone)]
pub struct WorkerArgs {
    /// 1-based; the process is `c<id>`.
    pub id: usize,
    /// The lock servers' URLs (one, or a RedLock's).
    pub servers: Vec<String>,
    /// What to run.
    pub workload: crate::Workload,
    /// The semaphore's permits.
    pub permits: u32,
    /// Replicas every acquisition waits for.
    pub replicas: u32,
    /// The register's URL.
    pub oracle: String,
    /// The run's seed.
    pub seed: u64,
    /// When to stop starting operations (host monotonic ns).
    pub deadline_ns: u64,
    /// The fixed lease of each acquisition (lease mode), or the watchdog timeout.
    pub lease_ms: u64,
    /// A fixed lease, or the watchdog.
    pub mode: HoldMode,
    /// The longest hold.
    pub max_hold_ms: u64,
}

fn emit(e: &Event) {
    if let Ok(line) = serde_json::to_string(e) {
        println!("{line}");
    }
}

struct Register {
    url: String,
    conn: Option<redis::aio::MultiplexedConnection>,
    script: redis::Script,
}

impl Register {
    async fn connection(&mut self) -> Result<redis::aio::MultiplexedConnection, String> {
        if let Some(c) = &self.conn {
            return Ok(c.clone());
        }
        let client = redis::Client::open(self.url.as_str()).map_err(|e| e.to_string())?;
        let conn = tokio::time::timeout(ORACLE_TIMEOUT, client.get_multiplexed_async_connection())
            .await
            .map_err(|_| "connect timed out".to_owned())?
            .map_err(|e| e.to_string())?;
        self.conn = Some(conn.clone());
        Ok(conn)
    }

    /// The counter's value (0 when unset); `Err` unknown.
    async fn read_counter(&mut self) -> Result<u64, String> {
        let mut conn = self.connection().await?;
        let call = conn.get::<_, Option<u64>>(COUNTER);
        self.finish(tokio::time::timeout(ORACLE_TIMEOUT, call).await)
            .map(Option::unwrap_or_default)
    }

    /// Sets the counter to `value`, whatever it holds; `Err` unknown.
    async fn write_counter(&mut self, value: u64) -> Result<(), String> {
        let mut conn = self.connection().await?;
        let call = conn.set::<_, _, ()>(COUNTER, value);
        self.finish(tokio::time::timeout(ORACLE_TIMEOUT, call).await)
    }

    fn finish<T>(
        &mut self,
        r: Result<redis::RedisResult<T>, tokio::time::error::Elapsed>,
    ) -> Result<T, String> {
        match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                self.conn = None;
                Err(e.to_string())
            }
            Err(_) => {
                self.conn = None;
                Err("timed out".to_owned())
            }
        }
    }

    /// `Ok(true)` accepted, `Ok(false)` refused, `Err` unknown.
    async fn write(&mut self, token: u64, id: &str) -> Result<bool, String> {
        let mut conn = self.connection().await?;
        let mut call = self.script.key(REGISTER);
        call.key(REGISTER_LOG).arg(token).arg(id);
        match tokio::time::timeout(ORACLE_TIMEOUT, call.invoke_async::<i64>(&mut conn)).await {
            Ok(Ok(n)) => Ok(n == 1),
            Ok(Err(e)) => {
                self.conn = None;
                Err(e.to_string())
            }
            Err(_) => {
                self.conn = None;
                Err("timed out".to_owned())
            }
        }
    }
}

/// Connects to `url`; on ZooKeeper (`zk://`) with a session timeout of `lease`.
async fn connect(
    url: &str,
    replicas: u32,
    lease: Duration,
    deadline_ns: u64,
) -> Result<Client, String> {
    let mut config = Config::builder().url(url.to_owned());
    // The watchdog mode's timeout; on ZooKeeper the session timeout.
    config = config.watchdog_timeout(lease);
    let config = config
        .replicas(replicas, Duration::from_millis(500))
        .connect_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1))
        .build()
        .map_err(|e| e.to_string())?;
    loop {
        match Client::connect_with(config.clone()).await {
            Ok(c) => return Ok(c),
            Err(e) if now_ns() >= deadline_ns => return Err(e.to_string()),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The clients (one per URL) and the workload's lock on them.
async fn open(args: &WorkerArgs, lease: Duration) -> Result<(Vec<Client>, Lock), String> {
    let mut clients = Vec::new();
    for url in &args.servers {
        clients.push(connect(url, args.replicas, lease, args.deadline_ns).await?);
    }
    let lock = Lock::new(args.workload, &clients, args.permits).await?;
    Ok((clients, lock))
}

/// Runs the worker until its deadline; every operation goes to stdout as JSON lines.
///
/// # Errors
/// The lock server could not be reached before the deadline, or the configuration is invalid.
///
/// # Cancel safety
/// Not meant to be cancelled: the process ends with it.
pub async fn worker(args: WorkerArgs) -> Result<(), String> {
    let me = format!("c{}", args.id);
    let lease = Duration::from_millis(args.lease_ms);
    // ZooKeeper: no fixed lease; a hold lasts as long as the session, whose timeout is the
    // lease: the watchdog mode whatever the mode asked.
    let zk = args.servers.iter().any(|u| u.starts_with("zk://"));
    let (clients, lock) = open(&args, lease).await?;
    let permits = match args.workload {
        crate::Workload::Semaphore => Some(args.permits),
        _ => None,
    };
    let mut register = Register {
        url: args.oracle.clone(),
        conn: None,
        script: redis::Script::new(REGISTER_LUA),
    };
    let mut rng =
        fastrand::Rng::with_seed(args.seed ^ (args.id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut writes = 0u64;
    let fixed = (args.mode == HoldMode::Lease && !zk).then_some(lease);
    while now_ns() < args.deadline_ns {
        let mut invoke = Event::new(&me, now_ns(), Kind::Invoke, Op::Acquire);
        match fixed {
            Some(_) => invoke.lease_ms = Some(args.lease_ms),
            None => invoke.watchdog_ms = Some(args.lease_ms),
        }
        invoke.permits = permits;
        let choice = lock.choose(&mut rng);
        invoke.mode = choice.mode;
        invoke.names = choice.names.clone();
        invoke.fifo = lock.fifo().then_some(true);
        let invoked = invoke.time;
        emit(&invoke);
        let guard = match lock
            .try_lock_for(&choice, Duration::from_secs(3), fixed)
            .await
        {
            Ok(Some(g)) => g,
            Ok(None) => {
                emit(
                    &Event::new(&me, now_ns(), Kind::Fail, Op::Acquire).detail("wait bound passed"),
                );
                continue;
            }
            Err(e) => {
                emit(&Event::new(&me, now_ns(), Kind::Info, Op::Acquire).detail(chain(&e)));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        emit(&acquired(&me, &guard));
        // Whether the hold still stands by what the worker itself knows: a fixed lease by its
        // own clock from its invoke (never the library's validity); a watchdog hold until the
        // guard says it is lost (the moment is recorded: the checker ends the hold there).
        let end = fixed.map(|l| invoked + (l - drift(l)).as_nanos() as u64);
        // A watchdog hold's loss is recorded the moment the library signals it (`lost()`
        // completes), as an application that listens for it learns it; a loss read first by
        // the check below (a pause past the deadline) is recorded there. Whichever comes
        // first records it, once.
        let lost_seen = Arc::new(AtomicBool::new(false));
        let watcher = end.is_none().then(|| {
            let lost = guard.lost();
            let (seen, me) = (lost_seen.clone(), me.clone());
            tokio::spawn(async move {
                lost.await;
                if !seen.swap(true, Ordering::SeqCst) {
                    emit(&Event::new(&me, now_ns(), Kind::Ok, Op::Lost));
                }
            })
        });
        let still_held = |guard: &Guard| -> bool {
            match end {
                Some(end) => now_ns() < end,
                None if lost_seen.load(Ordering::SeqCst) => false,
                None if guard.is_lost() => {
                    if !lost_seen.swap(true, Ordering::SeqCst) {
                        emit(&Event::new(&me, now_ns(), Kind::Ok, Op::Lost));
                    }
                    false
                }
                None => true,
            }
        };
        let hold = rng.u64(0..=args.max_hold_ms);
        let before = rng.u64(0..=hold);
        // Read holds and a semaphore's permits (more than one) share: they make no update
        // (several at once would lose updates by design) and no fenced write.
        let exclusive = choice.mode != Some(Mode::Read) && permits.is_none_or(|p| p <= 1);
        // The unfenced read-modify-write: read now, write back after part of the hold.
        let read = if exclusive {
            emit(&Event::new(&me, now_ns(), Kind::Invoke, Op::Update));
            match register.read_counter().await {
                Ok(v) => Some(v),
                Err(e) => {
                    emit(&Event::new(&me, now_ns(), Kind::Fail, Op::Update).detail(e));
                    None
                }
            }
        } else {
            None
        };
        // One fenced write in the middle of the hold: a holder paused before it writes with a
        // token that may be stale by then.
        tokio::time::sleep(Duration::from_millis(before)).await;
        if let Some(token) = guard.fencing_token()
            && exclusive
        {
            writes += 1;
            let id = format!("{me}-{writes}");
            let mut inv = Event::new(&me, now_ns(), Kind::Invoke, Op::Write).token(token);
            inv.write_id = Some(id.clone());
            emit(&inv);
            let done = match register.write(token, &id).await {
                Ok(true) => Event::new(&me, now_ns(), Kind::Ok, Op::Write),
                Ok(false) => Event::new(&me, now_ns(), Kind::Fail, Op::Write).detail("refused"),
                Err(e) => Event::new(&me, now_ns(), Kind::Info, Op::Write).detail(e),
            };
            emit(&done);
        }
        let rest = hold - before;
        let back = rng.u64(0..=rest);
        tokio::time::sleep(Duration::from_millis(back)).await;
        if let Some(v) = read {
            // As a careful user would: no write once the hold is known to be over.
            let done = if !still_held(&guard) {
                Event::new(&me, now_ns(), Kind::Fail, Op::Update)
                    .detail("hold over before the write-back")
            } else {
                match register.write_counter(v + 1).await {
                    Ok(()) => {
                        let mut ok = Event::new(&me, now_ns(), Kind::Ok, Op::Update);
                        ok.value = Some(v + 1);
                        ok
                    }
                    Err(e) => {
                        let mut info = Event::new(&me, now_ns(), Kind::Info, Op::Update).detail(e);
                        info.value = Some(v + 1);
                        info
                    }
                }
            };
            emit(&done);
        }
        tokio::time::sleep(Duration::from_millis(rest - back)).await;
        let _ = still_held(&guard);
        if let Some(watcher) = watcher {
            // A released hold's `lost()` completes at its last deadline: not a loss.
            watcher.abort();
        }
        emit(&Event::new(&me, now_ns(), Kind::Invoke, Op::Release));
        let done = match guard.unlock().await {
            Ok(()) => Event::new(&me, now_ns(), Kind::Ok, Op::Release),
            Err(e @ keylatch::Error::NotHeld { .. }) => {
                Event::new(&me, now_ns(), Kind::Fail, Op::Release).detail(e.to_string())
            }
            Err(e) => Event::new(&me, now_ns(), Kind::Info, Op::Release).detail(chain(&e)),
        };
        emit(&done);
        tokio::time::sleep(Duration::from_millis(rng.u64(0..=50))).await;
    }
    for client in &clients {
        let _ = tokio::time::timeout(Duration::from_secs(5), client.shutdown()).await;
    }
    Ok(())
}

/// `err` and its sources, `: `-separated (the store's own error says what went wrong).
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

/// The `ok` of an acquisition: its token and owner. No validity deadline: the checker takes
/// the hold's end from what the worker asked (the lease) and saw (a loss, its release).
fn acquired(me: &str, guard: &Guard) -> Event {
    let mut ok = Event::new(me, now_ns(), Kind::Ok, Op::Acquire);
    ok.token = guard.fencing_token();
    ok.owner = guard.owner();
    ok
}

/// Waits until the server at `url` answers PING, at most `timeout`.
///
/// # Errors
/// A bad URL, or no answer within `timeout`.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn probe(url: &str, timeout: Duration) -> Result<(), String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let start = std::time::Instant::now();
    loop {
        let attempt = async {
            let mut c = client.get_multiplexed_async_connection().await?;
            redis::cmd("PING").query_async::<String>(&mut c).await
        };
        match tokio::time::timeout(Duration::from_millis(500), attempt).await {
            Ok(Ok(_)) => return Ok(()),
            _ if start.elapsed() >= timeout => {
                return Err(format!("no answer from {url} within {timeout:?}"));
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Prints the wall clock of the redis server at `url` (its TIME), in Unix milliseconds.
///
/// # Errors
/// A bad URL, or no answer within 2 s.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn server_time(url: &str) -> Result<(), String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let work = async {
        let mut c = client.get_multiplexed_async_connection().await?;
        redis::cmd("TIME").query_async::<(u64, u64)>(&mut c).await
    };
    let (secs, micros) = tokio::time::timeout(ORACLE_TIMEOUT, work)
        .await
        .map_err(|_| "the server did not answer".to_owned())?
        .map_err(|e| e.to_string())?;
    println!("{}", secs * 1000 + micros / 1000);
    Ok(())
}

/// Prints the register's log and the counter as `{"log": [[token, write id], …], "counter": n}`.
///
/// # Errors
/// A bad URL, an oracle that does not answer within 2 s, an entry that is not `<token> <id>`.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn dump_register(url: &str) -> Result<(), String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let work = async {
        let mut c = client.get_multiplexed_async_connection().await?;
        let entries = c.lrange::<_, Vec<String>>(REGISTER_LOG, 0, -1).await?;
        let counter = c.get::<_, Option<u64>>(COUNTER).await?;
        Ok::<_, redis::RedisError>((entries, counter.unwrap_or_default()))
    };
    let (entries, counter) = tokio::time::timeout(ORACLE_TIMEOUT, work)
        .await
        .map_err(|_| "the oracle did not answer".to_owned())?
        .map_err(|e| e.to_string())?;
    let mut log = Vec::new();
    for entry in entries {
        let (token, id) = entry
            .split_once(' ')
            .ok_or_else(|| format!("bad register entry {entry:?}"))?;
        let token: u64 = token
            .parse()
            .map_err(|_| format!("bad register entry {entry:?}"))?;
        log.push((token, id.to_owned()));
    }
    let dump = serde_json::json!({ "log": log, "counter": counter });
    println!("{dump}");
    Ok(())
}
