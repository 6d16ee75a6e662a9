//! The Redisson side of the interop tests: Redisson's fair lock, permit-expirable semaphore and
//! count-down latch as a Java service runs them, driven from Rust.
//!
//! The scripts below are written for these tests from Redisson's documented behaviour
//! (`RedissonFairLock`, `RedissonLock`'s waiting loops, `RedissonPermitExpirableSemaphore`):
//! the same keys, arguments (the client's clock, `threadWaitTime`, permit ids as the 16 raw
//! bytes of their hex form), score arithmetic, return values and pub/sub messages, so that
//! keylatch meets in Redis exactly what a Redisson client would leave there.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use keylatch::redis::{self, Script, Value};

/// Redisson's default `threadWaitTime` (`fairLockWaitTimeout`): 5 minutes.
pub const THREAD_WAIT_TIME: Duration = Duration::from_secs(300);
/// Redisson's watchdog lease (`lockWatchdogTimeout`): 30 s.
pub const WATCHDOG_LEASE: Duration = Duration::from_secs(30);
/// The score Redisson gives a permit without a lease (`nonExpirableTimeout`).
pub const NON_EXPIRABLE: i64 = 922_337_203_685_477;

/// The client's clock in ms: Redisson sends its own clock, not the server's.
pub fn client_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn hash_tag(name: &str) -> String {
    if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    }
}

/// Removes the heads whose score has passed (by the client's clock): every fair script of
/// Redisson's starts so. Only the head is ever judged; an id without a score stops it.
const DROP_STALE_HEADS: &str = r"
local function drop_stale_heads(queue, scores, now)
  while true do
    local first = redis.call('lindex', queue, 0)
    if not first then return end
    local score = redis.call('zscore', scores, first)
    if score and tonumber(score) <= tonumber(now) then
      redis.call('zrem', scores, first)
      redis.call('lpop', queue)
    else
      return
    end
  end
end
";

/// `tryLockInnerAsync` with a ttl reply. KEYS: lock, queue, scores. ARGV: lease ms, thread
/// id, wait ms (threadWaitTime, or tryLock's waitTime), client now.
const FAIR_ACQUIRE: &str = r"
drop_stale_heads(KEYS[2], KEYS[3], ARGV[4])
local free = redis.call('exists', KEYS[1]) == 0
if free and (redis.call('exists', KEYS[2]) == 0 or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  -- Everyone still waiting loses one wait time.
  for _, member in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), member)
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('zscore', KEYS[3], ARGV[2]) then
  return math.max(0, redis.call('pttl', KEYS[1]))
end
-- Join at the back, scored after the last waiter (or after the lock's expiry).
local last = redis.call('lindex', KEYS[2], -1)
local ttl
local last_score = last and last ~= ARGV[2] and redis.call('zscore', KEYS[3], last)
if last_score then
  ttl = tonumber(last_score) - tonumber(ARGV[4])
else
  ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl
";

/// `unlockInnerAsync`. KEYS: lock, queue, scores, channel prefix. ARGV: lease ms, thread id,
/// client now.
const FAIR_UNLOCK: &str = r"
drop_stale_heads(KEYS[2], KEYS[3], ARGV[3])
local function wake_head()
  local next = redis.call('lindex', KEYS[2], 0)
  if next then
    redis.call('publish', KEYS[4] .. ':' .. next, 0)
  end
end
if redis.call('exists', KEYS[1]) == 0 then
  wake_head()
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 0
end
redis.call('del', KEYS[1])
wake_head()
return 1
";

/// `acquireFailedAsync`: a waiter gives up. KEYS: queue, scores. ARGV: thread id, its wait
/// ms. Everyone behind it loses that wait; it leaves. Nobody is woken.
const FAIR_ACQUIRE_FAILED: &str = r"
local queue = redis.call('lrange', KEYS[1], 0, -1)
local i = 1
while i <= #queue and queue[i] ~= ARGV[1] do
  i = i + 1
end
for j = i + 1, #queue do
  redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[j])
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
";

/// How a Redisson waiter's last wait before it got the lock ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WokenBy {
    /// It got the lock at its first attempt: it never waited.
    NoWait,
    /// A message on its own channel.
    Message,
    /// Its own timer (the ttl the script returned).
    Timer,
}

/// One Redisson thread on one fair lock: its lock name (`<uuid>:<thread-id>`), its own
/// connections, and Redisson's waiting loops.
#[derive(Debug)]
pub struct RedissonFairThread {
    url: String,
    conn: redis::aio::MultiplexedConnection,
    name: String,
    /// `<client-uuid>:<thread-id>`: the hash field and the waiter id.
    pub id: String,
    queue: String,
    scores: String,
    channel: String,
    /// `threadWaitTime` in ms.
    pub thread_wait_time: i64,
}

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

impl RedissonFairThread {
    /// A thread of a fresh Redisson client on the fair lock `name` at `url`.
    pub async fn new(url: &str, name: &str) -> RedissonFairThread {
        let conn = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let tag = hash_tag(name);
        RedissonFairThread {
            url: url.to_owned(),
            conn,
            name: name.to_owned(),
            id: format!(
                "{}:{}",
                random_hex(16),
                NEXT_THREAD.fetch_add(1, Ordering::Relaxed)
            ),
            queue: format!("redisson_lock_queue:{tag}"),
            scores: format!("redisson_lock_timeout:{tag}"),
            channel: format!("redisson_lock__channel:{tag}"),
            thread_wait_time: THREAD_WAIT_TIME.as_millis() as i64,
        }
    }

    /// This thread's wake-up channel.
    pub fn channel(&self) -> String {
        format!("{}:{}", self.channel, self.id)
    }

    /// One acquire attempt: `None` = acquired, else the ttl Redisson waits at most.
    pub async fn try_acquire(&mut self, lease: Duration, wait_ms: i64) -> Option<i64> {
        let script = Script::new(&format!("{DROP_STALE_HEADS}{FAIR_ACQUIRE}"));
        let reply: Option<i64> = script
            .key(&self.name)
            .key(&self.queue)
            .key(&self.scores)
            .arg(lease.as_millis() as u64)
            .arg(&self.id)
            .arg(wait_ms)
            .arg(client_now())
            .invoke_async(&mut self.conn)
            .await
            .unwrap();
        reply
    }

    async fn subscribe(&self) -> redis::aio::PubSub {
        let mut pubsub = redis::Client::open(self.url.as_str())
            .unwrap()
            .get_async_pubsub()
            .await
            .unwrap();
        pubsub.subscribe(self.channel()).await.unwrap();
        pubsub
    }

    /// `lock()`: try; subscribe to its own channel; then try again after every message or
    /// when the ttl runs out (no ttl: messages only). Returns how its last wait ended.
    pub async fn lock(&mut self, lease: Duration) -> WokenBy {
        let wait = self.thread_wait_time;
        if self.try_acquire(lease, wait).await.is_none() {
            return WokenBy::NoWait;
        }
        let mut pubsub = self.subscribe().await;
        let mut messages = pubsub.on_message();
        let mut woken = WokenBy::NoWait;
        loop {
            let Some(ttl) = self.try_acquire(lease, wait).await else {
                return woken;
            };
            woken = if ttl >= 0 {
                match tokio::time::timeout(Duration::from_millis(ttl as u64), messages.next()).await
                {
                    Ok(_) => WokenBy::Message,
                    Err(_) => WokenBy::Timer,
                }
            } else {
                messages.next().await;
                WokenBy::Message
            };
        }
    }

    /// `tryLock(waitTime, leaseTime)`: as [`lock`](Self::lock) within `wait`; on giving up,
    /// `acquireFailed` (those behind lose `wait` from their scores). `true` when acquired.
    pub async fn try_lock(&mut self, wait: Duration, lease: Duration) -> bool {
        let wait_ms = wait.as_millis() as i64;
        let deadline = tokio::time::Instant::now() + wait;
        if self.try_acquire(lease, wait_ms).await.is_none() {
            return true;
        }
        let mut pubsub = self.subscribe().await;
        let mut messages = pubsub.on_message();
        loop {
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            let Some(ttl) = self.try_acquire(lease, wait_ms).await else {
                return true;
            };
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            let bound = if ttl >= 0 {
                left.min(Duration::from_millis(ttl as u64))
            } else {
                left
            };
            let _ = tokio::time::timeout(bound, messages.next()).await;
        }
        drop(messages);
        self.acquire_failed(wait_ms).await;
        false
    }

    /// `acquireFailed`: leaves the queue, taking `wait_ms` off everyone behind.
    pub async fn acquire_failed(&mut self, wait_ms: i64) {
        let _: () = Script::new(FAIR_ACQUIRE_FAILED)
            .key(&self.queue)
            .key(&self.scores)
            .arg(&self.id)
            .arg(wait_ms)
            .invoke_async(&mut self.conn)
            .await
            .unwrap();
    }

    /// `unlock()`: `Some(true)` released, `Some(false)` still held, `None` not the holder.
    pub async fn unlock(&mut self) -> Option<bool> {
        let script = Script::new(&format!("{DROP_STALE_HEADS}{FAIR_UNLOCK}"));
        let reply: Option<i64> = script
            .key(&self.name)
            .key(&self.queue)
            .key(&self.scores)
            .key(&self.channel)
            .arg(WATCHDOG_LEASE.as_millis() as u64)
            .arg(&self.id)
            .arg(client_now())
            .invoke_async(&mut self.conn)
            .await
            .unwrap();
        reply.map(|r| r == 1)
    }
}

/// Random lower-case hex of `bytes` bytes (Redisson's `generateId` is 16 random bytes, hex).
pub fn random_hex(bytes: usize) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut out = String::new();
    while out.len() < bytes * 2 {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        hasher.write_u128(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos(),
        );
        out.push_str(&format!("{:016x}", hasher.finish()));
    }
    out.truncate(bytes * 2);
    out
}

/// The bytes a hex id stands for (`ByteBufUtil.decodeHexDump`).
pub fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// Reclaims expired permits (by the client's clock), as most of Redisson's semaphore scripts
/// begin. KEYS: count, timeouts, channel (in that order in the scripts below).
const SEM_RECLAIM: &str = r"
local function reclaim(count, timeouts, channel, now, limit)
  local expired = redis.call('zrangebyscore', timeouts, 0, now, 'limit', 0, limit)
  if #expired > 0 then
    redis.call('zrem', timeouts, unpack(expired))
    local value = redis.call('incrby', count, #expired)
    if tonumber(value) > 0 then
      redis.call('publish', channel, value)
    end
  end
end
";

/// `tryAcquireAsync(ids, timeoutDate)`. KEYS: count, timeouts, channel. ARGV: n, lease end
/// (or the non-expirable score), client now, non-expirable score, raw ids…
const SEM_ACQUIRE: &str = r"
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[1])
local value = redis.call('get', KEYS[1])
if value and tonumber(value) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  for i = 5, #ARGV do
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
  end
  return 'OK'
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[1] and first[2] ~= ARGV[4] then
  return ':' .. tostring(first[2])
end
return nil
";

/// `tryReleaseAsync(id)`. KEYS: count, channel, timeouts. ARGV: raw id, client now.
const SEM_RELEASE: &str = r"
local expire = redis.call('zscore', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[3], ARGV[1]) ~= 1 then
  return 0
end
local value = redis.call('incrby', KEYS[1], 1)
redis.call('publish', KEYS[2], value)
if tonumber(expire) <= tonumber(ARGV[2]) then
  return 0
end
return 1
";

/// `getLeaseTimeAsync(id)`. KEYS: count, timeouts, channel. ARGV: raw id, non-expirable
/// score, client now. Returns -1 (no lease), the ms left, or 0 (unknown).
const SEM_LEASE_TIME: &str = r"
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], -1)
local score = redis.call('zscore', KEYS[2], ARGV[1])
if score then
  if tonumber(score) == tonumber(ARGV[2]) then
    return -1
  end
  return tonumber(score) - tonumber(ARGV[3])
end
return 0
";

/// `updateLeaseTimeAsync(id, lease)`. KEYS: count, timeouts, channel. ARGV: raw id, new lease
/// end, client now.
const SEM_UPDATE_LEASE: &str = r"
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], -1)
if redis.call('zscore', KEYS[2], ARGV[1]) then
  redis.call('zadd', KEYS[2], ARGV[2], ARGV[1])
  return 1
end
return 0
";

/// `addPermitsAsync(n)`. KEYS: count, channel. ARGV: n.
const SEM_ADD: &str = r"
local value = redis.call('get', KEYS[1]) or 0
redis.call('set', KEYS[1], tonumber(value) + tonumber(ARGV[1]))
if tonumber(ARGV[1]) > 0 then
  redis.call('publish', KEYS[2], ARGV[1])
end
";

/// `setPermitsAsync(n)`: the total (available + held) becomes n. KEYS: count, channel,
/// timeouts. ARGV: n.
const SEM_SET: &str = r"
local available = redis.call('get', KEYS[1])
if not available then
  redis.call('set', KEYS[1], ARGV[1])
  redis.call('publish', KEYS[2], ARGV[1])
  return
end
local total = redis.call('zcount', KEYS[3], 0, '+inf') + tonumber(available)
if total == tonumber(ARGV[1]) then
  return
end
redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - total)
redis.call('publish', KEYS[2], ARGV[1])
";

/// `getPermitsAsync()`: available + held. KEYS: count, timeouts, channel. ARGV: client now.
const SEM_PERMITS: &str = r"
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], -1)
local available = redis.call('get', KEYS[1])
if not available then
  return 0
end
return tonumber(available) + redis.call('zcount', KEYS[2], 0, '+inf')
";

/// A Redisson client's `RPermitExpirableSemaphore` on one name.
#[derive(Debug)]
pub struct RedissonPermitSemaphore {
    conn: redis::aio::MultiplexedConnection,
    name: String,
    timeouts: String,
    channel: String,
}

impl RedissonPermitSemaphore {
    /// The semaphore `name` at `url`, on a connection of its own.
    pub async fn new(url: &str, name: &str) -> RedissonPermitSemaphore {
        let conn = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let tag = hash_tag(name);
        RedissonPermitSemaphore {
            conn,
            name: name.to_owned(),
            timeouts: format!("{tag}:timeout"),
            channel: format!("redisson_sc:{tag}"),
        }
    }

    /// `tryAcquire(n, leaseTime)` once: the new permit ids (hex) or `None`. `lease` of `None`:
    /// no lease (the non-expirable score).
    pub async fn try_acquire(&mut self, n: usize, lease: Option<Duration>) -> Option<Vec<String>> {
        let ids: Vec<String> = (0..n).map(|_| random_hex(16)).collect();
        let now = client_now();
        let end = lease.map_or(NON_EXPIRABLE, |l| now + l.as_millis() as i64);
        let script = Script::new(&format!("{SEM_RECLAIM}{SEM_ACQUIRE}"));
        let mut invocation = script.prepare_invoke();
        invocation
            .key(&self.name)
            .key(&self.timeouts)
            .key(&self.channel)
            .arg(n)
            .arg(end)
            .arg(now)
            .arg(NON_EXPIRABLE);
        for id in &ids {
            invocation.arg(hex_bytes(id));
        }
        let reply: Value = invocation.invoke_async(&mut self.conn).await.unwrap();
        match reply {
            Value::Okay => Some(ids),
            Value::SimpleString(s) if s == "OK" => Some(ids),
            Value::BulkString(b) if b == b"OK" => Some(ids),
            _ => None,
        }
    }

    /// `tryRelease(id)`: whether it was held (and unexpired).
    pub async fn try_release(&mut self, id: &str) -> bool {
        let reply: i64 = Script::new(SEM_RELEASE)
            .key(&self.name)
            .key(&self.channel)
            .key(&self.timeouts)
            .arg(hex_bytes(id))
            .arg(client_now())
            .invoke_async(&mut self.conn)
            .await
            .unwrap();
        reply == 1
    }

    /// `getLeaseTime(id)`: -1 no lease, 0 unknown, else ms left.
    pub async fn lease_time(&mut self, id: &str) -> i64 {
        Script::new(&format!("{SEM_RECLAIM}{SEM_LEASE_TIME}"))
            .key(&self.name)
            .key(&self.timeouts)
            .key(&self.channel)
            .arg(hex_bytes(id))
            .arg(NON_EXPIRABLE)
            .arg(client_now())
            .invoke_async(&mut self.conn)
            .await
            .unwrap()
    }

    /// `updateLeaseTime(id, lease)`: whether the permit was there.
    pub async fn update_lease(&mut self, id: &str, lease: Duration) -> bool {
        let now = client_now();
        let reply: i64 = Script::new(&format!("{SEM_RECLAIM}{SEM_UPDATE_LEASE}"))
            .key(&self.name)
            .key(&self.timeouts)
            .key(&self.channel)
            .arg(hex_bytes(id))
            .arg(now + lease.as_millis() as i64)
            .arg(now)
            .invoke_async(&mut self.conn)
            .await
            .unwrap();
        reply == 1
    }

    /// `addPermits(n)`.
    pub async fn add_permits(&mut self, n: i64) {
        let _: () = Script::new(SEM_ADD)
            .key(&self.name)
            .key(&self.channel)
            .arg(n)
            .invoke_async(&mut self.conn)
            .await
            .unwrap();
    }

    /// `setPermits(n)`.
    pub async fn set_permits(&mut self, n: i64) {
        let _: () = Script::new(SEM_SET)
            .key(&self.name)
            .key(&self.channel)
            .key(&self.timeouts)
            .arg(n)
            .invoke_async(&mut self.conn)
            .await
            .unwrap();
    }

    /// `getPermits()`: available + held.
    pub async fn permits(&mut self) -> i64 {
        Script::new(&format!("{SEM_RECLAIM}{SEM_PERMITS}"))
            .key(&self.name)
            .key(&self.timeouts)
            .key(&self.channel)
            .arg(client_now())
            .invoke_async(&mut self.conn)
            .await
            .unwrap()
    }
}

/// `RedissonCountDownLatch`: its scripts exactly as Redisson sends them (the publish command and
/// the messages as arguments), its `getCount` (`GET`, missing = 0) and its `await` loop.
/// Messages: `1` a new count (the latch closes), `0` zero (it opens).
const LATCH_TRY_SET_COUNT: &str = "if redis.call('exists', KEYS[1]) == 0 then \
    redis.call('set', KEYS[1], ARGV[2]); redis.call(ARGV[3], KEYS[2], ARGV[1]); return 1 \
    else return 0 end";
const LATCH_COUNT_DOWN: &str = "local v = redis.call('decr', KEYS[1]);\
    if v <= 0 then redis.call('del', KEYS[1]) end;\
    if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;";

/// A Redisson client's `RCountDownLatch` on one name.
#[derive(Debug)]
pub struct RedissonLatch {
    url: String,
    conn: redis::aio::MultiplexedConnection,
    name: String,
    /// `redisson_countdownlatch__channel__{name}`.
    pub channel: String,
}

impl RedissonLatch {
    /// The latch `name` at `url`, on a connection of its own.
    pub async fn new(url: &str, name: &str) -> RedissonLatch {
        let conn = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        RedissonLatch {
            url: url.to_owned(),
            conn,
            name: name.to_owned(),
            channel: format!("redisson_countdownlatch__channel__{{{name}}}"),
        }
    }

    /// `trySetCount(count)`.
    pub async fn try_set_count(&mut self, count: i64) -> bool {
        let reply: Option<i64> = Script::new(LATCH_TRY_SET_COUNT)
            .key(&self.name)
            .key(&self.channel)
            .arg(1)
            .arg(count)
            .arg("publish")
            .invoke_async(&mut self.conn)
            .await
            .unwrap();
        reply == Some(1)
    }

    /// `countDown()`.
    pub async fn count_down(&mut self) {
        let _: Option<i64> = Script::new(LATCH_COUNT_DOWN)
            .key(&self.name)
            .key(&self.channel)
            .arg(0)
            .arg("publish")
            .invoke_async(&mut self.conn)
            .await
            .unwrap();
    }

    /// `getCount()`.
    pub async fn count(&mut self) -> i64 {
        let value: Option<i64> = redis::cmd("GET")
            .arg(&self.name)
            .query_async(&mut self.conn)
            .await
            .unwrap();
        value.unwrap_or(0)
    }

    /// `await(time, unit)`: `true` once the count is 0, re-read after each zero-count message
    /// (a new-count message wakes nobody); `false` when `wait` passed first.
    pub async fn await_zero(&mut self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        if self.count().await == 0 {
            return true;
        }
        let mut pubsub = redis::Client::open(self.url.as_str())
            .unwrap()
            .get_async_pubsub()
            .await
            .unwrap();
        pubsub.subscribe(&self.channel).await.unwrap();
        let mut messages = pubsub.on_message();
        while self.count().await > 0 {
            loop {
                let next = tokio::time::timeout_at(deadline, messages.next()).await;
                match next {
                    Err(_) | Ok(None) => return false,
                    Ok(Some(message)) if message.get_payload::<i64>() == Ok(0) => break,
                    Ok(Some(_)) => {}
                }
            }
        }
        true
    }
}
