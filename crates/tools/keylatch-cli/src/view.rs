//! The operators' view that `keylatch top` and `keylatch serve` share: every held lock whose
//! name matches a pattern, with its holders (host, pid, program and since when, where the
//! holder recorded them), the fair queue's waiters in order, how long each has held or waited,
//! and the lease left; sorted by the longest wait.
//!
//! It reads Redis with plain commands (SCAN with MATCH, bounded; then one pipelined round trip
//! per lock), on the one server the connection reaches (Sentinel and Cluster are not handled
//! yet: on a cluster it sees one node's keys). Holds without metadata
//! (Redisson's) show their owner id and lease; their hold time, like every wait, counts from
//! when this view first saw them ("at least").

use std::collections::HashMap;

use keylatch::redis::{self, Value as RedisValue, aio::ConnectionLike};
use keylatch_redis::{HolderMeta, holder_meta_key, prefixed};
use serde::Serialize;

use crate::failure::Failure;

/// The most keys one refresh looks at, and the most SCAN calls it makes.
pub const MAX_KEYS: usize = 2_000;
const MAX_SCAN_CALLS: usize = 200;
/// The most waiters read from one fair queue.
const MAX_WAITERS: isize = 100;

/// One refresh of the view.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Snapshot {
    /// The pattern of names looked at (SCAN MATCH, without the key prefix).
    pub pattern: String,
    /// The server's clock when the refresh was taken, ms since the epoch.
    pub now_ms: i64,
    /// Whether the scan stopped at [`MAX_KEYS`] before it had seen every key.
    pub truncated: bool,
    /// The held locks, the longest wait first.
    pub locks: Vec<LockView>,
}

/// One held lock.
#[derive(Clone, Debug, Serialize)]
pub struct LockView {
    /// The lock name (without the key prefix).
    pub name: String,
    /// `lock` (reentrant or fair: Redisson's lock hash) or `rwlock` (with its mode).
    pub kind: String,
    /// The lease left, ms (`None`: no expiry).
    pub ttl_ms: Option<i64>,
    /// Who holds it.
    pub holders: Vec<HolderView>,
    /// The fair queue, first in line first.
    pub waiters: Vec<WaiterView>,
    /// Clients subscribed to the lock's wake-up channel: waiters of the non-fair lock (one
    /// subscription per client, however many of its tasks wait).
    pub subscribers: i64,
    /// The longest wait among the waiters, ms (0 without waiters).
    pub longest_wait_ms: i64,
}

/// One holder.
#[derive(Clone, Debug, Serialize)]
pub struct HolderView {
    /// `<client-uuid>:<owner-number>`.
    pub owner: String,
    /// Hold count (reentrancy), or the read-write lock's side.
    pub holds: String,
    /// From the holder metadata, when the holder recorded it.
    pub host: Option<String>,
    /// From the holder metadata.
    pub pid: Option<u32>,
    /// From the holder metadata.
    pub program: Option<String>,
    /// How long it has held, ms.
    pub held_ms: i64,
    /// `true`: from the holder's own record; `false`: at least this long (since this view
    /// first saw it).
    pub held_exact: bool,
}

/// One waiter of a fair lock.
#[derive(Clone, Debug, Serialize)]
pub struct WaiterView {
    /// The waiter's owner id.
    pub owner: String,
    /// 1 for the first in line.
    pub position: usize,
    /// How long it has waited at least, ms (since this view first saw it).
    pub waited_ms: i64,
}

/// Reads snapshots, remembering when it first saw each holder and waiter.
#[derive(Debug)]
pub struct Watcher {
    pattern: String,
    prefix: String,
    first_seen: HashMap<String, i64>,
}

impl Watcher {
    /// A watcher of names matching `pattern` (Redis glob), under the client's key `prefix`.
    pub fn new(pattern: &str, prefix: &str) -> Watcher {
        Watcher {
            pattern: pattern.to_owned(),
            prefix: prefix.to_owned(),
            first_seen: HashMap::new(),
        }
    }

    /// One refresh.
    ///
    /// # Errors
    /// Redis errors.
    pub async fn refresh<C: ConnectionLike + Send + Sync>(
        &mut self,
        conn: &mut C,
    ) -> Result<Snapshot, Failure> {
        let (secs, micros): (i64, i64) = query(&mut redis::cmd("TIME"), conn).await?;
        let now = secs * 1000 + micros / 1000;
        let (keys, truncated) = self.scan(conn).await?;
        let mut locks = Vec::new();
        let mut seen = HashMap::new();
        for key in keys {
            if let Some(lock) = self.read_lock(conn, &key, now, &mut seen).await? {
                locks.push(lock);
            }
        }
        self.first_seen = seen;
        locks.sort_by(|a, b| {
            let held = |l: &LockView| l.holders.iter().map(|h| h.held_ms).max().unwrap_or(0);
            (b.longest_wait_ms, held(b), &a.name).cmp(&(a.longest_wait_ms, held(a), &b.name))
        });
        Ok(Snapshot {
            pattern: self.pattern.clone(),
            now_ms: now,
            truncated,
            locks,
        })
    }

    /// The hashes whose names match: candidates for locks (keylatch's and Redisson's own
    /// side keys are left out).
    async fn scan<C: ConnectionLike + Send + Sync>(
        &self,
        conn: &mut C,
    ) -> Result<(Vec<String>, bool), Failure> {
        let pattern = format!("{}{}", self.prefix, self.pattern);
        let mut cursor = 0u64;
        let mut keys = Vec::new();
        for _ in 0..MAX_SCAN_CALLS {
            let (next, page): (u64, Vec<String>) = query(
                redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(500)
                    .arg("TYPE")
                    .arg("hash"),
                conn,
            )
            .await?;
            keys.extend(page.into_iter().filter(|k| !is_side_key(k)));
            cursor = next;
            if cursor == 0 || keys.len() >= MAX_KEYS {
                break;
            }
        }
        keys.sort();
        keys.dedup();
        let truncated = cursor != 0;
        keys.truncate(MAX_KEYS);
        Ok((keys, truncated))
    }

    /// The lock kept in the hash `key`, or `None` when it is not a lock hash (or is gone).
    async fn read_lock<C: ConnectionLike + Send + Sync>(
        &self,
        conn: &mut C,
        key: &str,
        now: i64,
        seen: &mut HashMap<String, i64>,
    ) -> Result<Option<LockView>, Failure> {
        let mut pipe = redis::pipe();
        pipe.cmd("HGETALL").arg(key);
        pipe.cmd("PTTL").arg(key);
        pipe.cmd("HGETALL").arg(holder_meta_key(key));
        pipe.cmd("LRANGE")
            .arg(prefixed("redisson_lock_queue", key))
            .arg(0)
            .arg(MAX_WAITERS - 1);
        pipe.cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(prefixed("redisson_lock__channel", key));
        let (fields, pttl, metas, queue, numsub): LockReplies = pipe
            .query_async(conn)
            .await
            .map_err(keylatch_redis::from_redis)?;
        let mode = fields
            .iter()
            .find(|(f, _)| f == "mode")
            .map(|(_, m)| m.clone());
        let holds: Vec<&(String, String)> = fields.iter().filter(|(f, _)| f != "mode").collect();
        if holds.is_empty() || !holds.iter().all(|(f, _)| is_owner_field(f)) {
            return Ok(None);
        }
        let name = key.strip_prefix(&self.prefix).unwrap_or(key).to_owned();
        let mut remember = |id: String| -> i64 {
            let first = self.first_seen.get(&id).copied().unwrap_or(now);
            seen.insert(id, first);
            now - first
        };
        let holders = holds
            .iter()
            .map(|(field, count)| {
                let owner = field.strip_suffix(":write").unwrap_or(field).to_owned();
                let meta = metas.get(&owner).map(|v| HolderMeta::parse(v));
                let since = meta.as_ref().and_then(|m| m.since_ms);
                let observed = remember(format!("h\0{key}\0{field}"));
                let meta = meta.unwrap_or_default();
                HolderView {
                    holds: match (&mode, field.ends_with(":write")) {
                        (Some(_), true) => format!("write ×{count}"),
                        (Some(_), false) => format!("read ×{count}"),
                        (None, _) => format!("×{count}"),
                    },
                    owner,
                    host: meta.host,
                    pid: meta.pid,
                    program: meta.program,
                    held_ms: since.map_or(observed, |s| (now - s).max(0)),
                    held_exact: since.is_some(),
                }
            })
            .collect();
        let queue: Vec<String> = redis::from_redis_value(queue).unwrap_or_default();
        let waiters: Vec<WaiterView> = queue
            .into_iter()
            .enumerate()
            .map(|(i, owner)| WaiterView {
                waited_ms: remember(format!("w\0{key}\0{owner}")),
                owner,
                position: i + 1,
            })
            .collect();
        let subscribers = match numsub.get(1) {
            Some(RedisValue::Int(n)) => *n,
            _ => 0,
        };
        Ok(Some(LockView {
            name,
            kind: mode.map_or_else(|| "lock".to_owned(), |m| format!("rwlock ({m})")),
            ttl_ms: (pttl >= 0).then_some(pttl),
            holders,
            longest_wait_ms: waiters.iter().map(|w| w.waited_ms).max().unwrap_or(0),
            waiters,
            subscribers,
        }))
    }
}

/// The replies of one lock's pipeline: its fields, PTTL, holder metadata, fair queue and
/// channel subscribers.
type LockReplies = (
    Vec<(String, String)>,
    i64,
    HashMap<String, String>,
    RedisValue,
    Vec<RedisValue>,
);

/// keylatch's and Redisson's side keys that are hashes but not locks.
fn is_side_key(key: &str) -> bool {
    key.starts_with("keylatch_meta:") || key.ends_with(":keylatch_grants")
}

/// `<uuid>:<n>` (Redisson's `<uuid>:<thread-id>`), with `:write` for a write hold.
fn is_owner_field(field: &str) -> bool {
    let field = field.strip_suffix(":write").unwrap_or(field);
    let Some((uuid, n)) = field.rsplit_once(':') else {
        return false;
    };
    uuid.len() == 36 && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
}

async fn query<T: redis::FromRedisValue, C: ConnectionLike + Send + Sync>(
    cmd: &mut redis::Cmd,
    conn: &mut C,
) -> Result<T, Failure> {
    Ok(cmd
        .query_async(conn)
        .await
        .map_err(keylatch_redis::from_redis)?)
}

/// `1.2s`, `3m 04s`, `2h 05m`: a duration for a table cell.
pub fn short_duration(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 10_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        let s = ms / 1000;
        if s < 60 {
            format!("{s}s")
        } else {
            format!("{}m {:02}s", s / 60, s % 60)
        }
    } else {
        format!("{}h {:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_fields() {
        assert!(is_owner_field("5b0e4c1e-8a0f-4f4e-9a52-7f0c2b8f2e11:17"));
        assert!(is_owner_field(
            "5b0e4c1e-8a0f-4f4e-9a52-7f0c2b8f2e11:17:write"
        ));
        assert!(!is_owner_field("mode"));
        assert!(!is_owner_field("user:1"));
    }

    #[test]
    fn durations() {
        assert_eq!(short_duration(1234), "1.2s");
        assert_eq!(short_duration(75_000), "1m 15s");
        assert_eq!(short_duration(7_500_000), "2h 05m");
    }
}
