//! The state one client's hold registry keeps behind its lock: the holds, the renewal
//! schedule, the background work under way ([`PendingWork`]), the counters.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::hold::key::HoldKey;
use crate::hold::reason::LossReason;
use crate::hold::renew::RenewWith;

#[derive(Debug, Default)]
pub(super) struct Shared {
    pub(super) holds: Mutex<HashMap<HoldKey, HoldEntry>>,
    /// The next renewal tick of each lease length in use (a hold is renewed every third of
    /// its lease; holds with the same lease are renewed together).
    pub(super) schedule: Mutex<HashMap<Duration, Instant>>,
    /// Woken when a new lease length appears, so the task reschedules.
    pub(super) rescheduled: Notify,
    /// Background releases and undos not finished yet, per hold.
    pub(super) pending: Mutex<HashMap<HoldKey, usize>>,
    /// How many holds have background work under way (the map's length), read without its
    /// lock.
    pub(super) pending_holds: AtomicUsize,
    pub(super) settled: Notify,
    pub(super) ticks: AtomicU64,
    pub(super) renew_calls: AtomicU64,
    pub(super) renewed_keys: AtomicU64,
}

#[derive(Debug)]
pub(super) struct HoldEntry {
    pub(super) guards: usize,
    pub(super) watched: usize,
    pub(super) script: Option<RenewWith>,
    pub(super) lease: Duration,
    /// When it was acquired, for the lost-hold event.
    pub(super) since: Instant,
    /// When the watchdog stops renewing it (its maximum hold time), if ever.
    pub(super) stop_at: Option<Instant>,
}

/// Schedules renewals of `lease`: the first at `first_tick`, or at the tick already scheduled
/// if that comes no later than `latest_tick`. Call it after the hold is in the map, not nested
/// in its lock.
pub(super) fn schedule_lease(
    shared: &Shared,
    lease: Duration,
    first_tick: Instant,
    latest_tick: Instant,
) {
    let mut schedule = shared.schedule.lock().expect("watchdog lock");
    match schedule.entry(lease) {
        std::collections::hash_map::Entry::Vacant(slot) => {
            slot.insert(first_tick);
            shared.rescheduled.notify_one();
        }
        std::collections::hash_map::Entry::Occupied(mut slot) => {
            if *slot.get() > latest_tick {
                slot.insert(first_tick);
                shared.rescheduled.notify_one();
            }
        }
    }
}

/// Says that a hold is lost: a `warn` event with the key, the field, how long it was held and
/// why (`reason`, the [`LossReason`]'s text; `why`, the older, coarser text, kept for log
/// queries written against it).
pub(super) fn report_lost(key: &HoldKey, entry: &HoldEntry, reason: LossReason) {
    crate::telemetry::hold_lost();
    let why = match reason {
        LossReason::RenewalFailed { .. } => "no renewal succeeded before the lease ended",
        LossReason::MaxHoldReached => "the maximum hold time was reached",
        _ => "the server no longer has it",
    };
    tracing::warn!(target: "keylatch::watchdog",
        key = %key.key(),
        field = %key.field(),
        held_ms = u64::try_from(entry.since.elapsed().as_millis()).unwrap_or(u64::MAX),
        reason = %reason,
        why,
        "hold lost"
    );
}

/// Background work under way on one hold; see [`WatchdogRegistry::begin_pending`](crate::WatchdogRegistry::begin_pending).
#[derive(Debug)]
pub struct PendingWork {
    pub(super) shared: Arc<Shared>,
    pub(super) key: HoldKey,
}

impl Drop for PendingWork {
    fn drop(&mut self) {
        let mut pending = self.shared.pending.lock().expect("watchdog lock");
        if let Some(count) = pending.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                pending.remove(&self.key);
                self.shared
                    .pending_holds
                    .store(pending.len(), Ordering::SeqCst);
            }
        }
        drop(pending);
        self.shared.settled.notify_waiters();
    }
}

/// Marks background work on the hold `key` as under way until the returned handle drops.
pub(super) fn begin_pending(shared: &Arc<Shared>, key: &HoldKey) -> PendingWork {
    let mut pending = shared.pending.lock().expect("watchdog lock");
    *pending.entry(key.clone()).or_default() += 1;
    shared.pending_holds.store(pending.len(), Ordering::SeqCst);
    PendingWork {
        shared: shared.clone(),
        key: key.clone(),
    }
}
