//! The latch's scripts, one static each. Imports nothing of this crate.

use keylatch_redis::LuaScript;

/// Sets the count of a latch that does not exist.
pub(crate) static TRY_SET_COUNT: LuaScript =
    LuaScript::taking("latch_try_set_count", include_str!("lua/try_set_count.lua"));
/// Counts down by one; publishes the zero-count message at zero.
pub(crate) static COUNT_DOWN: LuaScript =
    LuaScript::freeing("latch_count_down", include_str!("lua/count_down.lua"));
/// Deletes the latch; publishes the new-count message when it existed.
pub(crate) static DELETE: LuaScript =
    LuaScript::freeing("latch_delete", include_str!("lua/delete.lua"));

/// Every script of the latch, for [`Client::preload`](keylatch_redis::Client::preload).
pub static SCRIPTS: &[&LuaScript] = &[&TRY_SET_COUNT, &COUNT_DOWN, &DELETE];
