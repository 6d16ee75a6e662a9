//! A hold's name and state: [`HoldKey`] (key and field in one shared buffer, with the hold's
//! state in an atomic next to them), [`HoldState`], and [`HoldWatch`], the view a guard keeps.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::hold::reason::LossReason;
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
    pub(super) cell: Arc<HoldCell>,
}

/// The shared part of a [`HoldKey`]: the names, and, once registered, the hold's state (read by
/// its guards without a lock).
pub(super) struct HoldCell {
    /// The key, then the field (a `String`, not shrunk to a `Box<str>`: that would copy it).
    pub(super) text: String,
    pub(super) split: usize,
    /// [`HoldState`], encoded by [`encode`]: the deadline, or [`LOST`].
    pub(super) state: AtomicU64,
    /// Woken when the hold is marked lost.
    pub(super) lost: Notify,
    /// Why it was lost: set once, before the state becomes [`LOST`].
    pub(super) reason: OnceLock<LossReason>,
    /// Whether the watchdog renews it (a deadline that passes is then a failed renewal, not
    /// the end of a fixed lease).
    pub(super) renewing: AtomicBool,
    /// Whether the watchdog stopped renewing it at its maximum hold time.
    pub(super) capped: AtomicBool,
    /// When the first renewal not answered with success was sent ([`encode`]d, 0: none):
    /// since when renewals have been failing.
    pub(super) failing_since: AtomicU64,
    /// When the store last confirmed the hold valid: the acquisition, the last successful
    /// renewal or extension was sent ([`encode`]d, 0: not yet registered).
    pub(super) confirmed: AtomicU64,
    /// How to release the hold, once a guard has attached it: what the client's shutdown
    /// uses. Taken out when the hold leaves the registry (it holds the client).
    pub(super) release: Mutex<Option<(Arc<dyn HoldRelease>, OwnerId)>>,
}

/// The encoded [`HoldState::Lost`]: above every deadline, so raising a deadline with
/// `fetch_max` leaves a lost hold lost.
pub(super) const LOST: u64 = u64::MAX;
/// The state of a key never registered: a registration takes it over, where it makes a fresh
/// cell for a key registered before (whose old guards must not see a new hold as theirs).
pub(super) const UNREGISTERED: u64 = u64::MAX - 1;

/// The instant deadlines are counted from (nanoseconds since it): a year before the first use,
/// so no deadline of this process comes before it (a paused test clock included; 2^64 ns is
/// 584 years).
pub(super) fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(|| {
        let now = Instant::now();
        now.checked_sub(Duration::from_secs(365 * 24 * 3600))
            .unwrap_or(now)
    })
}

pub(super) fn encode(until: Instant) -> u64 {
    u64::try_from(until.saturating_duration_since(epoch()).as_nanos())
        .unwrap_or(UNREGISTERED - 1)
        .min(UNREGISTERED - 1)
}

fn decode_instant(state: u64) -> Instant {
    epoch() + Duration::from_nanos(state)
}

pub(super) fn decode(state: u64) -> HoldState {
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
                reason: OnceLock::new(),
                renewing: AtomicBool::new(false),
                capped: AtomicBool::new(false),
                failing_since: AtomicU64::new(0),
                confirmed: AtomicU64::new(0),
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

    pub(crate) fn same(&self, other: &HoldKey) -> bool {
        Arc::ptr_eq(&self.cell, &other.cell)
    }

    pub(crate) fn state(&self) -> HoldState {
        decode(self.cell.state.load(Ordering::Acquire))
    }

    /// Raises the deadline to `until` (a lost hold stays lost).
    pub(crate) fn extend(&self, until: Instant) {
        self.cell.state.fetch_max(encode(until), Ordering::AcqRel);
    }

    /// Sets the deadline to `until`, earlier or later (a lost hold stays lost).
    pub(crate) fn set_until(&self, until: Instant) {
        let value = encode(until);
        let _ = self
            .cell
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                (state < UNREGISTERED).then_some(value)
            });
    }

    /// The watchdog stopped renewing the hold: it reached its maximum hold time.
    pub(crate) fn set_capped(&self) {
        self.cell.capped.store(true, Ordering::Release);
    }

    /// Marks the hold lost for `reason` (the first reason given stays).
    pub(crate) fn mark_lost(&self, reason: LossReason) {
        let _ = self.cell.reason.set(reason);
        self.cell.state.store(LOST, Ordering::Release);
        self.cell.lost.notify_waiters();
    }

    /// Why the hold is lost, when its deadline passed unmarked: a fixed lease ran out, or no
    /// renewal succeeded in time.
    pub(crate) fn expired_reason(&self, until: Instant) -> LossReason {
        if self.cell.capped.load(Ordering::Acquire) {
            return LossReason::MaxHoldReached;
        }
        if !self.cell.renewing.load(Ordering::Acquire) {
            return LossReason::LeaseExpired;
        }
        let since = match self.cell.failing_since.load(Ordering::Acquire) {
            0 => None,
            raw => Some(decode_instant(raw)),
        };
        let for_ = since.map_or(Duration::ZERO, |since| {
            until.saturating_duration_since(since)
        });
        LossReason::RenewalFailed { for_ }
    }

    /// Records whether the watchdog renews the hold.
    pub(crate) fn set_renewing(&self, renewing: bool) {
        self.cell.renewing.store(renewing, Ordering::Release);
    }

    /// A renewal was sent at `at` (the first of those not answered with success is kept).
    pub(crate) fn renewal_due(&self, at: Instant) {
        let _ = self.cell.failing_since.compare_exchange(
            0,
            encode(at).max(1),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// A renewal sent at `sent_at` succeeded: renewals sent since then are not failing yet.
    pub(crate) fn renewal_succeeded(&self, sent_at: Instant) {
        let sent = encode(sent_at);
        let _ =
            self.cell
                .failing_since
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |since| {
                    (since != 0 && since <= sent).then_some(0)
                });
    }

    /// The store confirmed the hold valid by a request sent at `at` (an acquisition, a
    /// renewal, an extension): the latest such instant is kept.
    pub(crate) fn confirmed(&self, at: Instant) {
        self.cell
            .confirmed
            .fetch_max(encode(at).max(1), Ordering::AcqRel);
    }

    /// The store confirmed the hold valid by a request sent at `at`, until `until` (earlier or
    /// later than before: an extension).
    pub(crate) fn confirmed_until(&self, at: Instant, until: Instant) {
        self.set_until(until);
        self.confirmed(at);
    }

    /// When the store last confirmed the hold valid: when the acquisition, or the last
    /// renewal or extension that succeeded, was sent (`None` before it is registered). A
    /// store's renewal task compares it with what it saw change on the server (a restart, a
    /// failover) to say why a hold it found gone was lost.
    pub fn confirmed_at(&self) -> Option<Instant> {
        match self.cell.confirmed.load(Ordering::Acquire) {
            0 => None,
            raw => Some(decode_instant(raw)),
        }
    }

    /// Why the hold is lost, or `None` while it is valid.
    pub(crate) fn loss_reason(&self) -> Option<LossReason> {
        match self.state() {
            HoldState::Valid { until } if until > Instant::now() => None,
            HoldState::Valid { until } => Some(self.expired_reason(until)),
            HoldState::Lost => Some(self.cell.reason.get().copied().unwrap_or(LossReason::Gone)),
        }
    }

    /// The release a guard attached, taken out (the hold left the registry).
    pub(crate) fn take_release(&self) -> Option<(Arc<dyn HoldRelease>, OwnerId)> {
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
pub(super) trait KeyPair {
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
pub(super) fn lookup<'a>(pair: &'a (&'a str, &'a str)) -> &'a (dyn KeyPair + 'a) {
    pair
}

/// A view of a hold's state that outlives its registration: what a guard keeps.
#[derive(Clone, Debug)]
pub struct HoldWatch {
    pub(super) key: HoldKey,
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

    /// Why the hold is lost, or `None` while it is valid (see
    /// [`LockGuard::loss_reason`](crate::LockGuard::loss_reason)).
    pub fn loss_reason(&self) -> Option<LossReason> {
        self.key.loss_reason()
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
