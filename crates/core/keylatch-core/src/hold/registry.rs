//! The hold registry: every live hold of a client, its state and its guards. A store's renewal
//! task asks it what is due with [`WatchdogRegistry::due_renewals`] and reports back with
//! [`WatchdogRegistry::renewed`] (see `schedule.rs`).

use std::collections::hash_map::Entry;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::hold::handle::HoldHandle;
use crate::hold::key::{HoldKey, UNREGISTERED, encode, lookup};
use crate::hold::reason::LossReason;
use crate::hold::release::HoldRelease;
use crate::hold::renew::Renewal;
use crate::hold::shared::{HoldEntry, PendingWork, Shared, begin_pending, schedule_lease};
use crate::owner::OwnerId;

/// The registry without keeping it alive: a store's renewal task holds this, and ends when
/// [`upgrade`](WeakRegistry::upgrade) fails (the client and its guards are gone).
#[derive(Clone, Debug)]
pub struct WeakRegistry(pub(super) Weak<Shared>);

impl WeakRegistry {
    /// The registry, while it lives.
    pub fn upgrade(&self) -> Option<WatchdogRegistry> {
        self.0.upgrade().map(|shared| WatchdogRegistry { shared })
    }
}

/// Every live hold of one client, keyed by (key, field), with how many guards share it.
///
/// Registration happens before an acquire returns; a guard's unlock or drop deregisters it
/// synchronously, so a renewal can never outlive its hold. One background task renews all
/// watchdog-mode holds every third of their lease (`watchdog_timeout / 3` for locks; other
/// leases, such as a fair lock's waiter timeout, on their own cadence), in batches (see
/// [`due_renewals`](WatchdogRegistry::due_renewals)).
///
/// Registering and deregistering allocate nothing (the [`HoldKey`] is made by the caller, and
/// shared by the map, the handle and the guard) and take one short lock (a watchdog-mode
/// registration a second one, for the renewal schedule, not nested in the first). A hold's
/// state is an atomic in its key, read by its guards without a lock.
#[derive(Clone, Debug, Default)]
pub struct WatchdogRegistry {
    pub(super) shared: Arc<Shared>,
}

/// Counters of the watchdog, for tests and monitoring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchdogStats {
    /// Live holds (key and field) of this client.
    pub holds: usize,
    /// Of those, the ones the watchdog renews.
    pub watched: usize,
    /// Renewal ticks run.
    pub ticks: u64,
    /// Renewal script calls sent.
    pub renew_calls: u64,
    /// Keys renewed successfully.
    pub renewed_keys: u64,
}

impl WatchdogRegistry {
    /// An empty registry. The store's client starts its renewal task on it (with
    /// [`downgrade`](WatchdogRegistry::downgrade)).
    pub fn new() -> WatchdogRegistry {
        WatchdogRegistry {
            shared: Arc::new(Shared::default()),
        }
    }

    /// A handle that does not keep the registry alive, for the renewal task.
    pub fn downgrade(&self) -> WeakRegistry {
        WeakRegistry(Arc::downgrade(&self.shared))
    }

    /// Registers one more guard on the hold `key`, acquired at `acquired_at` with `lease`. The
    /// returned handle deregisters on drop.
    pub fn register(
        &self,
        key: HoldKey,
        lease: Duration,
        renewal: Renewal,
        acquired_at: Instant,
    ) -> HoldHandle {
        // The first renewal a third of the lease after the acquisition; an earlier tick
        // already scheduled does.
        let first_tick = acquired_at + lease / 3;
        self.register_ticking(
            key,
            lease,
            renewal,
            (acquired_at, acquired_at + lease),
            first_tick,
            first_tick + lease / 3,
        )
    }

    /// As [`register`](Self::register), for a hold known valid only `until` (sooner than a
    /// full `lease` from now: a hold handed over with a shorter lease, whose start this client
    /// can only bound). A watchdog-mode hold is first renewed once a third of that validity has
    /// passed, which extends it to the full `lease`.
    pub fn register_until(
        &self,
        key: HoldKey,
        lease: Duration,
        renewal: Renewal,
        until: Instant,
    ) -> HoldHandle {
        // The first renewal once a third of the validity left has passed; an earlier tick
        // already scheduled does, unless it would leave less than a third of it.
        let now = Instant::now();
        let left = until.saturating_duration_since(now);
        // Confirmed valid no later than now (handed over: this client saw it just now).
        self.register_ticking(
            key,
            lease,
            renewal,
            (now, until),
            now + left / 3,
            now + left * 2 / 3,
        )
    }

    /// Registers a guard on a hold confirmed valid at `confirmed`, `until`; a watchdog-mode
    /// hold is first renewed at `first_tick`, or at the tick already scheduled for its lease
    /// if that comes no later than `latest_tick`.
    fn register_ticking(
        &self,
        key: HoldKey,
        lease: Duration,
        renewal: Renewal,
        (confirmed, until): (Instant, Instant),
        first_tick: Instant,
        latest_tick: Instant,
    ) -> HoldHandle {
        let acquired_at = until.checked_sub(lease).unwrap_or(until);
        let watched = matches!(renewal, Renewal::Watchdog(_));
        let key = {
            let mut holds = self.shared.holds.lock().expect("watchdog lock");
            // The key's cell is claimed for this hold. One registered before (and since
            // deregistered or lost), or claimed by another client's registry, is copied: the
            // guards it has keep their state.
            let fresh = encode(until);
            let key = match key.cell.state.compare_exchange(
                UNREGISTERED,
                fresh,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => key,
                Err(_) => {
                    let copy = HoldKey::new(key.key(), key.field());
                    copy.cell.state.store(fresh, Ordering::Release);
                    copy
                }
            };
            let (key, entry) = match holds.entry(key) {
                Entry::Occupied(slot) => {
                    let key = slot.key().clone();
                    // A fresh acquisition set the key's expiry anew.
                    key.extend(until);
                    (key, slot.into_mut())
                }
                Entry::Vacant(slot) => {
                    let key = slot.key().clone();
                    let entry = slot.insert(HoldEntry {
                        guards: 0,
                        watched: 0,
                        script: None,
                        lease,
                        since: acquired_at,
                        stop_at: None,
                    });
                    (key, entry)
                }
            };
            entry.guards += 1;
            key.confirmed(confirmed);
            if let Renewal::Watchdog(script) = renewal {
                entry.watched += 1;
                entry.script = Some(script);
                entry.lease = lease;
                key.set_renewing(true);
            }
            key
        };
        if watched {
            // After the hold is in the map, not nested in its lock: a tick that drops unused
            // lease lengths sees the hold, or runs before this adds its lease back.
            schedule_lease(&self.shared, lease, first_tick, latest_tick);
        }
        HoldHandle {
            shared: Some(self.shared.clone()),
            key,
            watched,
        }
    }

    /// How many live guards this client has on (`key`, `field`).
    pub fn local_count(&self, key: &str, field: &str) -> usize {
        let holds = self.shared.holds.lock().expect("watchdog lock");
        holds.get(lookup(&(key, field))).map_or(0, |e| e.guards)
    }

    /// Marks the hold (`key`, `field`) lost for `reason` while it stays registered: its
    /// guards' `lost()` completes, and their release runs as usual when they are unlocked or
    /// dropped. For a store whose server still has the hold but asks this client to let go
    /// ([`LossReason::Revoked`]). Returns whether such a hold was registered.
    pub fn mark_lost(&self, key: &str, field: &str, reason: LossReason) -> bool {
        let holds = self.shared.holds.lock().expect("watchdog lock");
        match holds.get_key_value(lookup(&(key, field))) {
            Some((hold, _)) => {
                hold.mark_lost(reason);
                true
            }
            None => false,
        }
    }

    /// Marks background work (a release or an undo) on the hold `key` as under way until the
    /// returned handle drops. [`settled`](WatchdogRegistry::settled) waits for it.
    pub fn begin_pending(&self, key: &HoldKey) -> PendingWork {
        begin_pending(&self.shared, key)
    }

    /// Waits until no background release or undo on (`key`, `field`) is under way, so the next
    /// request sees the server in the state this client believes it is in.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn settled(&self, key: &str, field: &str) {
        if self.is_settled(key, field) {
            return;
        }
        // Boxed: waiting is rare, and inline it would grow every acquisition's future.
        Box::pin(self.settle(key, field)).await;
    }

    /// Whether no background release or undo on (`key`, `field`) is under way.
    fn is_settled(&self, key: &str, field: &str) -> bool {
        // Without a lock in the usual case: nothing under way at all.
        if self.shared.pending_holds.load(Ordering::SeqCst) == 0 {
            return true;
        }
        let pending = self.shared.pending.lock().expect("watchdog lock");
        !pending.contains_key(lookup(&(key, field)))
    }

    async fn settle(&self, key: &str, field: &str) {
        loop {
            let notified = self.shared.settled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_settled(key, field) {
                return;
            }
            notified.await;
        }
    }

    /// Takes every hold out of the registry (the client is shutting down): each is marked lost
    /// ([`LossReason::ClientShutdown`]) and returned with its release and how many guards share
    /// it, for the caller to release. Holds no guard has attached a release to are dropped.
    pub fn take_all(&self) -> Vec<(Arc<dyn HoldRelease>, OwnerId, usize)> {
        self.take_all_lost(LossReason::ClientShutdown)
    }

    /// As [`take_all`](Self::take_all), with the holds lost for `reason` (a store's session
    /// ended, say).
    pub fn take_all_lost(&self, reason: LossReason) -> Vec<(Arc<dyn HoldRelease>, OwnerId, usize)> {
        let mut holds = self.shared.holds.lock().expect("watchdog lock");
        holds
            .drain()
            .filter_map(|(key, entry)| {
                key.mark_lost(reason);
                let (release, owner) = key.take_release()?;
                Some((release, owner, entry.guards))
            })
            .collect()
    }

    /// Counters.
    pub fn stats(&self) -> WatchdogStats {
        let holds = self.shared.holds.lock().expect("watchdog lock");
        WatchdogStats {
            holds: holds.len(),
            watched: holds.values().filter(|e| e.watched > 0).count(),
            ticks: self.shared.ticks.load(Ordering::Relaxed),
            renew_calls: self.shared.renew_calls.load(Ordering::Relaxed),
            renewed_keys: self.shared.renewed_keys.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hold::key::HoldState;
    use crate::hold::renew::RenewWith;

    fn registry() -> WatchdogRegistry {
        // No renewal task: these tests only register and deregister.
        WatchdogRegistry::new()
    }

    static RENEWED_SOMEHOW: () = ();

    /// Registering and deregistering allocate nothing once the maps have grown to fit: the key
    /// is made once by the caller and shared by the map and the handle, and the hold's state is
    /// an atomic in it (no channel per hold). (The map's table grows with the number of holds,
    /// and once more after churn has left it with deleted slots: the warm-up does both.)
    #[test]
    fn registering_and_deregistering_allocate_nothing() {
        const HOLDS: usize = 100;
        const WARM: usize = 6;
        const ROUNDS: usize = 6;
        let registry = registry();
        // A key is registered once (registered again, it is copied): one set per round.
        let keys: Vec<Vec<HoldKey>> = (0..WARM + ROUNDS + 1)
            .map(|round| {
                (0..HOLDS)
                    .map(|i| HoldKey::new("jobs", format_args!("client:{round}:{i}")))
                    .collect()
            })
            .collect();
        let lease = Duration::from_secs(30);
        let renewal = Renewal::Watchdog(RenewWith::new(&RENEWED_SOMEHOW));
        let now = Instant::now();
        let mut handles = Vec::with_capacity(HOLDS);
        for round in &keys[..WARM] {
            handles.extend(
                round
                    .iter()
                    .map(|k| registry.register(k.clone(), lease, renewal, now)),
            );
            handles.clear();
        }
        let mut registering = allocation_counter::AllocationInfo::default();
        let mut deregistering = registering;
        let mut counted = 0;
        for round in &keys[WARM..WARM + ROUNDS] {
            registering += allocation_counter::measure(|| {
                for key in round {
                    handles.push(registry.register(key.clone(), lease, renewal, now));
                }
            });
            deregistering += allocation_counter::measure(|| {
                for handle in &mut handles {
                    counted += handle.release();
                }
            });
            handles.clear();
        }
        assert_eq!(registering.count_total, 0, "{registering:?}");
        assert_eq!(deregistering.count_total, 0, "{deregistering:?}");
        assert_eq!(counted, HOLDS * ROUNDS);
        assert_eq!(registry.stats().holds, 0);
        let round = &keys[WARM + ROUNDS];
        handles.extend(
            round
                .iter()
                .map(|k| registry.register(k.clone(), lease, renewal, now)),
        );
        assert_eq!(registry.stats().holds, 100);
        assert_eq!(registry.stats().watched, 100);
        // Another guard on one of them shares its hold.
        let again = registry.register(round[50].clone(), lease, Renewal::Lease, now);
        assert_eq!(again.local_count(), 2);
        let last = WARM + ROUNDS;
        assert_eq!(
            registry.local_count("jobs", &format!("client:{last}:50")),
            2
        );
        assert!(matches!(handles[50].state(), HoldState::Valid { .. }));
        for handle in &mut handles {
            handle.release();
        }
        assert_eq!(registry.stats().holds, 1, "one hold had two guards");
        drop(again);
        assert_eq!(registry.stats().holds, 0);
    }

    /// A guard's view of its hold outlives the registration; the same key registered again
    /// afterwards is a new hold, which does not revive the old guard's state.
    #[test]
    fn a_key_registered_again_is_a_new_hold() {
        let registry = registry();
        let key = HoldKey::new("jobs", "client:1");
        let now = Instant::now();
        let lease = Duration::from_secs(1);
        let mut first = registry.register(key.clone(), lease, Renewal::Lease, now);
        let watch = first.watch();
        assert_eq!(first.release(), 1);
        assert_eq!(first.release(), 0, "released once");
        let later = now + Duration::from_secs(60);
        let second = registry.register(key.clone(), lease, Renewal::Lease, later);
        assert_eq!(second.local_count(), 1);
        let (HoldState::Valid { until: old }, HoldState::Valid { until: new }) =
            (watch.key.state(), second.hold_key().state())
        else {
            panic!("both valid");
        };
        assert_eq!(old, now + lease);
        assert_eq!(new, later + lease);
    }

    /// One key registered with two clients' registries is two holds: one's loss is not the
    /// other's.
    #[test]
    fn a_key_in_two_registries_is_two_holds() {
        let (one, two) = (registry(), registry());
        let key = HoldKey::new("jobs", "client:1");
        let lease = Duration::from_secs(30);
        let now = Instant::now();
        let first = one.register(key.clone(), lease, Renewal::Lease, now);
        let second = two.register(key.clone(), lease, Renewal::Lease, now);
        first.hold_key().mark_lost(LossReason::Gone);
        assert_eq!(first.state(), HoldState::Lost);
        assert!(matches!(second.state(), HoldState::Valid { .. }));
    }

    /// A hold marked lost stays lost: a later renewal's deadline does not revive it, and its
    /// guards' `lost` futures complete.
    #[tokio::test]
    async fn a_lost_hold_stays_lost() {
        let registry = registry();
        let handle = registry.register(
            HoldKey::new("jobs", "client:1"),
            Duration::from_secs(30),
            Renewal::Lease,
            Instant::now(),
        );
        let watch = handle.watch();
        let lost = tokio::spawn(watch.lost());
        tokio::task::yield_now().await;
        assert!(!lost.is_finished());
        handle.hold_key().mark_lost(LossReason::Gone);
        handle
            .hold_key()
            .extend(Instant::now() + Duration::from_secs(60));
        assert_eq!(watch.state(), HoldState::Lost);
        tokio::time::timeout(Duration::from_secs(5), lost)
            .await
            .expect("lost completes")
            .unwrap();
    }

    /// The deadline as the state holds it: to the nanosecond, and later deadlines win.
    #[test]
    fn deadlines_round_trip() {
        let now = Instant::now();
        let key = HoldKey::new("k", "f");
        assert_eq!(key.state(), HoldState::Lost, "not registered yet");
        key.cell.state.store(encode(now), Ordering::Relaxed);
        key.extend(now + Duration::from_nanos(1));
        key.extend(now);
        assert_eq!(
            key.state(),
            HoldState::Valid {
                until: now + Duration::from_nanos(1)
            }
        );
    }
}
