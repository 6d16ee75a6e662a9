//! The scenarios, run the same way for every library: workers in tokio tasks of one process,
//! timestamps from one monotonic clock, raw events written out for `bench/report.py`.
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use serde_json::{Value, json};
use tokio::sync::{Barrier, watch};

use crate::libs::{CALLER_RETRY, Lib, Worker};

/// How long a scenario may run past its window before its workers are abandoned.
pub const GRACE: Duration = Duration::from_secs(10);

/// Nanoseconds since `t0`.
pub fn ns(t0: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(t0).as_nanos() as u64
}

/// Calls per command the server has run so far (`INFO commandstats`).
pub async fn command_counts(conn: &mut MultiplexedConnection) -> BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap_or_default();
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .collect()
}

/// The calls made between two snapshots, without the snapshots' own INFO.
pub fn command_delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> Value {
    let mut out = serde_json::Map::new();
    for (name, calls) in after {
        let delta = calls - before.get(name).copied().unwrap_or(0);
        if delta > 0 && name != "info" {
            out.insert(name.clone(), json!(delta));
        }
    }
    Value::Object(out)
}

/// Holds `tasks` tasks until each is set up (`ready`, with the coordinator's own `ready`),
/// then starts them all at the instant the coordinator sends (`start`).
#[derive(Clone)]
struct StartLine {
    barrier: Arc<Barrier>,
    rx: watch::Receiver<Option<Instant>>,
}

impl StartLine {
    fn new(tasks: usize) -> (StartLine, watch::Sender<Option<Instant>>) {
        let (tx, rx) = watch::channel(None);
        let barrier = Arc::new(Barrier::new(tasks + 1));
        (StartLine { barrier, rx }, tx)
    }

    async fn ready(&self) {
        self.barrier.wait().await;
    }

    /// The start time, once sent.
    async fn start(&mut self) -> Result<Instant, String> {
        loop {
            if let Some(t0) = *self.rx.borrow() {
                return Ok(t0);
            }
            self.rx.changed().await.map_err(|e| e.to_string())?;
        }
    }
}

/// Sends the start time: now.
fn go(tx: &watch::Sender<Option<Instant>>) -> Instant {
    let t0 = Instant::now();
    let _ = tx.send(Some(t0));
    t0
}

/// The errors of the tasks' outcomes and the first of them, after `each` took in what a
/// finished task found (and gave its errors); a task that failed counts as one error.
fn tally<T>(
    outcomes: Vec<Result<T, String>>,
    mut each: impl FnMut(T) -> (u64, Option<String>),
) -> (u64, Option<String>) {
    let (mut errors, mut first_error) = (0, None);
    for outcome in outcomes {
        let (e, f) = outcome.map_or_else(|e| (1, Some(e)), &mut each);
        errors += e;
        if first_error.is_none() {
            first_error = f;
        }
    }
    (errors, first_error)
}

struct WorkerOutcome {
    events: Vec<[u64; 4]>,
    errors: u64,
    first_error: Option<String>,
}

/// `workers` tasks contend for `key` (a lock, or a semaphore of `permits`) for `window`,
/// each holding for `hold`. Events are `[worker, requested, acquired, released]` in ns from
/// the start; `released` is taken before the release call, so a hand-off gap includes the
/// release round trip.
pub async fn contended(
    imp: &Lib,
    conn: &mut MultiplexedConnection,
    key: &str,
    workers: usize,
    hold: Duration,
    window: Duration,
    permits: usize,
) -> Value {
    let (line, start_tx) = StartLine::new(workers);
    let mut handles = Vec::new();
    for w in 0..workers {
        let (imp, key, mut line) = (imp.clone(), key.to_owned(), line.clone());
        handles.push(tokio::spawn(async move {
            let worker = imp.worker(&key, permits).await;
            line.ready().await;
            let mut worker: Box<dyn Worker> = worker?;
            let t0 = line.start().await?;
            let end = t0 + window;
            let mut out = WorkerOutcome {
                events: Vec::new(),
                errors: 0,
                first_error: None,
            };
            loop {
                let requested = Instant::now();
                if requested >= end {
                    break;
                }
                if let Err(e) = worker.acquire().await {
                    out.errors += 1;
                    out.first_error.get_or_insert(e);
                    tokio::time::sleep(CALLER_RETRY).await;
                    continue;
                }
                let acquired = Instant::now();
                if !hold.is_zero() {
                    tokio::time::sleep(hold).await;
                }
                let released = Instant::now();
                if let Err(e) = worker.release().await {
                    out.errors += 1;
                    out.first_error.get_or_insert(e);
                }
                out.events.push([
                    w as u64,
                    ns(t0, requested),
                    ns(t0, acquired),
                    ns(t0, released),
                ]);
            }
            Ok::<_, String>(out)
        }));
    }
    line.ready().await;
    // The round trip of these moments (just before and just after), for the "in round
    // trips" figures and the limit: the machine's load drifts from run to run.
    let mut rtts = raw_rtts(conn, 500).await;
    let before = command_counts(conn).await;
    let t0 = go(&start_tx);
    let (outcomes, timed_out) = join_all_until(handles, t0 + window + GRACE).await;
    let after = command_counts(conn).await;
    rtts.extend(raw_rtts(conn, 500).await);
    rtts.sort_unstable();
    let rtt = rtts[rtts.len() / 2];
    let mut events = Vec::new();
    let (errors, first_error) = tally(outcomes, |o| {
        events.extend(o.events);
        (o.errors, o.first_error)
    });
    json!({
        "window_s": window.as_secs_f64(),
        "events": events,
        "errors": errors,
        "first_error": first_error,
        "timed_out": timed_out,
        "commands": command_delta(&before, &after),
        "rtt_p50_ns": rtt,
    })
}

/// `samples` raw EVALSHA round trips on `conn` (ns).
async fn raw_rtts(conn: &mut MultiplexedConnection, samples: usize) -> Vec<u64> {
    let script = redis::Script::new(crate::RAW_SCRIPT);
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        crate::raw_eval(conn, &script, "kb:raw:rtt").await;
        times.push(t.elapsed().as_nanos() as u64);
    }
    times
}

/// Awaits every handle until `deadline`, then aborts the rest. Returns the finished results
/// and whether any had to be abandoned.
async fn join_all_until<T: Send + 'static>(
    handles: Vec<tokio::task::JoinHandle<Result<T, String>>>,
    deadline: Instant,
) -> (Vec<Result<T, String>>, bool) {
    let mut out = Vec::new();
    let mut timed_out = false;
    for mut handle in handles {
        match tokio::time::timeout_at(deadline.into(), &mut handle).await {
            Ok(Ok(result)) => out.push(result),
            Ok(Err(e)) => out.push(Err(format!("worker panicked: {e}"))),
            Err(_) => {
                handle.abort();
                timed_out = true;
            }
        }
    }
    (out, timed_out)
}

/// One worker: lock + unlock, back to back, for `window` or `max` samples. Each sample is
/// interleaved with two raw EVALSHA round trips on `raw` and, for a peer, with a lock + unlock
/// of keylatch's reentrant lock (`reference`), so both ratios are measured under the same load.
/// Commands per lock + unlock come from a separate pass of the library alone.
pub async fn uncontended(
    imp: &Lib,
    reference: Option<&Lib>,
    conn: &mut MultiplexedConnection,
    raw: &MultiplexedConnection,
    key: &str,
    window: Duration,
    max: usize,
) -> Value {
    const COUNTED: usize = 200;
    let imp = imp.clone();
    let reference = reference.cloned();
    let key = key.to_owned();
    let mut raw = raw.clone();
    let mut info = conn.clone();
    let handle = tokio::spawn(async move {
        let script = redis::Script::new(crate::RAW_SCRIPT);
        let mut worker = imp.worker(&key, 1).await?;
        let mut reference = match &reference {
            Some(r) => Some(r.worker(&format!("{key}:keylatch"), 1).await?),
            None => None,
        };
        // Warm up: connections, script loading.
        for _ in 0..20 {
            worker.acquire().await?;
            worker.release().await?;
            if let Some(r) = reference.as_mut() {
                r.acquire().await?;
                r.release().await?;
            }
        }
        let before = command_counts(&mut info).await;
        for _ in 0..COUNTED {
            worker.acquire().await?;
            worker.release().await?;
        }
        let commands = command_delta(&before, &command_counts(&mut info).await);
        let start = Instant::now();
        let (mut latencies, mut raw_pairs, mut keylatch) = (Vec::new(), Vec::new(), Vec::new());
        while latencies.len() < max && start.elapsed() < window {
            let t = Instant::now();
            crate::raw_eval(&mut raw, &script, "kb:raw:s1").await;
            crate::raw_eval(&mut raw, &script, "kb:raw:s1").await;
            raw_pairs.push(t.elapsed().as_nanos() as u64);
            if let Some(r) = reference.as_mut() {
                let t = Instant::now();
                r.acquire().await?;
                r.release().await?;
                keylatch.push(t.elapsed().as_nanos() as u64);
            }
            let t = Instant::now();
            worker.acquire().await?;
            worker.release().await?;
            latencies.push(t.elapsed().as_nanos() as u64);
        }
        Ok::<_, String>(json!({
            "latencies_ns": latencies,
            "raw_pair_ns": raw_pairs,
            "keylatch_ns": keylatch,
            "commands": commands,
            "commands_acquisitions": COUNTED,
        }))
    });
    let (mut results, timed_out) =
        join_all_until(vec![handle], Instant::now() + window + GRACE).await;
    let mut out = match results.pop() {
        Some(Ok(v)) => v,
        Some(Err(e)) => json!({"latencies_ns": [], "first_error": e, "errors": 1}),
        None => json!({"latencies_ns": [], "first_error": "timed out", "errors": 1}),
    };
    let map = out.as_object_mut().unwrap();
    map.insert("window_s".into(), json!(window.as_secs_f64()));
    map.insert("timed_out".into(), json!(timed_out));
    map.entry("errors").or_insert(json!(0));
    out
}

/// `tasks` tasks lock + unlock keys spread over `keys` names for `window`.
pub async fn many_keys(
    imp: &Lib,
    conn: &mut MultiplexedConnection,
    prefix: &str,
    tasks: usize,
    keys: usize,
    window: Duration,
) -> Value {
    let (line, start_tx) = StartLine::new(tasks);
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (imp, prefix, mut line) = (imp.clone(), prefix.to_owned(), line.clone());
        handles.push(tokio::spawn(async move {
            line.ready().await;
            let t0 = line.start().await?;
            let end = t0 + window;
            let (mut in_window, mut total, mut errors, mut first_error) = (0u64, 0u64, 0u64, None);
            let mut i = 0usize;
            while Instant::now() < end {
                let key = format!("{prefix}:{}", (t * 7919 + i * 104_729) % keys);
                i += 1;
                let result = async {
                    let mut worker = imp.worker(&key, 1).await?;
                    worker.acquire().await?;
                    let acquired = Instant::now();
                    worker.release().await?;
                    Ok::<_, String>(acquired)
                }
                .await;
                match result {
                    Ok(acquired) => {
                        total += 1;
                        in_window += u64::from(acquired < end);
                    }
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert(e);
                        tokio::time::sleep(CALLER_RETRY).await;
                    }
                }
            }
            Ok::<_, String>((in_window, total, errors, first_error))
        }));
    }
    line.ready().await;
    let before = command_counts(conn).await;
    let t0 = go(&start_tx);
    let (outcomes, timed_out) = join_all_until(handles, t0 + window + GRACE).await;
    let after = command_counts(conn).await;
    let (mut in_window, mut total) = (0u64, 0u64);
    let (errors, first_error) = tally(outcomes, |(w, t, e, f)| {
        in_window += w;
        total += t;
        (e, f)
    });
    json!({
        "window_s": window.as_secs_f64(),
        "acquired_in_window": in_window,
        "acquired_total": total,
        "errors": errors,
        "first_error": first_error,
        "timed_out": timed_out,
        "commands": command_delta(&before, &after),
    })
}

/// Sums the runs of `many_keys` (slices of one scenario interleaved with other libraries).
pub fn merge_many_keys(parts: &[Value]) -> Value {
    let sum = |field: &str| parts.iter().filter_map(|p| p[field].as_f64()).sum::<f64>();
    let mut commands = serde_json::Map::new();
    for p in parts {
        for (k, v) in p["commands"].as_object().into_iter().flatten() {
            let prev = commands.get(k).and_then(Value::as_u64).unwrap_or(0);
            commands.insert(k.clone(), json!(prev + v.as_u64().unwrap_or(0)));
        }
    }
    json!({
        "window_s": sum("window_s"),
        "acquired_in_window": sum("acquired_in_window") as u64,
        "acquired_total": sum("acquired_total") as u64,
        "errors": sum("errors") as u64,
        "first_error": parts.iter().find_map(|p| p["first_error"].as_str()),
        "timed_out": parts.iter().any(|p| p["timed_out"].as_bool() == Some(true)),
        "commands": commands,
    })
}

/// Acquisitions per second of merged `many_keys` runs.
pub fn rate(v: &Value) -> f64 {
    v["acquired_in_window"].as_f64().unwrap_or(0.0) / v["window_s"].as_f64().unwrap_or(1.0)
}
