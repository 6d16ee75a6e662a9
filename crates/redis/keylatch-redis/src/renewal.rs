//! The watchdog's renewal task: every third of a lease, the watched holds of a client's
//! registry that are due are renewed by their scripts, in batches of
//! [`Config::watchdog_batch_size`](crate::Config::watchdog_batch_size) keys per call (default
//! [`RENEWAL_BATCH`]) and all calls of a tick in one pipelined round trip.

use std::sync::Arc;

use deadpool_redis::redis::Value;
use keylatch_core::hold::{RenewWith, RenewalGroup, RenewalOutcome, WeakRegistry};
use keylatch_core::names::lease_millis;
use keylatch_core::{HoldKey, Renewal, WatchdogRegistry};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::connection::commands::Commands;
use crate::connection::script::LuaScript;

/// The renewal script of holds kept as an owner's field of a lock hash (the reentrant and the
/// fair lock, Redisson's layout): pass it as [`Renewal::Watchdog`] (see
/// [`LuaScript::renewal`]). One script for both, so the watchdog renews their holds together,
/// in the same calls.
pub static RENEW_HASH_HOLDS: LuaScript =
    LuaScript::freeing("renew_hash_holds", include_str!("lua/renew_hash_holds.lua"));

/// As [`RENEW_HASH_HOLDS`], and each lock's holder metadata with it: the renewal of the
/// reentrant lock's holds on a client with
/// [`Config::holder_metadata`](crate::Config::holder_metadata) (the others never touch
/// `keylatch_meta:*`, so an ACL without it keeps working).
pub static RENEW_HASH_HOLDS_META: LuaScript = LuaScript::freeing(
    "renew_hash_holds_meta",
    include_str!("lua/renew_hash_holds_meta.lua"),
);

/// The way a client renews reentrant-lock holds: with their metadata when it records it.
pub fn hash_hold_renewal(client: &crate::Client) -> Renewal {
    if client.config().holder_metadata {
        RENEW_HASH_HOLDS_META.renewal()
    } else {
        RENEW_HASH_HOLDS.renewal()
    }
}

/// The most keys renewed by one script call unless
/// [`Config::watchdog_batch_size`](crate::Config::watchdog_batch_size) says otherwise.
pub const RENEWAL_BATCH: usize = crate::connection::config::DEFAULT_WATCHDOG_BATCH;

impl LuaScript {
    /// Renewal by this script: it takes `KEYS` = the keys, `ARGV[1]` = the lease in ms,
    /// `ARGV[2..]` = one field per key, and returns one `1` (renewed), `0` (gone: the hold is
    /// lost) or `2` (gone, and not lost: a fair lock's waiter that the lock was handed to) per
    /// key.
    pub fn renewal(&'static self) -> Renewal {
        Renewal::Watchdog(RenewWith::new(self))
    }
}

/// Starts the renewal task of `registry`, renewing at most `batch` keys per script call: it
/// ends when the registry is dropped.
pub(crate) fn start(
    registry: &WatchdogRegistry,
    commands: Arc<Commands>,
    reconnected: Arc<Notify>,
    batch: usize,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(run(
        registry.downgrade(),
        commands,
        reconnected,
        batch.max(1),
    ))
}

async fn run(
    registry: WeakRegistry,
    commands: Arc<Commands>,
    reconnected: Arc<Notify>,
    batch: usize,
) {
    loop {
        let Some(live) = registry.upgrade() else {
            return;
        };
        let next = live.next_tick();
        let rescheduled = live.rescheduled();
        drop(live);
        let check_now = match next {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => false,
                    () = rescheduled => continue,
                    () = reconnected.notified() => true,
                }
            }
            None => tokio::select! {
                () = rescheduled => continue,
                () = reconnected.notified() => true,
            },
        };
        let Some(live) = registry.upgrade() else {
            return;
        };
        if check_now {
            // The connection came back (the server may have restarted or been replaced):
            // every watched hold is renewed now, so a hold that is gone is known lost at once.
            live.renew_all_now();
        }
        tick(&live, &commands, batch).await;
    }
}

async fn tick(registry: &WatchdogRegistry, commands: &Commands, batch: usize) {
    let groups = registry.due_renewals(Instant::now(), batch, |key| commands.slot_of(key));
    if groups.is_empty() {
        return;
    }
    let calls: Vec<_> = groups.iter().map(call_for).collect();
    let mut sent_at = Instant::now();
    let mut outcome = commands.eval_batch(&calls).await;
    // A connection broke (a restart, a killed connection): it has been discarded; try again,
    // on each of the others (which may be broken too) and then on a fresh one, so a lost hold
    // is still noticed within this tick.
    for _ in 0..commands.connection_count() {
        if !outcome.as_ref().is_err_and(|e| e.is_ambiguous()) {
            break;
        }
        sent_at = Instant::now();
        outcome = commands.eval_batch(&calls).await;
    }
    // Each call's answer is handled on its own: only an explicit "gone" marks a hold lost. A
    // call that failed (the connection, or an error of its own) renews nothing.
    let replies: Vec<Option<Value>> = match outcome {
        Ok(replies) => replies
            .into_iter()
            .map(|reply| {
                reply
                    .inspect_err(|err| {
                        tracing::warn!(target: "keylatch::watchdog", error = %err, "renewal failed; retrying");
                    })
                    .ok()
            })
            .collect(),
        Err(err) => {
            tracing::warn!(target: "keylatch::watchdog",
                error = %err,
                calls = groups.len(),
                "renewal failed; retrying"
            );
            vec![None; groups.len()]
        }
    };
    for (group, reply) in groups.iter().zip(replies) {
        let outcomes: Option<Vec<RenewalOutcome>> = match reply {
            Some(Value::Array(flags)) => Some(
                flags
                    .iter()
                    .zip(&group.holds)
                    .map(|(flag, hold)| match flag {
                        Value::Int(1) => RenewalOutcome::Renewed,
                        Value::Int(2) => RenewalOutcome::Ended,
                        _ => gone(commands, hold),
                    })
                    .collect(),
            ),
            _ => None,
        };
        registry.renewed(group, outcomes.as_deref(), sent_at);
    }
}

/// A hold the renewal found gone: lost because the server restarted or the primary moved,
/// if such a change concerning it was seen since it was last confirmed valid; else simply
/// gone.
fn gone(commands: &Commands, hold: &HoldKey) -> RenewalOutcome {
    hold.confirmed_at()
        .and_then(|confirmed| commands.loss_reason_since(hold.key(), confirmed))
        .map_or(RenewalOutcome::Gone, RenewalOutcome::Lost)
}

/// The script call that renews `group`.
fn call_for(group: &RenewalGroup) -> crate::connection::script::ScriptCall {
    let script: &'static LuaScript = group
        .with
        .downcast::<LuaScript>()
        .expect("the Redis layer registers its holds with a script");
    let mut call = script.call();
    for key in &group.holds {
        call = call.key(key.key());
    }
    call = call.arg(lease_millis(group.lease));
    for key in &group.holds {
        call = call.arg(key.field());
    }
    call
}
