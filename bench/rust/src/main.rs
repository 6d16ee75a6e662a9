//! Rust side of `scripts/bench.sh`: keylatch and the Rust peer libraries through the same
//! scenarios, plus the raw EVALSHA baseline (redis-rs). Writes one JSON object per run to
//! `--out`; `bench/report.py` turns them into tables and plots.
//!
//! ```text
//! bench-rust --url redis://127.0.0.1:PORT --out results/rust.jsonl [--scale 1.0]
//!            [--only keylatch,rslock] [--scenarios s1,s2,s3,s4,s5,raw]
//! bench-rust --redlock-urls redis://127.0.0.1:P1,redis://127.0.0.1:P2,... --out FILE
//!            [--scale 1.0]     # keylatch's RedLock against rslock over those servers
//! ```
mod harness;
mod libs;
mod redlock;

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use serde_json::{Value, json};

use harness::{
    command_counts, command_delta, contended, many_keys, merge_many_keys, rate, uncontended,
};
use libs::{Kind, Variant};

/// The trivial script of the raw baseline: as little as a lock's acquire does to one key.
pub(crate) const RAW_SCRIPT: &str = "return redis.call('exists', KEYS[1])";

struct Args {
    url: String,
    out: String,
    scale: f64,
    only: Option<Vec<String>>,
    scenarios: Vec<String>,
    /// The runner whose figures this run's raw baseline is for (`--tag python`).
    tag: String,
    /// Independent servers for the RedLock comparison (`--redlock-urls`): that alone runs.
    redlock_urls: Vec<String>,
}

fn parse_args() -> Args {
    let mut args = Args {
        url: String::new(),
        out: String::new(),
        scale: 1.0,
        only: None,
        scenarios: ["raw", "s1", "s2", "s3", "s4", "s5"]
            .map(String::from)
            .to_vec(),
        tag: "rust".into(),
        redlock_urls: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--url" => args.url = value(),
            "--out" => args.out = value(),
            "--scale" => args.scale = value().parse().expect("--scale: a number"),
            "--only" => args.only = Some(value().split(',').map(String::from).collect()),
            "--scenarios" => args.scenarios = value().split(',').map(String::from).collect(),
            "--tag" => args.tag = value(),
            "--redlock-urls" => {
                args.redlock_urls = value()
                    .split(',')
                    .filter(|u| !u.is_empty())
                    .map(String::from)
                    .collect();
            }
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(
        (!args.url.is_empty() || !args.redlock_urls.is_empty()) && !args.out.is_empty(),
        "--url (or --redlock-urls) and --out are required"
    );
    args
}

struct Out {
    file: std::fs::File,
    run: String,
}

impl Out {
    fn write(&mut self, variant: Option<&Variant>, scenario: &str, params: Value, data: Value) {
        let mut record = json!({ "runner": "rust", "scenario": scenario });
        let map = record.as_object_mut().unwrap();
        if let Some(v) = variant {
            map.insert("lib".into(), json!(v.lib));
            map.insert("variant".into(), json!(v.variant));
            map.insert("label".into(), json!(v.label));
            map.insert("kind".into(), json!(format!("{:?}", v.kind).to_lowercase()));
            map.insert("tuned".into(), json!(v.tuned));
            map.insert("note".into(), json!(v.note));
        }
        for (k, val) in params
            .as_object()
            .into_iter()
            .flatten()
            .chain(data.as_object().into_iter().flatten())
        {
            map.insert(k.clone(), val.clone());
        }
        writeln!(self.file, "{record}").expect("write results");
    }

    /// Prints `what` the run of `scenario` was with its summary, and writes it.
    fn report(&mut self, v: &Variant, scenario: &str, what: &str, params: Value, data: Value) {
        eprintln!("rust: {:<34} {what}: {}", v.label, summary(&data));
        self.write(Some(v), scenario, params, data);
    }

    fn key(&self, variant: &Variant, scenario: &str) -> String {
        format!(
            "kb:{}:{}:{}:{}",
            self.run, variant.lib, variant.variant, scenario
        )
    }
}

/// keylatch's reentrant lock: the reference every other row is compared with side by side.
fn is_reference(v: &Variant) -> bool {
    (v.lib, v.variant) == ("keylatch", "reentrant")
}

fn secs(scale: f64, base: f64) -> Duration {
    Duration::from_secs_f64((base * scale).max(0.2))
}

pub(crate) async fn raw_eval(conn: &mut MultiplexedConnection, script: &redis::Script, key: &str) {
    let _: i64 = script
        .key(key)
        .invoke_async(conn)
        .await
        .expect("raw evalsha");
}

/// The physical limit: one EVALSHA round trip, and two back to back (lock + unlock); with
/// `many`, also EVALSHA pairs from 256 tasks over 10 000 keys.
async fn raw_baselines(
    url: &str,
    out: &mut Out,
    scale: f64,
    conn: &mut MultiplexedConnection,
    many: bool,
    tag: &str,
) {
    let client = redis::Client::open(url).unwrap();
    let mut raw = client.get_multiplexed_async_connection().await.unwrap();
    let script = redis::Script::new(RAW_SCRIPT);
    for _ in 0..200 {
        raw_eval(&mut raw, &script, "kb:raw:warm").await;
    }
    let window = secs(scale, 1.5);
    let (mut single, mut pair) = (Vec::new(), Vec::new());
    let start = Instant::now();
    while start.elapsed() < window && pair.len() < 20_000 {
        let t = Instant::now();
        raw_eval(&mut raw, &script, "kb:raw:rtt").await;
        single.push(t.elapsed().as_nanos() as u64);
        let t = Instant::now();
        raw_eval(&mut raw, &script, "kb:raw:rtt").await;
        raw_eval(&mut raw, &script, "kb:raw:rtt").await;
        pair.push(t.elapsed().as_nanos() as u64);
    }
    out.write(
        None,
        "raw_rtt",
        json!({"lib": "raw", "label": "raw EVALSHA (redis-rs)", "for_runner": tag}),
        json!({"single_ns": single, "pair_ns": pair}),
    );
    let mut sorted = single.clone();
    sorted.sort_unstable();
    eprintln!(
        "  raw EVALSHA round trip (redis-rs): p50 {:.0} us ({} samples)",
        sorted.get(sorted.len() / 2).copied().unwrap_or(0) as f64 / 1e3,
        pair.len()
    );
    if !many {
        return;
    }

    // 256 tasks over 10 000 keys on one multiplexed connection: EVALSHA pairs.
    let window = secs(scale, 3.0);
    let (tasks, keys) = (256usize, 10_000usize);
    let before = command_counts(conn).await;
    let start = Instant::now();
    let end = start + window;
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (mut raw, script) = (raw.clone(), script.clone());
        handles.push(tokio::spawn(async move {
            let mut n = 0u64;
            let mut i = 0usize;
            while Instant::now() < end {
                let key = format!("kb:raw:keys:{}", (t * 7919 + i * 104_729) % keys);
                i += 1;
                raw_eval(&mut raw, &script, &key).await;
                let second = Instant::now();
                raw_eval(&mut raw, &script, &key).await;
                n += u64::from(second < end);
            }
            n
        }));
    }
    let mut pairs = 0;
    for h in handles {
        pairs += h.await.unwrap();
    }
    let after = command_counts(conn).await;
    out.write(None, "raw_s3", json!({"lib": "raw", "label": "raw EVALSHA pairs (redis-rs)", "workers": tasks, "keys": keys}),
        json!({"window_s": window.as_secs_f64(), "acquired_in_window": pairs, "commands": command_delta(&before, &after)}));
    eprintln!(
        "  raw EVALSHA pairs, 256 tasks over 10 000 keys: {:.0}/s",
        pairs as f64 / window.as_secs_f64()
    );
}

/// Scenarios 4 and 5: `workers` on `key` (a semaphore of `permits`) for 3 s, each holding 1 ms.
async fn held_1ms(
    v: &Variant,
    conn: &mut MultiplexedConnection,
    key: &str,
    workers: usize,
    permits: usize,
    scale: f64,
) -> Value {
    let hold = Duration::from_millis(1);
    contended(&v.imp, conn, key, workers, hold, secs(scale, 3.0), permits).await
}

fn summary(data: &Value) -> String {
    let errors = data["errors"].as_u64().unwrap_or(0);
    let mut s = String::new();
    if let Some(events) = data["events"].as_array() {
        s += &format!("{} acquisitions", events.len());
    }
    if let Some(l) = data["latencies_ns"].as_array() {
        let mut v: Vec<u64> = l.iter().filter_map(Value::as_u64).collect();
        v.sort_unstable();
        if !v.is_empty() {
            s += &format!(
                "p50 {:.0} us ({} samples)",
                v[v.len() / 2] as f64 / 1e3,
                v.len()
            );
        }
    }
    if let Some(n) = data["acquired_in_window"].as_u64() {
        s += &format!(
            "{:.0}/s",
            n as f64 / data["window_s"].as_f64().unwrap_or(1.0)
        );
    }
    if errors > 0 {
        s += &format!(
            ", {errors} errors (first: {})",
            data["first_error"].as_str().unwrap_or("?")
        );
    }
    if data["timed_out"].as_bool() == Some(true) {
        s += ", TIMED OUT";
    }
    s
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = parse_args();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.out)
        .expect("open --out");
    let mut out = Out {
        file,
        run: format!("{}", std::process::id()),
    };
    if !args.redlock_urls.is_empty() {
        redlock::run(&args.redlock_urls, &mut out, args.scale).await;
        // Background tasks (hubs, abandoned workers) must not keep us alive.
        std::process::exit(0);
    }
    let info_client = redis::Client::open(args.url.as_str()).unwrap();
    let mut conn = info_client
        .get_multiplexed_async_connection()
        .await
        .expect("connect to redis");
    let raw = info_client
        .get_multiplexed_async_connection()
        .await
        .expect("connect to redis");
    let has = |s: &str| args.scenarios.iter().any(|x| x == s);
    let scale = args.scale;

    if has("raw") || has("raw_rtt") {
        eprintln!("rust: raw baselines");
        raw_baselines(&args.url, &mut out, scale, &mut conn, has("raw"), &args.tag).await;
    }
    if !["s1", "s2", "s3", "s4", "s5"].iter().any(|s| has(s)) {
        std::process::exit(0);
    }
    let only = args.only.clone();
    let want = move |lib: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == lib));
    let variants = match libs::variants(&args.url, &want).await {
        Ok(v) => v,
        Err(e) => panic!("connecting the libraries: {e}"),
    };
    let variants = Arc::new(variants);
    let raw_lib = libs::Lib::Raw(
        info_client
            .get_multiplexed_async_connection()
            .await
            .expect("connect to redis"),
        Arc::new(redis::Script::new(RAW_SCRIPT)),
    );
    // keylatch's reentrant lock, interleaved with every Rust peer in scenario 1.
    let reference = match keylatch::Client::connect(&args.url).await {
        Ok(client) => Some(libs::Lib::KeylatchReentrant(client)),
        Err(e) => panic!("connecting keylatch: {e}"),
    };
    for v in variants.iter() {
        let baseline = v.kind == Kind::Baseline;
        let locks = !baseline && v.kind != Kind::Semaphore;
        let fresh = |v: &Variant| {
            let v = v.clone();
            async move {
                let imp = v
                    .imp
                    .fresh()
                    .await
                    .unwrap_or_else(|e| panic!("{}: {e}", v.label));
                Variant { imp, ..v }
            }
        };
        if (locks || baseline) && has("s1") {
            let v = &fresh(v).await;
            let key = out.key(v, "s1");
            let reference = (!is_reference(v)).then_some(reference.as_ref()).flatten();
            let data = uncontended(
                &v.imp,
                reference,
                &mut conn,
                &raw,
                &key,
                secs(scale, 1.5),
                20_000,
            )
            .await;
            out.report(v, "s1", "s1 uncontended", json!({"workers": 1}), data);
        }
        if locks && has("s2") {
            for workers in [2usize, 8, 32] {
                for hold_ms in [0u64, 1] {
                    let v = &fresh(v).await;
                    let key = format!("{}:{workers}:{hold_ms}", out.key(v, "s2"));
                    let data = contended(
                        &v.imp,
                        &mut conn,
                        &key,
                        workers,
                        Duration::from_millis(hold_ms),
                        secs(scale, 2.0),
                        1,
                    )
                    .await;
                    out.report(
                        v,
                        "s2",
                        &format!("s2 N={workers:<2} hold={hold_ms}ms"),
                        json!({"workers": workers, "hold_ms": hold_ms}),
                        data,
                    );
                }
            }
        }
        if (locks || baseline) && has("s3") {
            // Slices of 1 s, interleaved with keylatch's reentrant lock and with raw EVALSHA
            // pairs, so both ratios compare the same minutes of a machine whose load drifts.
            let v = &fresh(v).await;
            let (mut mine, mut theirs, mut raws) = (Vec::new(), Vec::new(), Vec::new());
            for round in 0..3 {
                let key = format!("{}:{round}", out.key(v, "s3"));
                mine.push(many_keys(&v.imp, &mut conn, &key, 256, 10_000, secs(scale, 1.0)).await);
                if let Some(r) = reference.as_ref().filter(|_| !is_reference(v)) {
                    theirs.push(
                        many_keys(
                            r,
                            &mut conn,
                            &format!("{key}:keylatch"),
                            256,
                            10_000,
                            secs(scale, 1.0),
                        )
                        .await,
                    );
                }
                raws.push(
                    many_keys(
                        &raw_lib,
                        &mut conn,
                        &format!("{key}:raw"),
                        256,
                        10_000,
                        secs(scale, 1.0),
                    )
                    .await,
                );
            }
            let mut data = merge_many_keys(&mine);
            let map = data.as_object_mut().unwrap();
            if !theirs.is_empty() {
                map.insert(
                    "keylatch_side_by_side".into(),
                    json!(rate(&merge_many_keys(&theirs))),
                );
            }
            map.insert(
                "raw_side_by_side".into(),
                json!(rate(&merge_many_keys(&raws))),
            );
            let params = json!({"workers": 256, "keys": 10_000});
            out.report(v, "s3", "s3 256 workers/10 000 keys", params, data);
        }
        if locks && has("s4") {
            let v = &fresh(v).await;
            let key = out.key(v, "s4");
            let data = held_1ms(v, &mut conn, &key, 8, 1, scale).await;
            let params = json!({"workers": 8, "hold_ms": 1});
            out.report(v, "s4", "s4 fairness N=8 hold=1ms", params, data);
        }
        if v.kind == Kind::Semaphore && has("s5") {
            let v = &fresh(v).await;
            let key = out.key(v, "s5");
            let data = held_1ms(v, &mut conn, &key, 16, 4, scale).await;
            let params = json!({"workers": 16, "permits": 4, "hold_ms": 1});
            out.report(v, "s5", "s5 semaphore P=4 N=16", params, data);
        }
    }
    // Background tasks (watchdogs, refreshers) of abandoned workers must not keep us alive.
    std::process::exit(0);
}
