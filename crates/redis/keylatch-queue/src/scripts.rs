//! The queue's scripts, one static each. Imports nothing of this crate.

use keylatch_redis::LuaScript;

const PRELUDE: &str = include_str!("lua/prelude.lua");

/// Offers an element (Redisson's effects: zset, list, channel).
pub(crate) static OFFER: LuaScript =
    LuaScript::taking_with("queue_offer", PRELUDE, include_str!("lua/offer.lua"));
/// Moves what is due and takes the destination list's head, with a claim for its undo.
pub(crate) static POLL: LuaScript =
    LuaScript::freeing_with("queue_poll", PRELUDE, include_str!("lua/poll.lua"));
/// Puts back the element of a take whose reply was lost.
pub(crate) static UNDO_POLL: LuaScript =
    LuaScript::freeing("queue_undo_poll", include_str!("lua/undo_poll.lua"));
/// Moves what is due (the transfer).
pub(crate) static TRANSFER: LuaScript =
    LuaScript::freeing_with("queue_transfer", PRELUDE, include_str!("lua/transfer.lua"));
/// Removes an element by value.
pub(crate) static REMOVE: LuaScript =
    LuaScript::freeing_with("queue_remove", PRELUDE, include_str!("lua/remove.lua"));
/// Whether a value is queued.
pub(crate) static CONTAINS: LuaScript =
    LuaScript::freeing_with("queue_contains", PRELUDE, include_str!("lua/contains.lua"));
/// The next element, not taken.
pub(crate) static PEEK: LuaScript =
    LuaScript::freeing_with("queue_peek", PRELUDE, include_str!("lua/peek.lua"));
/// Counts.
pub(crate) static COUNTS: LuaScript =
    LuaScript::freeing_with("queue_counts", PRELUDE, include_str!("lua/counts.lua"));

/// A reliable take: gives back late deliveries, moves what is due, takes into processing.
pub(crate) static TAKE_RELIABLY: LuaScript = LuaScript::taking_with(
    "queue_take_reliably",
    PRELUDE,
    include_str!("lua/take_reliably.lua"),
);
/// Acknowledges a reliable take's delivery.
pub(crate) static ACK: LuaScript = LuaScript::freeing("queue_ack", include_str!("lua/ack.lua"));

/// Every script of the queue, for [`Client::preload`](keylatch_redis::Client::preload).
pub static SCRIPTS: &[&LuaScript] = &[
    &OFFER,
    &POLL,
    &UNDO_POLL,
    &TRANSFER,
    &REMOVE,
    &CONTAINS,
    &PEEK,
    &COUNTS,
    &TAKE_RELIABLY,
    &ACK,
];
