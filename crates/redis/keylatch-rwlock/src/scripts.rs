//! The read-write lock's scripts, one static each.

use keylatch_redis::{LuaScript, NEXT_TOKEN};

pub(crate) static READ_ACQUIRE: LuaScript =
    LuaScript::taking("rwlock_read_acquire", include_str!("lua/read_acquire.lua")).acquisition();
pub(crate) static READ_RELEASE: LuaScript =
    LuaScript::freeing("rwlock_read_release", include_str!("lua/read_release.lua"));
pub(crate) static READ_RENEW: LuaScript =
    LuaScript::freeing("rwlock_read_renew", include_str!("lua/read_renew.lua"));
pub(crate) static READ_EXTEND: LuaScript =
    LuaScript::freeing("rwlock_read_extend", include_str!("lua/read_extend.lua"));
pub(crate) static WRITE_ACQUIRE: LuaScript = LuaScript::taking_with(
    "rwlock_write_acquire",
    NEXT_TOKEN,
    include_str!("lua/write_acquire.lua"),
)
.acquisition();
pub(crate) static WRITE_RELEASE: LuaScript = LuaScript::freeing(
    "rwlock_write_release",
    include_str!("lua/write_release.lua"),
);
pub(crate) static WRITE_RENEW: LuaScript =
    LuaScript::freeing("rwlock_write_renew", include_str!("lua/write_renew.lua"));
pub(crate) static WRITE_EXTEND: LuaScript =
    LuaScript::freeing("rwlock_write_extend", include_str!("lua/write_extend.lua"));
pub(crate) static INTENT_RENEW: LuaScript =
    LuaScript::freeing("rwlock_intent_renew", include_str!("lua/intent_renew.lua"));
pub(crate) static INTENT_WITHDRAW: LuaScript = LuaScript::freeing(
    "rwlock_intent_withdraw",
    include_str!("lua/intent_withdraw.lua"),
);
pub(crate) static FORCE_UNLOCK: LuaScript =
    LuaScript::freeing("rwlock_force_unlock", include_str!("lua/force_unlock.lua"));

/// Every script of the read-write lock, for [`Client::preload`](keylatch_redis::Client::preload).
pub static SCRIPTS: &[&LuaScript] = &[
    &READ_ACQUIRE,
    &READ_RELEASE,
    &READ_RENEW,
    &READ_EXTEND,
    &WRITE_ACQUIRE,
    &WRITE_RELEASE,
    &WRITE_RENEW,
    &WRITE_EXTEND,
    &INTENT_RENEW,
    &INTENT_WITHDRAW,
    &FORCE_UNLOCK,
];
