//! The watchdog registry: every live hold of a client, and one background task that renews the
//! watchdog-mode ones in batches.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use deadpool_redis::redis::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::commands::Commands;
use crate::keys::lease_millis;
use crate::owner::OwnerId;
use crate::release::HoldRelease;
use crate::script::LuaScript;

/// The renewal script of holds kept as an owner's field of a lock hash (the reentrant and the
/// fair lock, Redisson's layout): pass it as [`Renewal::Watchdog`]. One script for both, so
/// the watchdog renews their holds together, in the same calls.
pub static RENEW_HASH_HOLDS: LuaScript =
    LuaScript::freeing("renew_hash_holds", include_str!("lua/renew_hash_holds.lua"));

/// The most keys renewed by one script call.
pub const RENEWAL_BATCH: usize = 100;

/// What a hold's validity is, as far as this client knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HoldState {
    /// Valid until this local instant (the end of the lease as measured from when the acquire
    /// or the last successful renewal was sent).
    Valid {
        /// The local deadline.
        until: Instant,
    },
    /// A renewal found the hold gone, or none succeeded before the local deadline.
    Lost,
}

/// How a hold is kept alive.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Renewal {
    /// A fixed lease: nothing renews it.
    Lease,
    /// Renewed by the watchdog with `script`, which takes `KEYS` = the keys,
    /// `ARGV[1]` = the lease in ms, `ARGV[2..]` = one field per key, and returns one `1`
    /// (renewed), `0` (gone: the hold is lost) or `2` (gone, and not lost: a fair lock's
    /// waiter that the lock was handed to) per key.
    Watchdog(&'static LuaScript),
}

/// Every live hold of one client, keyed by (key, field), with how many guards share it.
///
/// Registration happens before an acquire returns; a guard's unlock or drop deregisters it
/// synchronously, so a renewal can never outlive its hold. One background task renews all
/// watchdog-mode holds every third of their lease (`watchdog_timeout / 3` for locks; other
/// leases, such as a fair lock's waiter timeout, on their own cadence), with at most
/// [`RENEWAL_BATCH`] keys per script call and all calls of a tick in one pipelined round trip.
#[derive(Clone, Debug)]
pub struct WatchdogRegistry {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    holds: Mutex<HashMap<HoldKey, HoldEntry>>,
    /// The next renewal tick of each lease length in use (a hold is renewed every third of
    /// its lease; holds with the same lease are renewed together).
    schedule: Mutex<HashMap<Duration, Instant>>,
    /// Woken when a new lease length appears, so the task reschedules.
    rescheduled: tokio::sync::Notify,
    /// Background releases and undos not finished yet, per hold.
    pending: Mutex<HashMap<HoldKey, usize>>,
    settled: tokio::sync::Notify,
    next_id: AtomicU64,
    ticks: AtomicU64,
    renew_calls: AtomicU64,
    renewed_keys: AtomicU64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct HoldKey {
    key: String,
    field: String,
}

/// A hold's (key, field), owned or borrowed, so the maps keyed by [`HoldKey`] can be searched
/// with two `&str` and no allocation.
trait KeyPair {
    fn pair(&self) -> (&str, &str);
}

impl KeyPair for HoldKey {
    fn pair(&self) -> (&str, &str) {
        (&self.key, &self.field)
    }
}

impl KeyPair for (&str, &str) {
    fn pair(&self) -> (&str, &str) {
        (self.0, self.1)
    }
}

impl std::hash::Hash for HoldKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.pair().hash(state);
    }
}

impl std::hash::Hash for dyn KeyPair + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.pair().hash(state);
    }
}

impl PartialEq for dyn KeyPair + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.pair() == other.pair()
    }
}

impl Eq for dyn KeyPair + '_ {}

impl<'a> std::borrow::Borrow<dyn KeyPair + 'a> for HoldKey {
    fn borrow(&self) -> &(dyn KeyPair + 'a) {
        self
    }
}

/// The borrowed form of (`key`, `field`) for a map lookup.
fn lookup<'a>(pair: &'a (&'a str, &'a str)) -> &'a (dyn KeyPair + 'a) {
    pair
}

#[derive(Debug)]
struct HoldEntry {
    id: u64,
    guards: usize,
    watched: usize,
    script: Option<&'static LuaScript>,
    lease: Duration,
    state: watch::Sender<HoldState>,
    /// How to release the hold, once a guard has attached it: what the client's shutdown
    /// uses.
    release: Option<(std::sync::Arc<dyn HoldRelease>, OwnerId)>,
    /// When it was acquired, for the lost-hold event.
    since: Instant,
}

/// Says that a hold is lost: a `warn` event with the key, the field and how long it was held.
fn report_lost(key: &HoldKey, entry: &HoldEntry, why: &'static str) {
    crate::telemetry::hold_lost();
    tracing::warn!(
        key = %key.key,
        field = %key.field,
        held_ms = u64::try_from(entry.since.elapsed().as_millis()).unwrap_or(u64::MAX),
        why,
        "hold lost"
    );
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
    pub(crate) fn start(
        commands: Arc<Commands>,
        reconnected: Arc<tokio::sync::Notify>,
    ) -> (WatchdogRegistry, tokio::task::JoinHandle<()>) {
        let shared = Arc::new(Shared::default());
        let task = tokio::spawn(run(Arc::downgrade(&shared), commands, reconnected));
        (WatchdogRegistry { shared }, task)
    }

    /// Registers one more guard on the hold (`key`, `field`), acquired at `acquired_at` with
    /// `lease`. The returned handle deregisters on drop.
    pub fn register(
        &self,
        key: &str,
        field: &str,
        lease: Duration,
        renewal: Renewal,
        acquired_at: Instant,
    ) -> HoldHandle {
        // The first renewal a third of the lease after the acquisition; an earlier tick
        // already scheduled does.
        let first_tick = acquired_at + lease / 3;
        self.register_ticking(
            key,
            field,
            lease,
            renewal,
            acquired_at + lease,
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
        key: &str,
        field: &str,
        lease: Duration,
        renewal: Renewal,
        until: Instant,
    ) -> HoldHandle {
        // The first renewal once a third of the validity left has passed; an earlier tick
        // already scheduled does, unless it would leave less than a third of it.
        let now = Instant::now();
        let left = until.saturating_duration_since(now);
        self.register_ticking(
            key,
            field,
            lease,
            renewal,
            until,
            now + left / 3,
            now + left * 2 / 3,
        )
    }

    /// Registers a guard on a hold valid `until`; a watchdog-mode hold is first renewed at
    /// `first_tick`, or at the tick already scheduled for its lease if that comes no later than
    /// `latest_tick`.
    #[allow(clippy::too_many_arguments)]
    fn register_ticking(
        &self,
        key: &str,
        field: &str,
        lease: Duration,
        renewal: Renewal,
        until: Instant,
        first_tick: Instant,
        latest_tick: Instant,
    ) -> HoldHandle {
        let hold_key = HoldKey {
            key: key.to_owned(),
            field: field.to_owned(),
        };
        let acquired_at = until.checked_sub(lease).unwrap_or(until);
        let mut holds = self.shared.holds.lock().expect("watchdog lock");
        let entry = holds.entry(hold_key.clone()).or_insert_with(|| HoldEntry {
            id: self.shared.next_id.fetch_add(1, Ordering::Relaxed),
            guards: 0,
            watched: 0,
            script: None,
            lease,
            state: watch::channel(HoldState::Valid { until }).0,
            release: None,
            since: acquired_at,
        });
        entry.guards += 1;
        let watched = matches!(renewal, Renewal::Watchdog(_));
        if let Renewal::Watchdog(script) = renewal {
            entry.watched += 1;
            entry.script = Some(script);
            entry.lease = lease;
            let mut schedule = self.shared.schedule.lock().expect("watchdog lock");
            match schedule.entry(lease) {
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(first_tick);
                    self.shared.rescheduled.notify_one();
                }
                std::collections::hash_map::Entry::Occupied(mut slot) => {
                    if *slot.get() > latest_tick {
                        slot.insert(first_tick);
                        self.shared.rescheduled.notify_one();
                    }
                }
            }
        }
        // A fresh acquisition set the key's expiry anew.
        entry.state.send_modify(|state| {
            if let HoldState::Valid { until: old } = state {
                *old = (*old).max(until);
            }
        });
        HoldHandle {
            shared: Some(self.shared.clone()),
            key: hold_key,
            id: entry.id,
            watched,
            state: entry.state.subscribe(),
        }
    }

    /// How many live guards this client has on (`key`, `field`).
    pub fn local_count(&self, key: &str, field: &str) -> usize {
        let holds = self.shared.holds.lock().expect("watchdog lock");
        holds.get(lookup(&(key, field))).map_or(0, |e| e.guards)
    }

    /// Marks background work (a release or an undo) on (`key`, `field`) as under way until the
    /// returned handle drops. [`settled`](WatchdogRegistry::settled) waits for it.
    pub fn begin_pending(&self, key: &str, field: &str) -> PendingWork {
        let hold_key = HoldKey {
            key: key.to_owned(),
            field: field.to_owned(),
        };
        *self
            .shared
            .pending
            .lock()
            .expect("watchdog lock")
            .entry(hold_key.clone())
            .or_default() += 1;
        PendingWork {
            shared: self.shared.clone(),
            key: hold_key,
        }
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
        let pending = self.shared.pending.lock().expect("watchdog lock");
        pending.is_empty() || !pending.contains_key(lookup(&(key, field)))
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
    /// and returned with its release and how many guards share it, for the caller to release.
    /// Holds no guard has attached a release to are dropped.
    pub(crate) fn take_all(&self) -> Vec<(Arc<dyn HoldRelease>, OwnerId, usize)> {
        let mut holds = self.shared.holds.lock().expect("watchdog lock");
        holds
            .drain()
            .filter_map(|(_, entry)| {
                entry.state.send_replace(HoldState::Lost);
                let (release, owner) = entry.release?;
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

/// Background work under way on one hold; see [`WatchdogRegistry::begin_pending`].
#[derive(Debug)]
pub struct PendingWork {
    shared: Arc<Shared>,
    key: HoldKey,
}

impl Drop for PendingWork {
    fn drop(&mut self) {
        let mut pending = self.shared.pending.lock().expect("watchdog lock");
        if let Some(count) = pending.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                pending.remove(&self.key);
            }
        }
        drop(pending);
        self.shared.settled.notify_waiters();
    }
}

/// One guard's registration of a hold. Dropping it deregisters the guard.
#[derive(Debug)]
pub struct HoldHandle {
    shared: Option<Arc<Shared>>,
    key: HoldKey,
    id: u64,
    watched: bool,
    state: watch::Receiver<HoldState>,
}

impl HoldHandle {
    /// The hold's state as the watchdog last saw it.
    pub fn state(&self) -> HoldState {
        let state = *self.state.borrow();
        match state {
            HoldState::Valid { until } if until <= Instant::now() => HoldState::Lost,
            other => other,
        }
    }

    /// The hold's key.
    pub fn key(&self) -> &str {
        &self.key.key
    }

    /// The hold's field (the owner id, or a primitive's variant of it).
    pub fn field(&self) -> &str {
        &self.key.field
    }

    /// A receiver of the hold's state.
    pub fn subscribe(&self) -> watch::Receiver<HoldState> {
        self.state.clone()
    }

    /// How many guards this client holds on the same hold, this one included.
    pub fn local_count(&self) -> usize {
        let Some(shared) = &self.shared else { return 0 };
        let holds = shared.holds.lock().expect("watchdog lock");
        holds
            .get(&self.key)
            .filter(|e| e.id == self.id)
            .map_or(0, |e| e.guards)
    }

    /// Marks background work on this hold as under way (see
    /// [`WatchdogRegistry::begin_pending`]).
    pub fn begin_pending(&self) -> Option<PendingWork> {
        let shared = self.shared.as_ref()?;
        WatchdogRegistry {
            shared: shared.clone(),
        }
        .begin_pending(&self.key.key, &self.key.field)
        .into()
    }

    /// Records how the hold is released, for the client's shutdown (done by
    /// [`LockGuard::new`](crate::LockGuard::new)).
    pub fn attach(&self, release: Arc<dyn HoldRelease>, owner: OwnerId) {
        let Some(shared) = &self.shared else { return };
        let mut holds = shared.holds.lock().expect("watchdog lock");
        if let Some(entry) = holds.get_mut(&self.key).filter(|e| e.id == self.id) {
            entry.release.get_or_insert((release, owner));
        }
    }

    /// Deregisters now (also done on drop).
    pub fn release(&mut self) {
        let Some(shared) = self.shared.take() else {
            return;
        };
        let mut holds = shared.holds.lock().expect("watchdog lock");
        if let Some(entry) = holds.get_mut(&self.key).filter(|e| e.id == self.id) {
            entry.guards -= 1;
            if self.watched {
                entry.watched -= 1;
                if entry.watched == 0 {
                    entry.script = None;
                }
            }
            if entry.guards == 0 {
                holds.remove(&self.key);
            }
        }
    }
}

impl Drop for HoldHandle {
    fn drop(&mut self) {
        self.release();
    }
}

struct Pending {
    key: HoldKey,
    id: u64,
    lease: Duration,
}

async fn run(shared: Weak<Shared>, commands: Arc<Commands>, reconnected: Arc<tokio::sync::Notify>) {
    loop {
        let next = {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let schedule = shared.schedule.lock().expect("watchdog lock");
            schedule.values().min().copied()
        };
        let rescheduled = {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            async move { shared.rescheduled.notified().await }
        };
        let check_now = match next {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => false,
                    _ = rescheduled => continue,
                    () = reconnected.notified() => true,
                }
            }
            None => tokio::select! {
                _ = rescheduled => continue,
                () = reconnected.notified() => true,
            },
        };
        if check_now {
            // The connection came back (the server may have restarted or been replaced):
            // every watched hold is renewed now, so a hold that is gone is known lost at once.
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let now = Instant::now();
            for next in shared.schedule.lock().expect("watchdog lock").values_mut() {
                *next = now;
            }
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        tick(&shared, &commands).await;
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

async fn tick(shared: &Shared, commands: &Commands) {
    shared.ticks.fetch_add(1, Ordering::Relaxed);
    let now = Instant::now();
    // Group the watched holds by script and lease; expire the ones past their deadline.
    let mut groups: Vec<(&'static LuaScript, Duration, Vec<Pending>)> = Vec::new();
    // On a cluster, one call's keys must share a slot, so a group is per script, lease and
    // slot: the index of each one's group that still has room.
    let mut open: HashMap<(usize, Duration, Option<u16>), usize> = HashMap::new();
    {
        let mut holds = shared.holds.lock().expect("watchdog lock");
        holds.retain(|key, entry| {
            let expired =
                matches!(*entry.state.borrow(), HoldState::Valid { until } if until <= now);
            if expired && entry.watched > 0 {
                report_lost(key, entry, "no renewal succeeded before the lease ended");
                entry.state.send_replace(HoldState::Lost);
                return false;
            }
            true
        });
        let due = due_leases(shared, &holds, now);
        for (key, entry) in holds.iter() {
            let Some(script) = entry.script.filter(|_| entry.watched > 0) else {
                continue;
            };
            if !due.contains(&entry.lease) {
                continue;
            }
            let pending = Pending {
                key: key.clone(),
                id: entry.id,
                lease: entry.lease,
            };
            // The open group of this script, lease and slot, found by a map: a linear scan
            // would cost holds × groups per tick (thousands of slots on a cluster).
            let group = (
                std::ptr::from_ref(script) as usize,
                entry.lease,
                commands.slot_of(&pending.key.key),
            );
            match open.get(&group) {
                Some(&index) if groups[index].2.len() < RENEWAL_BATCH => {
                    groups[index].2.push(pending);
                }
                _ => {
                    open.insert(group, groups.len());
                    groups.push((script, entry.lease, vec![pending]));
                }
            }
        }
    }
    if groups.is_empty() {
        return;
    }
    let calls: Vec<_> = groups
        .iter()
        .map(|(script, lease, batch)| {
            let mut call = script.call();
            for p in batch {
                call = call.key(p.key.key.clone());
            }
            call = call.arg(lease_millis(*lease));
            for p in batch {
                call = call.arg(p.key.field.as_str());
            }
            call
        })
        .collect();
    shared
        .renew_calls
        .fetch_add(calls.len() as u64, Ordering::Relaxed);
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
    // call that failed (the connection, or an error of its own) renews nothing, and its group
    // is tried again soon rather than a third of a lease later: the local deadlines run on,
    // and a hold is lost only once its deadline passes with no renewal.
    let replies: Vec<Option<Value>> = match outcome {
        Ok(replies) => replies
            .into_iter()
            .map(|reply| {
                reply
                    .inspect_err(|err| tracing::warn!(error = %err, "renewal failed; retrying"))
                    .ok()
            })
            .collect(),
        Err(err) => {
            tracing::warn!(
                error = %err,
                calls = groups.len(),
                "renewal failed; retrying"
            );
            vec![None; groups.len()]
        }
    };
    let retry_at = Instant::now();
    let mut holds = shared.holds.lock().expect("watchdog lock");
    for ((_, lease, batch), reply) in groups.iter().zip(replies) {
        let Some(Value::Array(flags)) = reply else {
            crate::telemetry::renewals("failed", batch.len() as u64);
            let mut schedule = shared.schedule.lock().expect("watchdog lock");
            if let Some(next) = schedule.get_mut(lease) {
                // Soon, and at most 250 ms later: the hold's deadline is running.
                let soon =
                    (*lease / 12).clamp(Duration::from_millis(10), Duration::from_millis(250));
                *next = (*next).min(retry_at + soon);
            }
            continue;
        };
        for (pending, flag) in batch.iter().zip(flags) {
            let renewed = matches!(flag, Value::Int(1));
            let Some(entry) = holds.get_mut(&pending.key).filter(|e| e.id == pending.id) else {
                continue;
            };
            let outcome = match flag {
                Value::Int(1) => "renewed",
                Value::Int(2) => "ended",
                _ => "gone",
            };
            crate::telemetry::renewals(outcome, 1);
            if renewed {
                shared.renewed_keys.fetch_add(1, Ordering::Relaxed);
                let until = sent_at + pending.lease;
                entry.state.send_modify(|state| {
                    if let HoldState::Valid { until: old } = state {
                        *old = (*old).max(until);
                    }
                });
            } else if entry.watched > 0 {
                if !matches!(flag, Value::Int(2)) {
                    report_lost(&pending.key, entry, "the server no longer has it");
                }
                entry.state.send_replace(HoldState::Lost);
                holds.remove(&pending.key);
            }
        }
    }
}
