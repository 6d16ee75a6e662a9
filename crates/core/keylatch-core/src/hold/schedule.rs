//! The renewal schedule: which watched holds are due, in groups a store's renewal task sends
//! together, and what its answers mean for each hold.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use crate::hold::key::{HoldKey, HoldState};
use crate::hold::reason::LossReason;
use crate::hold::registry::WatchdogRegistry;
use crate::hold::renew::{RenewalGroup, RenewalOutcome};
use crate::hold::shared::{HoldEntry, Shared, report_lost};

/// The renewal schedule, for a store's renewal task.
impl WatchdogRegistry {
    /// When the next renewal is due (`None`: no hold is watched).
    pub fn next_tick(&self) -> Option<Instant> {
        let schedule = self.shared.schedule.lock().expect("watchdog lock");
        schedule.values().min().copied()
    }

    /// Completes when a new lease length is scheduled (the next tick may be sooner).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub fn rescheduled(&self) -> impl Future<Output = ()> + Send + 'static {
        let shared = self.shared.clone();
        async move { shared.rescheduled.notified().await }
    }

    /// Makes every watched hold due now: after a reconnection (the server may have restarted
    /// or been replaced), so a hold that is gone is known lost at once.
    pub fn renew_all_now(&self) {
        let now = Instant::now();
        for next in self
            .shared
            .schedule
            .lock()
            .expect("watchdog lock")
            .values_mut()
        {
            *next = now;
        }
    }

    /// Starts a renewal tick: holds past their deadline are reported lost and leave the
    /// registry; the watched holds whose lease is due are returned in groups of at most
    /// `batch`, one group per way of renewing, lease and `partition` (a store whose calls
    /// must stay within one partition, such as a Redis Cluster's slot, says which each key is
    /// in; `None` for all on others).
    pub fn due_renewals(
        &self,
        now: Instant,
        batch: usize,
        partition: impl Fn(&str) -> Option<u16>,
    ) -> Vec<RenewalGroup> {
        let shared = &self.shared;
        shared.ticks.fetch_add(1, Ordering::Relaxed);
        let mut groups: Vec<RenewalGroup> = Vec::new();
        // The index of each (way, lease, partition)'s group that still has room, found by a
        // map: a linear scan would cost holds × groups per tick (thousands of slots on a
        // cluster).
        let mut open: HashMap<(usize, Duration, Option<u16>), usize> = HashMap::new();
        let mut holds = shared.holds.lock().expect("watchdog lock");
        holds.retain(|key, entry| {
            let expired = match key.state() {
                HoldState::Valid { until } if until <= now => Some(until),
                _ => None,
            };
            if let Some(until) = expired.filter(|_| entry.watched > 0) {
                let reason = key.expired_reason(until);
                report_lost(key, entry, reason);
                key.mark_lost(reason);
                key.take_release();
                return false;
            }
            true
        });
        let due = due_leases(shared, &holds, now);
        for (key, entry) in holds.iter() {
            let Some(with) = entry.script.filter(|_| entry.watched > 0) else {
                continue;
            };
            if !due.contains(&entry.lease) {
                continue;
            }
            if entry.stop_at.is_some_and(|at| at <= now) {
                // Its maximum hold time: no more renewals; the lease ends it.
                key.set_capped();
                continue;
            }
            // Unrenewed from this attempt on, until one succeeds.
            key.renewal_due(now);
            let group = (with.addr(), entry.lease, partition(key.key()));
            match open.get(&group) {
                Some(&index) if groups[index].holds.len() < batch => {
                    groups[index].holds.push(key.clone());
                }
                _ => {
                    open.insert(group, groups.len());
                    groups.push(RenewalGroup {
                        with,
                        lease: entry.lease,
                        holds: vec![key.clone()],
                    });
                }
            }
        }
        shared
            .renew_calls
            .fetch_add(groups.len() as u64, Ordering::Relaxed);
        groups
    }

    /// Records what a renewal call found: `None` when the call failed (the group is tried
    /// again soon, at most 250 ms later, rather than a third of a lease later: the local
    /// deadlines run on, and a hold is lost only once its deadline passes with no renewal), or
    /// one outcome per hold of the group. A renewed hold is valid for a lease from `sent_at`.
    pub fn renewed(
        &self,
        group: &RenewalGroup,
        outcomes: Option<&[RenewalOutcome]>,
        sent_at: Instant,
    ) {
        let shared = &self.shared;
        let Some(outcomes) = outcomes else {
            crate::telemetry::renewals("failed", group.holds.len() as u64);
            let retry_at = Instant::now();
            let mut schedule = shared.schedule.lock().expect("watchdog lock");
            if let Some(next) = schedule.get_mut(&group.lease) {
                let soon =
                    (group.lease / 12).clamp(Duration::from_millis(10), Duration::from_millis(250));
                *next = (*next).min(retry_at + soon);
            }
            return;
        };
        let mut holds = shared.holds.lock().expect("watchdog lock");
        for (key, outcome) in group.holds.iter().zip(outcomes) {
            let Entry::Occupied(slot) = holds.entry(key.clone()) else {
                continue;
            };
            if !slot.key().same(key) {
                continue;
            }
            crate::telemetry::renewals(
                match outcome {
                    RenewalOutcome::Renewed => "renewed",
                    RenewalOutcome::Ended => "ended",
                    RenewalOutcome::Gone | RenewalOutcome::Lost(_) => "gone",
                },
                1,
            );
            if *outcome == RenewalOutcome::Renewed {
                shared.renewed_keys.fetch_add(1, Ordering::Relaxed);
                key.renewal_succeeded(sent_at);
                key.confirmed(sent_at);
                // A hold taken out of watchdog mode meanwhile keeps the lease it was set to.
                if slot.get().watched > 0 {
                    key.extend(sent_at + group.lease);
                }
            } else if slot.get().watched > 0 {
                let reason = match *outcome {
                    RenewalOutcome::Lost(reason) => reason,
                    _ => LossReason::Gone,
                };
                if *outcome != RenewalOutcome::Ended {
                    report_lost(key, slot.get(), reason);
                }
                key.mark_lost(reason);
                key.take_release();
                slot.remove();
            }
        }
    }
}

/// The lease lengths whose tick is due now; their next tick is set a third of a lease later,
/// and lease lengths no hold uses any more are dropped.
fn due_leases(shared: &Shared, holds: &HashMap<HoldKey, HoldEntry>, now: Instant) -> Vec<Duration> {
    let mut schedule = shared.schedule.lock().expect("watchdog lock");
    schedule.retain(|lease, _| holds.values().any(|e| e.watched > 0 && e.lease == *lease));
    let mut due = Vec::new();
    for (lease, next) in schedule.iter_mut() {
        if *next <= now {
            due.push(*lease);
            *next = now + *lease / 3;
        }
    }
    due
}
