//! The reentrant lock's scripts, one static each.

use keylatch_redis::redis::Value;
use keylatch_redis::{
    EXTEND_HASH_HOLD, LuaScript, NEXT_TOKEN, RENEW_HASH_HOLDS, RENEW_HASH_HOLDS_META,
};

pub(crate) static ACQUIRE: LuaScript = LuaScript::taking_with(
    "reentrant_acquire",
    NEXT_TOKEN,
    include_str!("lua/acquire.lua"),
)
.acquisition()
.coalescing(acquired);

/// Whether an acquire's reply means it took the lock: `nil`, or `{token}` with fencing (a
/// number is the holder's time left).
fn acquired(reply: &Value) -> bool {
    matches!(reply, Value::Nil | Value::Array(_))
}
pub(crate) static RELEASE: LuaScript =
    LuaScript::freeing("reentrant_release", include_str!("lua/release.lua")).coalescing(|_| false);
pub(crate) static RELEASE_IF_COUNT: LuaScript = LuaScript::freeing(
    "reentrant_release_if_count",
    include_str!("lua/release_if_count.lua"),
);
pub(crate) static FORCE_UNLOCK: LuaScript = LuaScript::freeing(
    "reentrant_force_unlock",
    include_str!("lua/force_unlock.lua"),
);

/// Every script of the reentrant lock, for [`Client::preload`](keylatch_redis::Client::preload).
pub static SCRIPTS: [&LuaScript; 7] = [
    &ACQUIRE,
    &RELEASE,
    &RELEASE_IF_COUNT,
    &RENEW_HASH_HOLDS,
    &RENEW_HASH_HOLDS_META,
    &FORCE_UNLOCK,
    &EXTEND_HASH_HOLD,
];

/// The message published on the channel when the lock is fully released.
pub(crate) const UNLOCK_MESSAGE: &str = "0";
