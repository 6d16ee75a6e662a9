//! The semaphores' scripts, one static each. The permit-expirable semaphore's scripts that
//! read the count start with `lua/exp_prelude.lua` (its helpers), joined at build time.

use keylatch_redis::LuaScript;

pub(crate) static ACQUIRE: LuaScript =
    LuaScript::taking("semaphore_acquire", include_str!("lua/acquire.lua")).acquisition();
pub(crate) static UNDO_ACQUIRE: LuaScript = LuaScript::freeing(
    "semaphore_undo_acquire",
    include_str!("lua/undo_acquire.lua"),
);
pub(crate) static ADD: LuaScript = LuaScript::freeing("semaphore_add", include_str!("lua/add.lua"));
pub(crate) static TRY_SET: LuaScript =
    LuaScript::taking("semaphore_try_set", include_str!("lua/try_set.lua"));
pub(crate) static SET: LuaScript = LuaScript::taking("semaphore_set", include_str!("lua/set.lua"));
pub(crate) static DRAIN: LuaScript =
    LuaScript::taking("semaphore_drain", include_str!("lua/drain.lua"));

pub(crate) static EXP_ACQUIRE: LuaScript = LuaScript::taking(
    "expirable_semaphore_acquire",
    concat!(
        include_str!("lua/exp_prelude.lua"),
        include_str!("lua/exp_acquire.lua")
    ),
)
.acquisition();
pub(crate) static EXP_RELEASE: LuaScript = LuaScript::freeing(
    "expirable_semaphore_release",
    concat!(
        include_str!("lua/exp_prelude.lua"),
        include_str!("lua/exp_release.lua")
    ),
);
pub(crate) static EXP_RELEASE_ALL: LuaScript = LuaScript::freeing(
    "expirable_semaphore_release_all",
    concat!(
        include_str!("lua/exp_prelude.lua"),
        include_str!("lua/exp_release_all.lua")
    ),
);
pub(crate) static EXP_UNDO: LuaScript = LuaScript::freeing(
    "expirable_semaphore_undo_acquire",
    concat!(
        include_str!("lua/exp_prelude.lua"),
        include_str!("lua/exp_undo.lua")
    ),
);
pub(crate) static EXP_UPDATE: LuaScript = LuaScript::freeing(
    "expirable_semaphore_update_lease",
    concat!(
        include_str!("lua/exp_prelude.lua"),
        include_str!("lua/exp_update.lua")
    ),
);
pub(crate) static EXP_LEASE: LuaScript = LuaScript::freeing(
    "expirable_semaphore_lease",
    concat!(
        include_str!("lua/exp_prelude.lua"),
        include_str!("lua/exp_lease.lua")
    ),
);
pub(crate) static EXP_SET: LuaScript = LuaScript::taking(
    "expirable_semaphore_set",
    concat!(
        include_str!("lua/exp_prelude.lua"),
        include_str!("lua/exp_set.lua")
    ),
);
pub(crate) static EXP_RENEW: LuaScript = LuaScript::freeing(
    "expirable_semaphore_renew",
    include_str!("lua/exp_renew.lua"),
);
pub(crate) static EXP_COUNTS: LuaScript = LuaScript::freeing(
    "expirable_semaphore_counts",
    concat!(
        include_str!("lua/exp_prelude.lua"),
        include_str!("lua/exp_counts.lua")
    ),
);
pub(crate) static EXP_ADD: LuaScript = LuaScript::taking(
    "expirable_semaphore_add",
    concat!(
        include_str!("lua/exp_prelude.lua"),
        include_str!("lua/exp_add.lua")
    ),
);
pub(crate) static EXP_TRY_SET: LuaScript = LuaScript::taking(
    "expirable_semaphore_try_set",
    include_str!("lua/exp_try_set.lua"),
);

/// Every script of both semaphores, for [`Client::preload`](keylatch_redis::Client::preload).
pub static SCRIPTS: &[&LuaScript] = &[
    &ACQUIRE,
    &UNDO_ACQUIRE,
    &ADD,
    &TRY_SET,
    &SET,
    &DRAIN,
    &EXP_ACQUIRE,
    &EXP_RELEASE,
    &EXP_UNDO,
    &EXP_UPDATE,
    &EXP_RENEW,
    &EXP_COUNTS,
    &EXP_LEASE,
    &EXP_SET,
    &EXP_ADD,
    &EXP_TRY_SET,
];
