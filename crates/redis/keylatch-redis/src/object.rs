//! An object's lifecycle, as Redisson's `RObject` and `RExpirable` give it to every object:
//! whether it exists, deleting it, and its time to live, over every key the object is made of
//! (which share one hash slot, so one call covers them on a cluster).
//!
//! May import: the client, the command path's scripts, the core's errors and names.

use std::time::Duration;

use deadpool_redis::redis::{self, Value};
use keylatch_core::{Error, Result, lease_millis, validate_lease};

use crate::client::Client;
use crate::connection::script::LuaScript;

/// Sets or clears the time to live of every key of an object.
static OBJECT_EXPIRE: LuaScript =
    LuaScript::freeing("object_expire", include_str!("lua/object_expire.lua"));

/// Whether `key` (an object's main key) exists.
///
/// # Errors
/// Redis errors.
///
/// # Cancel safety
/// Cancel safe (a read).
pub async fn exists(client: &Client, key: &str) -> Result<bool> {
    let found: i64 = client.query(redis::cmd("EXISTS").arg(key), key).await?;
    Ok(found > 0)
}

/// Deletes `keys` (an object's keys, in one hash slot); `true` when at least one existed.
///
/// # Errors
/// Redis errors.
///
/// # Cancel safety
/// Dropping the future may or may not have deleted them; deleting again is harmless.
pub async fn delete(client: &Client, keys: &[&str]) -> Result<bool> {
    let Some(first) = keys.first() else {
        return Ok(false);
    };
    let deleted: i64 = client.query(redis::cmd("DEL").arg(keys), first).await?;
    Ok(deleted > 0)
}

/// Gives every key of `keys` (in one hash slot) the time to live `ttl`; `true` when at least
/// one existed.
///
/// # Errors
/// [`Error::InvalidLease`] for a time to live under 1 ms or over
/// [`MAX_LEASE`](keylatch_core::MAX_LEASE) (nothing sent); Redis errors.
///
/// # Cancel safety
/// Dropping the future may or may not have set it; setting it again is harmless.
pub async fn expire(client: &Client, keys: &[&str], ttl: Duration) -> Result<bool> {
    validate_lease(ttl)?;
    expire_ms(client, keys, lease_millis(ttl)).await
}

/// Removes the time to live of every key of `keys` (in one hash slot); `true` when at least
/// one had one.
///
/// # Errors
/// Redis errors.
///
/// # Cancel safety
/// Dropping the future may or may not have cleared it; clearing again is harmless.
pub async fn clear_expire(client: &Client, keys: &[&str]) -> Result<bool> {
    expire_ms(client, keys, 0).await
}

async fn expire_ms(client: &Client, keys: &[&str], ms: u64) -> Result<bool> {
    if keys.is_empty() {
        return Ok(false);
    }
    let mut call = OBJECT_EXPIRE.call();
    for key in keys {
        call = call.key(*key);
    }
    match client.eval_value(&call.arg(ms)).await? {
        Value::Int(changed) => Ok(changed == 1),
        _ => Err(Error::UnexpectedReply {
            what: "object_expire",
        }),
    }
}
