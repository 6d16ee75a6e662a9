//! One guard's registration of a hold ([`HoldHandle`]).

use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use crate::hold::key::{HoldKey, HoldState, HoldWatch, LOST};
use crate::hold::release::HoldRelease;
use crate::hold::renew::Renewal;
use crate::hold::shared::{HoldEntry, PendingWork, Shared, begin_pending, schedule_lease};
use crate::owner::OwnerId;

/// One guard's registration of a hold. Dropping it deregisters the guard.
#[derive(Debug)]
pub struct HoldHandle {
    pub(super) shared: Option<Arc<Shared>>,
    pub(super) key: HoldKey,
    pub(super) watched: bool,
}

impl HoldHandle {
    /// The hold's state as the watchdog last saw it; a deadline that has passed is
    /// [`HoldState::Lost`].
    pub fn state(&self) -> HoldState {
        self.watch().state()
    }

    /// The hold's key and field.
    pub fn hold_key(&self) -> &HoldKey {
        &self.key
    }

    /// The hold's key.
    pub fn key(&self) -> &str {
        self.key.key()
    }

    /// The hold's field (the owner id, or a primitive's variant of it).
    pub fn field(&self) -> &str {
        self.key.field()
    }

    /// A view of the hold's state, which outlives this registration.
    pub fn watch(&self) -> HoldWatch {
        HoldWatch {
            key: self.key.clone(),
        }
    }

    /// The registry's entry of this hold, if it is still the one this handle registered on.
    fn with_entry<T>(&self, f: impl FnOnce(&mut HoldEntry) -> T) -> Option<T> {
        let shared = self.shared.as_ref()?;
        let mut holds = shared.holds.lock().expect("watchdog lock");
        match holds.entry(self.key.clone()) {
            Entry::Occupied(mut slot) if slot.key().same(&self.key) => Some(f(slot.get_mut())),
            _ => None,
        }
    }

    /// How many guards this client holds on the same hold, this one included.
    pub fn local_count(&self) -> usize {
        self.with_entry(|e| e.guards).unwrap_or(0)
    }

    /// Marks background work on this hold as under way (see
    /// [`WatchdogRegistry::begin_pending`](crate::WatchdogRegistry::begin_pending)).
    pub fn begin_pending(&self) -> Option<PendingWork> {
        Some(begin_pending(self.shared.as_ref()?, &self.key))
    }

    /// Records how the hold is released, for the client's shutdown (done by
    /// [`LockGuard::new`](crate::LockGuard::new)). Takes no registry lock.
    pub fn attach(&self, release: Arc<dyn HoldRelease>, owner: OwnerId) {
        if self.shared.is_none() {
            return;
        }
        let mut slot = self.key.cell.release.lock().expect("hold lock");
        // A hold already lost has left the registry (which took its release out first).
        if self.key.cell.state.load(Ordering::Acquire) != LOST {
            slot.get_or_insert((release, owner));
        }
    }

    /// Whether this guard's registration is in watchdog mode.
    pub fn is_watched(&self) -> bool {
        self.watched
    }

    /// Stops the watchdog renewing the hold from `at` on (its maximum hold time; the earliest
    /// given stays). The hold then ends when its last renewal's lease does, and is reported
    /// lost with [`LossReason::MaxHoldReached`](crate::LossReason::MaxHoldReached).
    pub fn set_max_hold(&self, at: Instant) {
        self.with_entry(|e| e.stop_at = Some(e.stop_at.map_or(at, |old| old.min(at))));
    }

    /// Switches this registration to `renewal` with `lease`, the hold valid `until` (the
    /// server's lease was just set): [`Renewal::Lease`] leaves watchdog mode (the hold is still
    /// renewed while another guard on it is in watchdog mode), [`Renewal::Watchdog`] enters
    /// it, first renewed a third of the lease from now.
    pub fn set_renewal(&mut self, renewal: Renewal, lease: Duration, until: Instant) {
        let watch = matches!(renewal, Renewal::Watchdog(_));
        let watched = self.watched;
        let key = self.key.clone();
        let changed = self.with_entry(|e| {
            match renewal {
                Renewal::Watchdog(script) => {
                    if !watched {
                        e.watched += 1;
                    }
                    e.script = Some(script);
                    e.lease = lease;
                    key.set_renewing(true);
                }
                Renewal::Lease => {
                    if watched {
                        e.watched -= 1;
                        if e.watched == 0 {
                            e.script = None;
                            key.set_renewing(false);
                        }
                    }
                }
            }
            key.set_until(until);
        });
        if changed.is_none() {
            return;
        }
        self.watched = watch;
        if let (true, Some(shared)) = (watch, self.shared.as_ref()) {
            let now = Instant::now();
            schedule_lease(shared, lease, now + lease / 3, now + lease * 2 / 3);
        }
    }

    /// Deregisters now (also done on drop). Returns how many guards of this client shared the
    /// hold, this one included (0 if it had already left the registry).
    pub fn release(&mut self) -> usize {
        let Some(shared) = self.shared.take() else {
            return 0;
        };
        let mut holds = shared.holds.lock().expect("watchdog lock");
        let Entry::Occupied(mut slot) = holds.entry(self.key.clone()) else {
            return 0;
        };
        if !slot.key().same(&self.key) {
            return 0;
        }
        let entry = slot.get_mut();
        let guards = entry.guards;
        if guards == 1 {
            slot.remove();
            drop(holds);
            self.key.take_release();
            return 1;
        }
        entry.guards -= 1;
        if self.watched {
            entry.watched -= 1;
            if entry.watched == 0 {
                entry.script = None;
                self.key.set_renewing(false);
            }
        }
        guards
    }
}

impl Drop for HoldHandle {
    fn drop(&mut self) {
        self.release();
    }
}
