//! `keylatch inspect`: what the keys of a name say, read with plain commands.

use keylatch::redis::{self, AsyncCommands, aio::ConnectionLike};
use keylatch::{Client, Config};
use keylatch_redis::{prefixed, suffixed, validate_name};
use serde_json::{Value, json};

use crate::cli::InspectArgs;
use crate::failure::Failure;

/// The score Redisson gives a permit acquired without a lease (its `nonExpirableTimeout`).
const NO_LEASE_SCORE: f64 = 922_337_203_685_477.0;

/// Lower-case hex of a permit id's bytes: the form both Redisson's and keylatch's APIs use.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// How often `--watch` refreshes.
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Prints what holds each of `args.names`; with `--watch`, again every 500 ms until SIGINT or
/// SIGTERM.
pub async fn inspect(config: Config, args: InspectArgs) -> Result<(), Failure> {
    for name in &args.names {
        validate_name(name)?;
    }
    if args.names.len() > 1 && !args.watch && args.json {
        return Err(Failure::new(
            crate::failure::EX_USAGE,
            "several names with --json need --watch (one JSON object per line)",
        ));
    }
    let client = Client::connect_with(config).await?;
    if let Some(zk) = client.as_zookeeper() {
        return crate::inspect_zk::inspect(zk, &args).await;
    }
    let mut conn = client.connection().await?;
    let limit = args.limit as usize;
    // The keys of a name are those of its prefixed form (`KEYLATCH_KEY_PREFIX`).
    let prefix = client.config().key_prefix.clone();
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let stop = crate::run::interrupted();
    tokio::pin!(stop);
    loop {
        if args.watch && terminal && !args.json {
            // Clear the screen and go home: the view is redrawn in place.
            print!("\x1b[2J\x1b[H");
        }
        for name in &args.names {
            let report = describe(&mut conn, &format!("{prefix}{name}"), limit).await?;
            match (args.json, args.watch) {
                (true, true) => println!("{}", serde_json::to_string(&report).unwrap_or_default()),
                (true, false) => println!(
                    "{}",
                    serde_json::to_string_pretty(&report).unwrap_or_default()
                ),
                (false, _) => print_text(&report),
            }
        }
        if !args.watch {
            return Ok(());
        }
        use std::io::Write;
        let _ = std::io::stdout().flush();
        tokio::select! {
            () = tokio::time::sleep(WATCH_EVERY) => {}
            () = &mut stop => return Ok(()),
        }
    }
}

/// The entries of `fields` in the fair lock's grant hash, in one round trip: a waiter's offer,
/// a grant mark (`=`...), or `""` (also for every field when there is no grant hash).
async fn grant_entries<C: ConnectionLike + Send + Sync>(
    conn: &mut C,
    grants_key: Option<&String>,
    fields: &[&String],
) -> Result<Vec<String>, Failure> {
    let Some(key) = grants_key.filter(|_| !fields.is_empty()) else {
        return Ok(vec![String::new(); fields.len()]);
    };
    let values: Vec<Option<String>> = redis::cmd("HMGET")
        .arg(key)
        .arg(fields)
        .query_async(conn)
        .await
        .map_err(keylatch_redis::from_redis)?;
    Ok(values.into_iter().map(Option::unwrap_or_default).collect())
}

async fn key_type<C: ConnectionLike + Send + Sync>(
    conn: &mut C,
    key: &str,
) -> Result<String, Failure> {
    let kind: String = redis::cmd("TYPE")
        .arg(key)
        .query_async(conn)
        .await
        .map_err(keylatch_redis::from_redis)?;
    Ok(kind)
}

/// Milliseconds left on a key: `None` without an expiry or when missing.
async fn pttl<C: ConnectionLike + Send + Sync>(
    conn: &mut C,
    key: &str,
) -> Result<Option<i64>, Failure> {
    let ms: i64 = conn.pttl(key).await.map_err(keylatch_redis::from_redis)?;
    Ok((ms >= 0).then_some(ms))
}

async fn server_millis<C: ConnectionLike + Send + Sync>(conn: &mut C) -> Result<i64, Failure> {
    let (secs, micros): (i64, i64) = redis::cmd("TIME")
        .query_async(conn)
        .await
        .map_err(keylatch_redis::from_redis)?;
    Ok(secs * 1000 + micros / 1000)
}

/// A hash's fields, at most `limit` of them (HSCAN, in bounded steps), and how many it has.
async fn some_fields<C: ConnectionLike + Send + Sync>(
    conn: &mut C,
    key: &str,
    limit: usize,
) -> Result<(Vec<(String, String)>, usize), Failure> {
    let total: usize = conn.hlen(key).await.map_err(keylatch_redis::from_redis)?;
    let mut fields = Vec::new();
    let mut cursor = 0u64;
    // Each step asks for a few more than needed; a hash is walked in at most `total / 100` steps.
    for _ in 0..=(total / 100 + 1) {
        let (next, page): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
            .arg(key)
            .arg(cursor)
            .arg("COUNT")
            .arg(100)
            .query_async(conn)
            .await
            .map_err(keylatch_redis::from_redis)?;
        fields.extend(page);
        cursor = next;
        if cursor == 0 || fields.len() > limit {
            break;
        }
    }
    // `mode` is always kept: it says which primitive this is.
    if let Some(i) = fields.iter().position(|(f, _)| f == "mode") {
        let mode = fields.remove(i);
        fields.insert(0, mode);
    } else if total > fields.len() {
        let mode: Option<String> = conn
            .hget(key, "mode")
            .await
            .map_err(keylatch_redis::from_redis)?;
        if let Some(mode) = mode {
            fields.insert(0, ("mode".to_owned(), mode));
        }
    }
    fields.truncate(limit + usize::from(fields.iter().any(|(f, _)| f == "mode")));
    Ok((fields, total))
}

/// A count written in a hash field, or a note on what is wrong with it.
fn count_of(raw: &str, malformed: &mut Vec<String>, what: &str) -> u64 {
    match raw.parse::<u64>() {
        Ok(count) => count,
        Err(_) => {
            malformed.push(format!("{what}: the count {raw:?} is not a whole number"));
            0
        }
    }
}

/// Reads the keys a primitive named `name` may use and says which primitive it is, showing at
/// most `limit` entries of each list (holders, read holds, waiters, permits) with their totals,
/// and a note on whatever is malformed. It sends a bounded number of commands whatever the
/// keys hold.
pub async fn describe<C: ConnectionLike + Send + Sync>(
    conn: &mut C,
    name: &str,
    limit: usize,
) -> Result<Value, Failure> {
    let mut malformed: Vec<String> = Vec::new();
    let redis_err = keylatch_redis::from_redis;
    let now = server_millis(conn).await?;
    let mut report = json!({ "name": name });
    let token_key = prefixed("redisson_lock_token", name);
    if key_type(conn, &token_key).await? == "string" {
        let token: String = conn.get(&token_key).await.map_err(redis_err)?;
        match token.parse::<u64>() {
            Ok(token) => report["fencing_token"] = json!(token),
            Err(_) => malformed.push(format!("{token_key}: not a whole number")),
        }
    }
    let queue_key = prefixed("redisson_lock_queue", name);
    let timeout_key = prefixed("redisson_lock_timeout", name);
    let waiters_key = suffixed(name, "keylatch_waiters");
    // The fair lock's direct grant: a queued keylatch waiter's offer, or the mark of a hold
    // handed to a waiter on release.
    let grants_key = suffixed(name, "keylatch_grants");
    let grants = key_type(conn, &grants_key).await? == "hash";
    let bound = isize::try_from(limit)
        .unwrap_or(isize::MAX)
        .saturating_sub(1);
    let (queue, queued): (Vec<String>, usize) = if key_type(conn, &queue_key).await? == "list" {
        (
            conn.lrange(&queue_key, 0, bound).await.map_err(redis_err)?,
            conn.llen(&queue_key).await.map_err(redis_err)?,
        )
    } else {
        (Vec::new(), 0)
    };
    match key_type(conn, name).await?.as_str() {
        "hash" => {
            let (fields, total_fields) = some_fields(conn, name, limit).await?;
            report["ttl_ms"] = json!(pttl(conn, name).await?);
            report["locked"] = json!(true);
            if let Some((_, mode)) = fields.iter().find(|(f, _)| f == "mode") {
                report["primitive"] = json!("rwlock");
                report["mode"] = json!(mode);
                if mode != "read" && mode != "write" {
                    malformed.push(format!("{name}: mode {mode:?} is neither read nor write"));
                }
                let mut readers = Vec::new();
                let mut writers = Vec::new();
                // Read holds looked up, over every reader: at most `limit`.
                let mut looked_up = 0usize;
                for (field, count) in fields.iter().filter(|(f, _)| f != "mode") {
                    let count = count_of(count, &mut malformed, field);
                    if let Some(owner) = field.strip_suffix(":write") {
                        writers.push(json!({ "owner": owner, "count": count }));
                        continue;
                    }
                    let shown = count.min(u64::try_from(limit - looked_up.min(limit)).unwrap_or(0));
                    let mut holds = Vec::new();
                    for n in 1..=shown {
                        let key = suffixed(name, &format!("{field}:rwlock_timeout:{n}"));
                        holds.push(json!({ "key": key, "ttl_ms": pttl(conn, &key).await? }));
                    }
                    looked_up += holds.len();
                    readers.push(json!({ "owner": field, "count": count, "holds": holds }));
                }
                report["readers"] = json!(readers);
                report["writers"] = json!(writers);
                report["owners_total"] = json!(total_fields.saturating_sub(1));
            } else {
                report["primitive"] = json!(if queue.is_empty() && !grants {
                    "reentrant"
                } else {
                    "fair"
                });
                let owners: Vec<&String> = fields.iter().map(|(owner, _)| owner).collect();
                let marks = grant_entries(conn, grants.then_some(&grants_key), &owners).await?;
                let mut holders = Vec::new();
                for ((owner, count), mark) in fields.iter().zip(marks) {
                    let count = count_of(count, &mut malformed, owner);
                    let mut holder = json!({ "owner": owner, "count": count });
                    if mark.starts_with('=') {
                        holder["granted"] = json!(true);
                    }
                    holders.push(holder);
                }
                report["holders"] = json!(holders);
                report["owners_total"] = json!(total_fields);
            }
        }
        "string" => {
            let raw: Option<String> = conn.get(name).await.map_err(redis_err)?;
            let available = raw.as_deref().and_then(|v| v.parse::<i64>().ok());
            match (&raw, available) {
                (Some(raw), None) => {
                    malformed.push(format!("{name}: the permit count {raw:?} is not a number"));
                }
                (_, Some(n)) if n < 0 => {
                    malformed.push(format!("{name}: the permit count {n} is negative"));
                }
                _ => {}
            }
            let permits_key = suffixed(name, "timeout");
            report["available_permits"] = json!(available);
            // The expirable semaphore keeps the permits handed out (while any are) in the
            // `{name}:timeout` zset: each id as the bytes its hex form stands for (Redisson's
            // layout), scored by its lease end; its total is available + held.
            if key_type(conn, &permits_key).await? == "zset" {
                report["primitive"] = json!("permit_expirable_semaphore");
                let permits: Vec<(Vec<u8>, f64)> = conn
                    .zrange_withscores(&permits_key, 0, bound)
                    .await
                    .map_err(redis_err)?;
                let held: i64 = conn.zcard(&permits_key).await.map_err(redis_err)?;
                report["permits_held"] = json!(held);
                report["total_permits"] = json!(available.map(|a| a + held));
                report["permits"] = json!(
                    permits
                        .iter()
                        .map(|(id, expiry)| {
                            // Redisson's score for a permit without a lease.
                            let expires_in =
                                (*expiry < NO_LEASE_SCORE).then(|| *expiry as i64 - now);
                            json!({ "id": hex(id), "expires_in_ms": expires_in })
                        })
                        .collect::<Vec<_>>()
                );
            } else {
                // Without held permits a permit-expirable semaphore is Redisson's plain
                // semaphore layout too: one integer string.
                report["primitive"] = json!("semaphore");
                // So is a count-down latch (Redisson's RCountDownLatch): its count.
                report["latch_count"] = json!(available.map(|n| n.max(0)));
                report["note"] = json!(
                    "a permit-expirable semaphore with no permit held, or a count-down latch, looks the same"
                );
            }
        }
        "none" => {
            report["locked"] = json!(false);
            report["primitive"] = json!(if queue.is_empty() && !grants {
                "none"
            } else {
                "fair"
            });
        }
        other => {
            report["primitive"] = json!("unknown");
            report["redis_type"] = json!(other);
        }
    }
    if !queue.is_empty() {
        report["queue_total"] = json!(queued);
        let ids: Vec<&String> = queue.iter().collect();
        let offers = grant_entries(conn, grants.then_some(&grants_key), &ids).await?;
        let mut waiters = Vec::new();
        for (id, offer) in queue.iter().zip(offers) {
            // A keylatch waiter's liveness deadline is in its own zset; a Redisson waiter's is
            // its score in Redisson's.
            let beat: Option<f64> = conn.zscore(&waiters_key, id).await.map_err(redis_err)?;
            let (client, deadline) = match beat {
                Some(beat) => ("keylatch", Some(beat)),
                None => (
                    "redisson",
                    conn.zscore(&timeout_key, id).await.map_err(redis_err)?,
                ),
            };
            let mut waiter = json!({
                "waiter": id,
                "client": client,
                "deadline_in_ms": deadline.map(|d: f64| d as i64 - now),
            });
            if grants && client == "keylatch" {
                waiter["accepts_grant"] = json!(!offer.is_empty() && !offer.starts_with('='));
            }
            waiters.push(waiter);
        }
        report["queue"] = json!(waiters);
    }
    report["limit"] = json!(limit);
    if !malformed.is_empty() {
        report["malformed"] = json!(malformed);
    }
    Ok(report)
}

fn print_text(report: &Value) {
    let name = report["name"].as_str().unwrap_or_default();
    let primitive = report["primitive"].as_str().unwrap_or("none");
    let ttl = |v: &Value| match v.as_i64() {
        Some(ms) => format!("{ms} ms left"),
        None => "no expiry".to_owned(),
    };
    match primitive {
        "none" => println!("{name}: free (no keys)"),
        "reentrant" | "fair" => {
            println!("{name}: {primitive} lock");
            if report["locked"] == json!(true) {
                println!("  lease: {}", ttl(&report["ttl_ms"]));
            } else {
                println!("  free");
            }
            shown_of(report, "holders", "owners_total");
            for holder in report["holders"].as_array().into_iter().flatten() {
                println!(
                    "  holder {} (hold count {}){}",
                    holder["owner"].as_str().unwrap_or(""),
                    holder["count"],
                    if holder["granted"] == json!(true) {
                        ", handed the lock on release"
                    } else {
                        ""
                    }
                );
            }
        }
        "rwlock" => {
            println!(
                "{name}: read-write lock, mode {}",
                report["mode"].as_str().unwrap_or("?")
            );
            println!("  lease: {}", ttl(&report["ttl_ms"]));
            for writer in report["writers"].as_array().into_iter().flatten() {
                println!(
                    "  writer {} (hold count {})",
                    writer["owner"].as_str().unwrap_or(""),
                    writer["count"]
                );
            }
            shown_of(report, "readers", "owners_total");
            for reader in report["readers"].as_array().into_iter().flatten() {
                println!(
                    "  reader {} (hold count {})",
                    reader["owner"].as_str().unwrap_or(""),
                    reader["count"]
                );
                for hold in reader["holds"].as_array().into_iter().flatten() {
                    println!(
                        "    {}: {}",
                        hold["key"].as_str().unwrap_or(""),
                        ttl(&hold["ttl_ms"])
                    );
                }
            }
        }
        "semaphore" | "permit_expirable_semaphore" => {
            println!("{name}: {}", primitive.replace('_', " "));
            println!("  available permits: {}", report["available_permits"]);
            if let Some(total) = report["total_permits"].as_i64() {
                println!("  total permits: {total}");
            }
            if let Some(count) = report["latch_count"].as_i64() {
                println!("  as a count-down latch: count {count}");
            }
            if let Some(note) = report["note"].as_str() {
                println!("  ({note})");
            }
            shown_of(report, "permits", "permits_held");
            for permit in report["permits"].as_array().into_iter().flatten() {
                match permit["expires_in_ms"].as_i64() {
                    Some(ms) => println!(
                        "  permit {} expires in {ms} ms",
                        permit["id"].as_str().unwrap_or("")
                    ),
                    None => println!(
                        "  permit {} has no lease",
                        permit["id"].as_str().unwrap_or("")
                    ),
                }
            }
        }
        other => println!(
            "{name}: holds a {} that is no keylatch primitive",
            report["redis_type"].as_str().unwrap_or(other)
        ),
    }
    if let Some(queue) = report["queue"].as_array() {
        println!("  queue ({} waiting):", report["queue_total"]);
        shown_of(report, "queue", "queue_total");
        for (i, waiter) in queue.iter().enumerate() {
            println!(
                "    {}. {} ({}, deadline in {} ms{})",
                i + 1,
                waiter["waiter"].as_str().unwrap_or(""),
                waiter["client"].as_str().unwrap_or(""),
                waiter["deadline_in_ms"],
                if waiter["accepts_grant"] == json!(true) {
                    ", accepts the lock handed over"
                } else {
                    ""
                }
            );
        }
    }
    if let Some(token) = report["fencing_token"].as_u64() {
        println!("  last fencing token: {token}");
    }
    for note in report["malformed"].as_array().into_iter().flatten() {
        println!("  malformed: {}", note.as_str().unwrap_or(""));
    }
}

/// Says when a list is cut at `--limit`.
fn shown_of(report: &Value, list: &str, total: &str) {
    let shown = report[list].as_array().map_or(0, Vec::len);
    if let Some(total) = report[total].as_u64()
        && total > shown as u64
    {
        println!(
            "  (showing {shown} of {total}; --limit {} to see more)",
            report["limit"]
        );
    }
}
