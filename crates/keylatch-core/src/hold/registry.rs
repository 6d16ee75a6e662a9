//! The hold registry: every live hold of a client, its state and its guards, and the schedule
//! on which a store renews the watchdog-mode ones (the store's renewal task asks it what is due
//! with [`WatchdogRegistry::due_renewals`] and reports back with
//! [`WatchdogRegistry::renewed`]).

use std::any::Any;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::hold::release::HoldRelease;
use crate::owner::OwnerId;

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
    /// Renewed by the store's watchdog every third of its lease, the store's way (`RenewWith`;
    /// the Redis layer: a script). Holds renewed the same way with the same lease are renewed
    /// together.
    Watchdog(RenewWith),
}

/// A store's way of renewing holds (the Redis layer: its renewal script), kept by the registry
/// without knowing what it is: compared by identity, and handed back to the store's renewal
/// task, which downcasts it.
#[derive(Clone, Copy)]
pub struct RenewWith(&'static (dyn Any + Send + Sync));

impl RenewWith {
    /// Wraps the store's renewal description.
    pub const fn new(how: &'static (dyn Any + Send + Sync)) -> RenewWith {
        RenewWith(how)
    }

    /// The store's renewal description, if it is a `T`.
    pub fn downcast<T: Any>(&self) -> Option<&'static T> {
        let how: &'static (dyn Any + Send + Sync) = self.0;
        (how as &'static dyn Any).downcast_ref()
    }

    fn addr(&self) -> usize {
        std::ptr::from_ref(self.0).cast::<()>() as usize
    }
}

impl PartialEq for RenewWith {
    fn eq(&self, other: &RenewWith) -> bool {
        self.addr() == other.addr()
    }
}

impl Eq for RenewWith {}

impl fmt::Debug for RenewWith {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RenewWith").field(&self.addr()).finish()
    }
}

/// One call's worth of renewals, from [`WatchdogRegistry::due_renewals`]: holds renewed the
/// same way, with the same lease (and, on a store that partitions, in the same partition).
#[derive(Debug)]
pub struct RenewalGroup {
    /// How to renew them.
    pub with: RenewWith,
    /// Their lease.
    pub lease: Duration,
    /// The holds.
    pub holds: Vec<HoldKey>,
}

/// What a renewal found for one hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RenewalOutcome {
    /// Renewed: valid for another lease from when the renewal was sent.
    Renewed,
    /// Gone: the hold is lost.
    Gone,
    /// Gone, and not lost: it ended as the store meant it to (a fair lock's waiter that the
    /// lock was handed to).
    Ended,
}

/// The registry without keeping it alive: a store's renewal task holds this, and ends when
/// [`upgrade`](WeakRegistry::upgrade) fails (the client and its guards are gone).
#[derive(Clone, Debug)]
pub struct WeakRegistry(Weak<Shared>);

impl WeakRegistry {
    /// The registry, while it lives.
    pub fn upgrade(&self) -> Option<WatchdogRegistry> {
        self.0.upgrade().map(|shared| WatchdogRegistry { shared })
    }
}

/// A hold's name: its key and its field (the owner id, or a primitive's variant of it), in one
/// shared buffer. Cloning it counts a reference; it allocates only when made.
///
/// A primitive makes it once per acquisition and passes it to the undo guard, to the
/// registration and as the field argument of its script, so the names are formatted once.
///
/// ```
/// let hold = keylatch_core::HoldKey::new("jobs", format_args!("{}:{}", "client", 7));
/// assert_eq!((hold.key(), hold.field()), ("jobs", "client:7"));
/// ```
#[derive(Clone)]
pub struct HoldKey {
    cell: Arc<HoldCell>,
}

/// The shared part of a [`HoldKey`]: the names, and, once registered, the hold's state (read by
/// its guards without a lock).
struct HoldCell {
    /// The key, then the field (a `String`, not shrunk to a `Box<str>`: that would copy it).
    text: String,
    split: usize,
    /// [`HoldState`], encoded by [`encode`]: the deadline, or [`LOST`].
    state: AtomicU64,
    /// Woken when the hold is marked lost.
    lost: Notify,
    /// How to release the hold, once a guard has attached it: what the client's shutdown
    /// uses. Taken out when the hold leaves the registry (it holds the client).
    release: Mutex<Option<(Arc<dyn HoldRelease>, OwnerId)>>,
}

/// The encoded [`HoldState::Lost`]: above every deadline, so raising a deadline with
/// `fetch_max` leaves a lost hold lost.
const LOST: u64 = u64::MAX;
/// The state of a key never registered: a registration takes it over, where it makes a fresh
/// cell for a key registered before (whose old guards must not see a new hold as theirs).
const UNREGISTERED: u64 = u64::MAX - 1;

/// The instant deadlines are counted from (nanoseconds since it): a year before the first use,
/// so no deadline of this process comes before it (a paused test clock included; 2^64 ns is
/// 584 years).
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(|| {
        let now = Instant::now();
        now.checked_sub(Duration::from_secs(365 * 24 * 3600))
            .unwrap_or(now)
    })
}

fn encode(until: Instant) -> u64 {
    u64::try_from(until.saturating_duration_since(epoch()).as_nanos())
        .unwrap_or(UNREGISTERED - 1)
        .min(UNREGISTERED - 1)
}

fn decode(state: u64) -> HoldState {
    if state >= UNREGISTERED {
        HoldState::Lost
    } else {
        HoldState::Valid {
            until: epoch() + Duration::from_nanos(state),
        }
    }
}

impl HoldKey {
    /// The hold of `field` (anything printable: an [`OwnerId`], a `&str`, `format_args!`) on
    /// `key`.
    pub fn new(key: &str, field: impl fmt::Display) -> HoldKey {
        use std::fmt::Write as _;
        // Owner ids are at most 36 + 1 + 20 bytes; a longer field grows the buffer once.
        let mut text = String::with_capacity(key.len() + 64);
        text.push_str(key);
        let _ = write!(text, "{field}");
        HoldKey {
            cell: Arc::new(HoldCell {
                split: key.len(),
                text,
                state: AtomicU64::new(UNREGISTERED),
                lost: Notify::new(),
                release: Mutex::new(None),
            }),
        }
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.cell.text[..self.cell.split]
    }

    /// The field.
    pub fn field(&self) -> &str {
        &self.cell.text[self.cell.split..]
    }

    fn same(&self, other: &HoldKey) -> bool {
        Arc::ptr_eq(&self.cell, &other.cell)
    }

    fn state(&self) -> HoldState {
        decode(self.cell.state.load(Ordering::Acquire))
    }

    /// Raises the deadline to `until` (a lost hold stays lost).
    fn extend(&self, until: Instant) {
        self.cell.state.fetch_max(encode(until), Ordering::AcqRel);
    }

    fn mark_lost(&self) {
        self.cell.state.store(LOST, Ordering::Release);
        self.cell.lost.notify_waiters();
    }

    /// The release a guard attached, taken out (the hold left the registry).
    fn take_release(&self) -> Option<(Arc<dyn HoldRelease>, OwnerId)> {
        self.cell.release.lock().expect("hold lock").take()
    }
}

impl fmt::Debug for HoldKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HoldKey")
            .field("key", &self.key())
            .field("field", &self.field())
            .finish()
    }
}

impl PartialEq for HoldKey {
    fn eq(&self, other: &Self) -> bool {
        self.pair() == other.pair()
    }
}

impl Eq for HoldKey {}

/// A hold's (key, field), owned or borrowed, so the maps keyed by [`HoldKey`] can be searched
/// with two `&str` and no allocation.
trait KeyPair {
    fn pair(&self) -> (&str, &str);
}

impl KeyPair for HoldKey {
    fn pair(&self) -> (&str, &str) {
        (self.key(), self.field())
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

/// A view of a hold's state that outlives its registration: what a guard keeps.
#[derive(Clone, Debug)]
pub struct HoldWatch {
    key: HoldKey,
}

impl HoldWatch {
    /// The hold's state as the watchdog last saw it; a deadline that has passed is
    /// [`HoldState::Lost`].
    pub fn state(&self) -> HoldState {
        match self.key.state() {
            HoldState::Valid { until } if until <= Instant::now() => HoldState::Lost,
            other => other,
        }
    }

    /// Completes when the hold is lost: marked lost by the watchdog or the client's shutdown,
    /// or its deadline passed with no renewal. A hold deregistered without being lost (released,
    /// or forgotten) ends at its last deadline. The future owns what it needs.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let cell = self.key.cell.clone();
        async move {
            loop {
                let marked = cell.lost.notified();
                tokio::pin!(marked);
                marked.as_mut().enable();
                let current = cell.state.load(Ordering::Acquire);
                let HoldState::Valid { until } = decode(current) else {
                    return;
                };
                tokio::select! {
                    () = tokio::time::sleep_until(until) => {
                        if cell.state.load(Ordering::Acquire) == current {
                            return;
                        }
                    }
                    () = marked => {}
                }
            }
        }
    }
}

/// Every live hold of one client, keyed by (key, field), with how many guards share it.
///
/// Registration happens before an acquire returns; a guard's unlock or drop deregisters it
/// synchronously, so a renewal can never outlive its hold. One background task renews all
/// watchdog-mode holds every third of their lease (`watchdog_timeout / 3` for locks; other
/// leases, such as a fair lock's waiter timeout, on their own cadence), with at most
/// [`RENEWAL_BATCH`] keys per script call and all calls of a tick in one pipelined round trip.
///
/// Registering and deregistering allocate nothing (the [`HoldKey`] is made by the caller, and
/// shared by the map, the handle and the guard) and take one short lock (a watchdog-mode
/// registration a second one, for the renewal schedule, not nested in the first). A hold's
/// state is an atomic in its key, read by its guards without a lock.
#[derive(Clone, Debug, Default)]
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
    rescheduled: Notify,
    /// Background releases and undos not finished yet, per hold.
    pending: Mutex<HashMap<HoldKey, usize>>,
    /// How many holds have background work under way (the map's length), read without its
    /// lock.
    pending_holds: AtomicUsize,
    settled: Notify,
    ticks: AtomicU64,
    renew_calls: AtomicU64,
    renewed_keys: AtomicU64,
}

#[derive(Debug)]
struct HoldEntry {
    guards: usize,
    watched: usize,
    script: Option<RenewWith>,
    lease: Duration,
    /// When it was acquired, for the lost-hold event.
    since: Instant,
}

/// Says that a hold is lost: a `warn` event with the key, the field and how long it was held.
fn report_lost(key: &HoldKey, entry: &HoldEntry, why: &'static str) {
    crate::telemetry::hold_lost();
    tracing::warn!(target: "keylatch::watchdog",
        key = %key.key(),
        field = %key.field(),
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
        key: HoldKey,
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
    fn register_ticking(
        &self,
        key: HoldKey,
        lease: Duration,
        renewal: Renewal,
        until: Instant,
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
                    });
                    (key, entry)
                }
            };
            entry.guards += 1;
            if let Renewal::Watchdog(script) = renewal {
                entry.watched += 1;
                entry.script = Some(script);
                entry.lease = lease;
            }
            key
        };
        if watched {
            // After the hold is in the map, not nested in its lock: a tick that drops unused
            // lease lengths sees the hold, or runs before this adds its lease back.
            let mut schedule = self.shared.schedule.lock().expect("watchdog lock");
            match schedule.entry(lease) {
                Entry::Vacant(slot) => {
                    slot.insert(first_tick);
                    self.shared.rescheduled.notify_one();
                }
                Entry::Occupied(mut slot) => {
                    if *slot.get() > latest_tick {
                        slot.insert(first_tick);
                        self.shared.rescheduled.notify_one();
                    }
                }
            }
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

    /// Marks background work (a release or an undo) on the hold `key` as under way until the
    /// returned handle drops. [`settled`](WatchdogRegistry::settled) waits for it.
    pub fn begin_pending(&self, key: &HoldKey) -> PendingWork {
        let mut pending = self.shared.pending.lock().expect("watchdog lock");
        *pending.entry(key.clone()).or_default() += 1;
        self.shared
            .pending_holds
            .store(pending.len(), Ordering::SeqCst);
        PendingWork {
            shared: self.shared.clone(),
            key: key.clone(),
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
    /// and returned with its release and how many guards share it, for the caller to release.
    /// Holds no guard has attached a release to are dropped.
    pub fn take_all(&self) -> Vec<(Arc<dyn HoldRelease>, OwnerId, usize)> {
        let mut holds = self.shared.holds.lock().expect("watchdog lock");
        holds
            .drain()
            .filter_map(|(key, entry)| {
                key.mark_lost();
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
                self.shared
                    .pending_holds
                    .store(pending.len(), Ordering::SeqCst);
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
    watched: bool,
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
    /// [`WatchdogRegistry::begin_pending`]).
    pub fn begin_pending(&self) -> Option<PendingWork> {
        let shared = self.shared.as_ref()?;
        WatchdogRegistry {
            shared: shared.clone(),
        }
        .begin_pending(&self.key)
        .into()
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
            let expired = matches!(key.state(), HoldState::Valid { until } if until <= now);
            if expired && entry.watched > 0 {
                report_lost(key, entry, "no renewal succeeded before the lease ended");
                key.mark_lost();
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
                    RenewalOutcome::Gone => "gone",
                },
                1,
            );
            if *outcome == RenewalOutcome::Renewed {
                shared.renewed_keys.fetch_add(1, Ordering::Relaxed);
                key.extend(sent_at + group.lease);
            } else if slot.get().watched > 0 {
                if *outcome == RenewalOutcome::Gone {
                    report_lost(key, slot.get(), "the server no longer has it");
                }
                key.mark_lost();
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

#[cfg(test)]
mod tests {
    use super::*;

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
        first.hold_key().mark_lost();
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
        handle.hold_key().mark_lost();
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
