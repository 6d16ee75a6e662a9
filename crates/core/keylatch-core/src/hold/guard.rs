//! The guard every lock returns.

use std::fmt;
use std::sync::Arc;

use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::error::Result;
use crate::hold::background::Background;
use crate::hold::extend::HoldExtend;
use crate::hold::handle::HoldHandle;
use crate::hold::key::{HoldKey, HoldState, HoldWatch};
use crate::hold::reason::LossReason;
use crate::hold::release::HoldRelease;
use crate::owner::{Owner, OwnerId};

/// Proof of a hold, returned by every lock of keylatch.
///
/// - [`unlock`](LockGuard::unlock) releases it and reports errors (for example
///   [`NotHeld`](crate::Error::NotHeld) when the lease ran out and someone else took the lock).
/// - Dropping it releases in the background (best effort; the lease ends it at the latest).
/// - [`lost`](LockGuard::lost) completes when the hold is no longer valid: the watchdog found
///   it gone, no renewal succeeded before its local deadline, or a fixed lease ran out. Work
///   that must not outlive the lock can `select!` on it.
/// - [`fencing_token`](LockGuard::fencing_token) is a number that strictly increases with each
///   acquisition of the name, when fencing is enabled: pass it to the resource you protect so
///   it can refuse writes from an older holder.
#[must_use = "dropping the guard ends the hold: the release is sent in the background (hold it, `unlock().await` it, or `forget()` it)"]
pub struct LockGuard {
    pub(super) inner: Option<Inner>,
    name: Arc<str>,
    pub(super) owner: OwnerId,
    token: Option<u64>,
    state: HoldWatch,
}

pub(super) struct Inner {
    background: Background,
    release: Arc<dyn HoldRelease>,
    pub(super) hold: HoldHandle,
    /// How to change the hold's lease, when the primitive can.
    pub(super) extend: Option<Arc<dyn HoldExtend>>,
    /// When the guard was made, for the hold-time metric.
    since: Instant,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let held = self.since.elapsed();
        tracing::debug!(target: "keylatch::lock",
            key = self.hold.key(),
            field = self.hold.field(),
            held_us = u64::try_from(held.as_micros()).unwrap_or(u64::MAX),
            "hold ended"
        );
        crate::telemetry::released(held);
    }
}

impl LockGuard {
    /// Makes a guard. For primitive implementations: call it right after the acquire reply,
    /// with the hold already registered in `background`'s registry.
    pub fn new(
        background: Background,
        name: Arc<str>,
        owner: OwnerId,
        release: Arc<dyn HoldRelease>,
        hold: HoldHandle,
        token: Option<u64>,
    ) -> LockGuard {
        let state = hold.watch();
        hold.attach(release.clone(), owner);
        LockGuard {
            inner: Some(Inner {
                background,
                release,
                hold,
                extend: None,
                since: Instant::now(),
            }),
            name,
            owner,
            token,
            state,
        }
    }

    /// Lets the guard change its hold's lease through `extend` (for primitive
    /// implementations: [`extend`](LockGuard::extend), [`set_lease`](LockGuard::set_lease) and
    /// [`watchdog`](LockGuard::watchdog) answer `Unsupported` without it).
    pub fn extendable(mut self, extend: Arc<dyn HoldExtend>) -> LockGuard {
        if let Some(inner) = self.inner.as_mut() {
            inner.extend = Some(extend);
        }
        self
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The owner the hold belongs to: acquire for it to re-enter the hold
    /// (`lock.with_owner(guard.owner())`).
    pub fn owner(&self) -> Owner {
        self.owner.owner()
    }

    /// The owner id the hold is written under (`<client-uuid>:<number>`).
    pub fn owner_id(&self) -> OwnerId {
        self.owner
    }

    /// The fencing token of this acquisition, when fencing is enabled.
    pub fn fencing_token(&self) -> Option<u64> {
        self.token
    }

    /// The local instant until which the hold is known valid, or `None` once it is lost.
    pub fn valid_until(&self) -> Option<Instant> {
        match self.state.state() {
            HoldState::Valid { until } => Some(until),
            HoldState::Lost => None,
        }
    }

    /// Whether the hold is lost (see [`lost`](LockGuard::lost)).
    pub fn is_lost(&self) -> bool {
        self.valid_until().is_none()
    }

    /// Why the hold is lost, or `None` while it is valid (whenever
    /// [`is_lost`](LockGuard::is_lost) is true, this is `Some`). Reads no lock while the hold
    /// is valid.
    ///
    /// ```
    /// # async fn demo(guard: keylatch_core::LockGuard) {
    /// guard.lost().await;
    /// if let Some(why) = guard.loss_reason() {
    ///     eprintln!("lost the lock {}: {why}", guard.name());
    /// }
    /// # }
    /// ```
    pub fn loss_reason(&self) -> Option<LossReason> {
        self.state.loss_reason()
    }

    /// Completes when the hold is lost: the watchdog found it gone, no renewal succeeded before
    /// the lease's local deadline, or a fixed lease ran out. Never completes while the hold is
    /// valid. The future owns what it needs, so it can be spawned or kept across `select!`s.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.state.lost()
    }

    pub(super) fn not_held(&self) -> crate::Error {
        crate::Error::NotHeld {
            name: self.name.to_string(),
        }
    }

    /// Stops tracking the hold without releasing it: no renewal, no release on drop. The hold
    /// stays until its lease ends (a watchdog-mode hold: within the watchdog timeout) or until
    /// someone releases it; a plain semaphore's permits stay taken until someone releases them.
    /// For a deliberate hand-over.
    pub fn forget(mut self) {
        if let Some(mut inner) = self.inner.take() {
            inner.hold.release();
        }
    }

    /// Releases the hold.
    ///
    /// # Errors
    /// [`NotHeld`](crate::Error::NotHeld) if the hold had already ended (its lease ran out, or
    /// it was force-unlocked) — nothing is changed then; Redis errors.
    ///
    /// [`Timeout`](crate::Error::Timeout) when the release was not settled within
    /// the client's release timeout (`Config::release_timeout`; the server did not answer):
    /// it goes on in the background, retried until it is known applied or the settle window
    /// passes, and the lease ends the hold at the latest. A semaphore's release is retried
    /// until it is known applied for as long as the client lives (its permits may have no
    /// lease), and the client's `shutdown` reports it if it is still unconfirmed then.
    ///
    /// # Cancel safety
    /// The watchdog stops renewing at once. If the reply is lost, the release is settled with a
    /// conditional undo (so it happens exactly once) and `unlock` succeeds once that is done; if
    /// the future is dropped before the reply, a background task does the same.
    pub async fn unlock(mut self) -> Result<()> {
        let Some(mut inner) = self.inner.take() else {
            return Ok(());
        };
        let limit = inner.background.release_timeout();
        let span = tracing::debug_span!(target: "keylatch::lock",
            "keylatch.release",
            key = inner.hold.key(),
            field = inner.hold.field(),
            outcome = tracing::field::Empty,
        );
        // Deregistered at once (the watchdog stops renewing), counting the guards it had.
        let expected = inner.hold.release() as u64;
        let undo = UndoGuard::arm(
            &inner.background,
            inner.release.clone(),
            self.owner,
            expected,
            &inner.hold,
        );
        let owner = self.owner;
        let release = async move {
            let released = if expected == 1 {
                inner.release.release_last(owner).await
            } else {
                inner.release.release(owner).await
            };
            match released {
                // The reply was lost: the release may or may not have run. The undo releases
                // only if it did not, so once it succeeds the hold has been released once.
                Err(err) if err.is_ambiguous() => undo.run_now().await.map_err(|_| err),
                result => {
                    undo.disarm();
                    result
                }
            }
        };
        // Dropped on the timeout, the armed undo finishes the release in the background.
        let result = tokio::time::timeout(limit, release)
            .await
            .unwrap_or(Err(crate::Error::Timeout { after: limit }));
        span.record(
            "outcome",
            match &result {
                Ok(()) => "released",
                Err(crate::Error::NotHeld { .. }) => "not_held",
                Err(crate::Error::Timeout { .. }) => "timed_out",
                Err(_) => "error",
            },
        );
        result
    }
}

/// Undoes a request whose outcome is unknown: armed before the request is sent, disarmed when
/// its reply arrives. If it is dropped armed (the future was cancelled in flight) it runs
/// [`HoldRelease::release_if_count`] in the background, and until that has finished the next
/// acquire of the same hold by this client waits for it
/// ([`WatchdogRegistry::settled`](crate::WatchdogRegistry::settled)).
#[derive(Debug)]
#[must_use]
pub struct UndoGuard {
    armed: Option<UndoJob>,
}

#[derive(Debug)]
struct UndoJob {
    background: Background,
    release: Arc<dyn HoldRelease>,
    owner: OwnerId,
    expected: u64,
    key: HoldKey,
}

impl UndoGuard {
    /// A guard with nothing to undo.
    pub fn disarmed() -> UndoGuard {
        UndoGuard { armed: None }
    }

    /// Arms an undo for `owner`'s hold on `hold`'s key, whose hold count is `expected` if the
    /// request in flight took effect (for an acquire) or did not (for a release).
    pub fn arm(
        background: &Background,
        release: Arc<dyn HoldRelease>,
        owner: OwnerId,
        expected: u64,
        hold: &HoldHandle,
    ) -> UndoGuard {
        UndoGuard::arm_for_key(background, release, owner, expected, hold.hold_key())
    }

    /// As [`arm`](UndoGuard::arm), for a hold not registered yet (an acquire in flight).
    pub fn arm_for_key(
        background: &Background,
        release: Arc<dyn HoldRelease>,
        owner: OwnerId,
        expected: u64,
        key: &HoldKey,
    ) -> UndoGuard {
        UndoGuard {
            armed: Some(UndoJob {
                background: background.clone(),
                release,
                owner,
                expected,
                key: key.clone(),
            }),
        }
    }

    /// The reply arrived: nothing to undo.
    pub fn disarm(mut self) {
        self.armed = None;
    }

    /// Undoes now, and waits; if this fails too, the undo goes on in the background and the
    /// error is returned.
    ///
    /// # Errors
    /// The undo's own error (it is then retried in the background).
    pub async fn run_now(self) -> Result<()> {
        // Boxed: a rare path (a lost reply) that should not grow every acquire's and release's
        // future, which embed this one.
        Box::pin(self.undo()).await
    }

    async fn undo(mut self) -> Result<()> {
        // The undo is conditional, so repeating it is safe: once it has run, the count no
        // longer matches. Connections killed together fail together; a few tries ride that out.
        // The guard stays armed until the undo has succeeded: dropping this future mid-way
        // leaves the undo to the background.
        let mut tries = 0;
        let mut backoff = Backoff::new(
            std::time::Duration::from_millis(10),
            std::time::Duration::from_millis(40),
        );
        loop {
            let Some(job) = self.armed.as_ref() else {
                return Ok(());
            };
            match job.release.release_if_count(job.owner, job.expected).await {
                Ok(()) => {
                    self.armed = None;
                    return Ok(());
                }
                Err(err) if err.is_transient() && tries < 3 => {
                    tries += 1;
                    backoff.wait().await;
                }
                // Dropping `self` armed hands the undo to the background.
                Err(err) => return Err(err),
            }
        }
    }
}

impl Drop for UndoGuard {
    fn drop(&mut self) {
        if let Some(job) = self.armed.take() {
            let pending = job.background.registry().begin_pending(&job.key);
            let window = job.background.settle_window();
            job.background.spawn(async move {
                let _pending = pending;
                settle(&*job.release, job.owner, job.expected, window).await
            });
        }
    }
}

/// Runs the conditional undo [`HoldRelease::release_if_count`] until it is known applied (or
/// refused for good), retrying lost replies and an unreachable store with back-off for as long
/// as the client lives: the undo is conditional on the hold count, so repeating it is always
/// safe, and giving it up would leave a hold that a paused server applies on its return in
/// place until its lease ends. Past `window` it warns once and retries at most a second
/// apart, so that it reaches a returning server well within a marker's life. A client that
/// has shut down answers [`Error::Closed`](crate::Error::Closed), which ends it.
async fn settle(
    release: &dyn HoldRelease,
    owner: OwnerId,
    expected: u64,
    window: std::time::Duration,
) -> Result<()> {
    let started = Instant::now();
    let mut warned = false;
    let mut backoff = Backoff::new(
        std::time::Duration::from_millis(10),
        (window / 4).clamp(
            std::time::Duration::from_millis(10),
            std::time::Duration::from_secs(1),
        ),
    );
    loop {
        match release.release_if_count(owner, expected).await {
            Err(err) if err.is_transient() => {
                if !warned && started.elapsed() >= window {
                    warned = true;
                    tracing::warn!(target: "keylatch::client", error = %err,
                        "a release or undo is still not confirmed after the request window: \
                         retrying until the store answers");
                }
                backoff.wait().await;
            }
            other => return other,
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(mut inner) = self.inner.take() {
            let pending = inner.hold.begin_pending();
            let expected = inner.hold.release() as u64;
            let owner = self.owner;
            let release = inner.release.clone();
            let window = inner.background.settle_window();
            inner.background.spawn(async move {
                let _pending = pending;
                match release.release(owner).await {
                    Err(err) if err.is_transient() => {
                        settle(&*release, owner, expected, window).await
                    }
                    other => other,
                }
            });
        }
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.name)
            .field("owner", &self.owner)
            .field("fencing_token", &self.token)
            .field("valid_until", &self.valid_until())
            .finish()
    }
}
