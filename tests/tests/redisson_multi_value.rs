//! Interop with Redisson's `RedissonFasterMultiLock`: its acquire and unlock scripts, copied
//! from Redisson (`tryLockInnerAsync`, `unlockInnerAsync`) and run from the test side with
//! Redisson's arguments (its client clock, `<uuid>:<thread>` holder), meet keylatch's
//! multi-value lock on the same group. Redisson names a value's field by the HighwayHash of
//! its encoded form (`StringCodec`: UTF-8); the fields passed here are those names, checked
//! against one computed by Redisson's own code.
use std::time::Duration;

use keylatch::redis::{Script, Value};
use keylatch_tests::redisson::{WATCHDOG_LEASE, client_now};
use keylatch_tests::{client, client_with, raw, server, unique};

/// Redisson's `tryLockInnerAsync`. ARGV: lease ms, client now, holder, fields.
const REDISSON_ACQUIRE: &str = r"
local leaseTime = tonumber(ARGV[1]);
local currentTime = tonumber(ARGV[2]);
local currentThread = ARGV[3];
local maxExpireTime = -1;
local keyExist = nil;
if (tonumber(redis.call('exists',KEYS[1])) > 0) then
   keyExist = 1;
   for i=4, #ARGV, 1 do
       local lockThread = redis.call('hget', KEYS[1], ARGV[i]);
       if(lockThread ~= false and lockThread ~= currentThread) then
           local expireFieldName = ARGV[i]..':'..lockThread..':expire_time';
           local expireTime = redis.call('hget', KEYS[1], expireFieldName);
           if(expireTime ~= false and tonumber(expireTime) > currentTime ) then
               if(tonumber(expireTime) > maxExpireTime) then
                   maxExpireTime = tonumber(expireTime);
               end;
           end
       end;
   end;
else
   keyExist = 0;
end;
if( maxExpireTime ~= -1) then
   return maxExpireTime-currentTime;
end;
for i=4, #ARGV, 1 do
   redis.call('hset', KEYS[1], ARGV[i], currentThread);
   local expireFieldName = ARGV[i]..':'..currentThread..':expire_time'
   local expireTime = redis.call('hget', KEYS[1], expireFieldName);
   local newExpireTime = leaseTime + currentTime
   if(expireTime == false or tonumber(expireTime) < newExpireTime ) then
      redis.call('hset', KEYS[1], expireFieldName, newExpireTime);
   end;
   redis.call('HINCRBY', KEYS[1], ARGV[i]..':'..currentThread..':lock_count', 1);
end;
if(keyExist == 1) then
   local expireTime = redis.call('pttl',KEYS[1]);
   if(tonumber(expireTime) > 0 and leaseTime > tonumber(expireTime)) then
       redis.call('pexpire',KEYS[1], leaseTime);
   end;
else
    redis.call('pexpire',KEYS[1], leaseTime);
end;
return nil;
";

/// Redisson's `unlockInnerAsync`. KEYS: group, channel, request latch. ARGV: holder, unlock
/// message, lease, publish command, latch timeout, client now, fields.
const REDISSON_UNLOCK: &str = r"
local val = redis.call('get', KEYS[3]);
if val ~= false then
   return tonumber(val);
end;
if(redis.call('exists', KEYS[1]) == 0) then
   redis.call(ARGV[4], KEYS[2], ARGV[2]);
   return nil;
end;
local lockName = ARGV[1];
local hasFailed = 0;
local allDeleted = 1;
local hasDeleted = 0;
local newExpireTime = tonumber(ARGV[3]) + tonumber(ARGV[6]);
for i = 7,#ARGV,1 do
   local expireTime = redis.call('hget', KEYS[1], ARGV[i]..':'..lockName..':expire_time');
   if (expireTime ~= false and tonumber(expireTime) >= tonumber(ARGV[6])) then
       if(tonumber(redis.call('hincrby', KEYS[1], ARGV[i]..':'..lockName..':lock_count',-1)) <= 0) then
           redis.call('hdel',KEYS[1], ARGV[i]..':'..lockName..':expire_time');
           redis.call('hdel',KEYS[1], ARGV[i]..':'..lockName..':lock_count');
           redis.call('hdel',KEYS[1], ARGV[i]);
           hasDeleted = 1;
       else
           if(tonumber(expireTime) < newExpireTime) then
               redis.call('hset', KEYS[1], ARGV[i]..':'..lockName..':expire_time', newExpireTime);
           end;
           allDeleted = 0;
       end;
   else
       allDeleted = 0;
       hasFailed = 1;
   end;
end;
if(hasFailed ~= 0) then
   return nil;
end;
if(hasDeleted) then
   redis.call(ARGV[4], KEYS[2], ARGV[2]);
end;
if(allDeleted == 1) then
   redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
else
   redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
   local expireTime = redis.call('pttl',KEYS[1]);
   if(tonumber(ARGV[3]) > tonumber(expireTime)) then
       redis.call('pexpire',KEYS[1], ARGV[3]);
   end;
end;
return allDeleted;
";

const HOLDER: &str = "6f1b7c1e-5b33-4c39-9c0a-2f6ed1a8c0de:1";

async fn redisson_acquire(
    conn: &mut keylatch::redis::aio::MultiplexedConnection,
    group: &str,
    fields: &[&str],
) -> Value {
    let script = Script::new(REDISSON_ACQUIRE);
    let mut invocation = script.key(group);
    invocation
        .arg(WATCHDOG_LEASE.as_millis() as u64)
        .arg(client_now())
        .arg(HOLDER);
    for field in fields {
        invocation.arg(*field);
    }
    invocation.invoke_async(conn).await.unwrap()
}

async fn redisson_unlock(
    conn: &mut keylatch::redis::aio::MultiplexedConnection,
    group: &str,
    fields: &[&str],
) -> Value {
    let script = Script::new(REDISSON_UNLOCK);
    let mut invocation = script.key(group);
    invocation
        .key(format!("redisson_lock__channel:{{{group}}}"))
        .key(format!(
            "redisson_unlock_latch:{{{group}}}:{}",
            unique("req")
        ))
        .arg(HOLDER)
        .arg(0)
        .arg(WATCHDOG_LEASE.as_millis() as u64)
        .arg("publish")
        .arg(30_000)
        .arg(client_now());
    for field in fields {
        invocation.arg(*field);
    }
    invocation.invoke_async(conn).await.unwrap()
}

#[tokio::test]
async fn redisson_holds_a_b_and_keylatch_cannot_take_b_c() {
    let server = server();
    // A 60 s fallback poll: only Redisson's unlock message lets the waiter in in time.
    let client = client_with(&server, WATCHDOG_LEASE, Duration::from_secs(60)).await;
    let mut conn = raw(&server).await;
    let group = unique("redisson-mv");
    let [a, b, _] = fields(&client, &group);
    assert_eq!(
        redisson_acquire(&mut conn, &group, &[&a, &b]).await,
        Value::Nil
    );
    let bc = client.multi_value_lock(&group, ["b", "c"]);
    assert!(bc.try_lock().await.unwrap().is_none(), "b is Redisson's");
    assert!(bc.is_locked().await.unwrap());
    let cd = client
        .multi_value_lock(&group, ["c", "d"])
        .try_lock()
        .await
        .unwrap();
    cd.expect("c and d are free").unlock().await.unwrap();
    // A waiter is woken by Redisson's unlock message.
    let waiting = tokio::spawn(async move { bc.try_lock_for(Duration::from_secs(20), None).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        redisson_unlock(&mut conn, &group, &[&a, &b]).await,
        Value::Int(1)
    );
    let got = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("not woken by Redisson's unlock")
        .unwrap()
        .unwrap();
    got.expect("taken after Redisson's unlock")
        .unlock()
        .await
        .unwrap();
}

#[tokio::test]
async fn keylatch_holds_a_b_and_redisson_cannot_take_b_c() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let group = unique("keylatch-mv");
    let [a, b, c] = fields(&client, &group);
    let guard = client
        .multi_value_lock(&group, ["a", "b"])
        .lock()
        .await
        .unwrap();
    match redisson_acquire(&mut conn, &group, &[&b, &c]).await {
        Value::Int(ttl) => assert!(ttl > 0, "Redisson must wait, got {ttl}"),
        other => panic!("Redisson took b from keylatch: {other:?}"),
    }
    // Redisson's unlock does not release what keylatch holds.
    assert_eq!(
        redisson_unlock(&mut conn, &group, &[&a, &b]).await,
        Value::Nil
    );
    guard.unlock().await.unwrap();
    assert_eq!(
        redisson_acquire(&mut conn, &group, &[&b, &c]).await,
        Value::Nil
    );
    let guard = client
        .multi_value_lock(&group, ["c"])
        .try_lock()
        .await
        .unwrap();
    assert!(guard.is_none(), "c is Redisson's");
    assert_eq!(
        redisson_unlock(&mut conn, &group, &[&b, &c]).await,
        Value::Int(1)
    );
}

/// The fields keylatch names `a`, `b`, `c` by, after checking its naming against a field
/// Redisson computed (`Hash.hash128toBase64` of "Jack_001" under `StringCodec`).
fn fields(client: &keylatch::Client, group: &str) -> [String; 3] {
    let jack = client.multi_value_lock(group, ["Jack_001"]);
    assert_eq!(jack.fields(), ["7pNoDdizVy2xY792MaFv+w"]);
    let lock = client.multi_value_lock(group, ["a", "b", "c"]);
    let fields = lock.fields();
    [fields[0].clone(), fields[1].clone(), fields[2].clone()]
}
