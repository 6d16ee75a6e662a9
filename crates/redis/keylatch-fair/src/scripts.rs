//! The fair lock's scripts, one static each. The scripts that change the queue share a
//! prelude (`lua/queue_lib.lua`: how keylatch waiters sit in Redisson's queue; `lua/prelude.lua`:
//! the server clock, type checks, eviction of dead waiters, waking one waiter), prepended at
//! compile time; the watchdog's refresh shares `lua/queue_lib.lua`.

use keylatch_redis::{EXTEND_HASH_HOLD, LuaScript, NEXT_TOKEN, RENEW_HASH_HOLDS};

macro_rules! with_prelude {
    ($file:literal) => {
        concat!(
            include_str!("lua/queue_lib.lua"),
            include_str!("lua/prelude.lua"),
            include_str!($file)
        )
    };
}

pub(crate) static ACQUIRE: LuaScript =
    LuaScript::taking_with("fair_acquire", NEXT_TOKEN, with_prelude!("lua/acquire.lua"))
        .acquisition();
// The scripts that free the lock may hand it to the head of the queue, with a fencing token
// (`hand_off` in lua/prelude.lua): they carry NEXT_TOKEN too.
pub(crate) static RELEASE: LuaScript =
    LuaScript::freeing_with("fair_release", NEXT_TOKEN, with_prelude!("lua/release.lua"));
pub(crate) static RELEASE_IF_COUNT: LuaScript = LuaScript::freeing_with(
    "fair_release_if_count",
    NEXT_TOKEN,
    with_prelude!("lua/release_if_count.lua"),
);
pub(crate) static FORCE_UNLOCK: LuaScript = LuaScript::freeing_with(
    "fair_force_unlock",
    NEXT_TOKEN,
    with_prelude!("lua/force_unlock.lua"),
);
pub(crate) static LEAVE: LuaScript =
    LuaScript::freeing_with("fair_leave", NEXT_TOKEN, with_prelude!("lua/leave.lua"));
pub(crate) static REFRESH_WAITERS: LuaScript = LuaScript::freeing(
    "fair_refresh_waiters",
    concat!(
        include_str!("lua/queue_lib.lua"),
        include_str!("lua/refresh_waiters.lua")
    ),
);
pub(crate) static QUEUE: LuaScript =
    LuaScript::freeing("fair_queue", include_str!("lua/queue.lua"));

/// Every script of the fair lock, for [`Client::preload`](keylatch_redis::Client::preload).
pub static SCRIPTS: &[&LuaScript] = &[
    &ACQUIRE,
    &RELEASE,
    &RELEASE_IF_COUNT,
    &FORCE_UNLOCK,
    &LEAVE,
    &RENEW_HASH_HOLDS,
    &REFRESH_WAITERS,
    &QUEUE,
    &EXTEND_HASH_HOLD,
];
