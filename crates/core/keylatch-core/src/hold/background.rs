//! The background-work handle a store's client gives its guards, undos and waits: the hold
//! registry, the release and settle bounds, background tasks (releases and undos whose reply
//! was lost), the acquisitions under way, and the shutdown that ends them all. Guards and the
//! command path hold this, never the whole client.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::hold::registry::WatchdogRegistry;
use crate::hold::release::{PendingReleases, ReleaseTicket};
use crate::owner::OwnerId;

/// What every guard and wait of one client shares; cheap to clone.
#[derive(Clone)]
pub struct Background {
    inner: Arc<Inner>,
}

struct Inner {
    registry: WatchdogRegistry,
    release_timeout: Duration,
    settle_window: Duration,
    /// Cancelled when the shutdown starts: new acquisitions are refused and waits end.
    closing: CancellationToken,
    /// Set once the shutdown has let go of the store: background work is no longer started.
    stopped: AtomicBool,
    /// Background releases and undos under way.
    tasks: Arc<Counter>,
    /// Acquisitions under way.
    active: Arc<Counter>,
    /// Releases the shutdown reports when it gives up on them (semaphore releases).
    releases: Arc<PendingReleases>,
}

#[derive(Debug, Default)]
struct Counter {
    pending: AtomicUsize,
    idle: Notify,
}

impl Counter {
    async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.pending.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// Decrements a counter when a background task (or an acquisition) ends, however it ends.
#[derive(Debug)]
struct Done(Arc<Counter>);

impl Done {
    fn enter(counter: &Arc<Counter>) -> Done {
        counter.pending.fetch_add(1, Ordering::AcqRel);
        Done(counter.clone())
    }
}

impl Drop for Done {
    fn drop(&mut self) {
        if self.0.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Background {
    /// A handle for a new client: its registry, and the settings of its store's configuration
    /// that every store shares (how long an `unlock` waits for the store, how long a release
    /// or undo whose reply was lost is retried).
    pub fn new(registry: WatchdogRegistry, settings: crate::HoldSettings) -> Background {
        Background {
            inner: Arc::new(Inner {
                registry,
                release_timeout: settings.release_timeout(),
                settle_window: settings.settle_window(),
                closing: CancellationToken::new(),
                stopped: AtomicBool::new(false),
                tasks: Arc::default(),
                active: Arc::default(),
                releases: Arc::default(),
            }),
        }
    }

    /// The client's hold registry.
    pub fn registry(&self) -> &WatchdogRegistry {
        &self.inner.registry
    }

    /// The longest an `unlock().await` waits for the store.
    pub fn release_timeout(&self) -> Duration {
        self.inner.release_timeout
    }

    /// How long a release or an undo whose reply was lost is retried, and how long the request
    /// markers that make those retries idempotent live.
    pub fn settle_window(&self) -> Duration {
        self.inner.settle_window
    }

    /// Runs a release or undo in the background, tracked by [`wait_idle`](Self::wait_idle).
    /// Errors are logged (a `NotHeld` at debug level: the hold had already ended). Nothing
    /// runs once the shutdown has let go of the store, or outside a tokio runtime (the lease
    /// ends the hold then).
    pub fn spawn<F>(&self, work: F)
    where
        F: Future<Output = Result<()>> + Send + 'static,
    {
        if self.inner.stopped.load(Ordering::Acquire) {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(target: "keylatch::client", "no tokio runtime: the lease will end the hold");
            return;
        };
        let done = Done::enter(&self.inner.tasks);
        handle.spawn(async move {
            let _done = done;
            match work.await {
                Ok(()) => {}
                Err(Error::NotHeld { name }) => {
                    tracing::debug!(target: "keylatch::client", lock = %name, "background release: already released");
                }
                Err(err) => {
                    tracing::warn!(target: "keylatch::client", error = %err, "background release failed");
                }
            }
        });
    }

    /// Lists a release of `permits` permits of `name` as under way until the returned ticket
    /// drops: if the [`shutdown`](Self::shutdown) gives up while it is, it reports it
    /// ([`Error::ShutdownUnfinished`]).
    pub fn track_release(&self, name: &Arc<str>, permits: u64) -> ReleaseTicket {
        self.inner.releases.track(name, permits)
    }

    /// Waits until every background release and undo has finished.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_idle(&self) {
        self.inner.tasks.idle().await;
    }

    /// Background releases and undos under way.
    pub fn pending(&self) -> usize {
        self.inner.tasks.pending.load(Ordering::Acquire)
    }

    /// Whether the shutdown has started.
    pub fn is_closed(&self) -> bool {
        self.inner.closing.is_cancelled()
    }

    /// Completes when the shutdown starts.
    pub fn closing(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.inner.closing.cancelled()
    }

    /// An attempt's outcome, or [`Error::Closed`] when the shutdown started meanwhile (what
    /// the attempt took is dropped, which releases it). For wait loops, after each attempt.
    ///
    /// # Errors
    /// The attempt's error, or `Closed`.
    pub fn open<T>(&self, outcome: Result<T>) -> Result<T> {
        if self.is_closed() {
            return Err(Error::Closed);
        }
        outcome
    }

    /// Marks an acquisition as under way until the returned value drops: refused with
    /// [`Error::Closed`] once the shutdown started, and counted so that the shutdown waits for
    /// it to end. Every primitive's wait takes one, and ends with `Closed` when
    /// [`closing`](Self::closing) completes.
    ///
    /// # Errors
    /// [`Error::Closed`].
    pub fn begin_acquisition(&self, primitive: &'static str) -> Result<Acquisition> {
        if self.is_closed() {
            return Err(Error::Closed);
        }
        Ok(Acquisition {
            _active: Done::enter(&self.inner.active),
            primitive,
            span: tracing::debug_span!(target: "keylatch::lock",
                "keylatch.acquire",
                primitive,
                lock = tracing::field::Empty,
                owner = tracing::field::Empty,
                outcome = tracing::field::Empty,
                waited_us = tracing::field::Empty,
            ),
            started: Instant::now(),
            outcome: None,
        })
    }

    /// The store-independent part of a client's shutdown, within `deadline`: refuses new
    /// acquisitions and ends the waits in progress, releases every hold still registered (each
    /// as many times as guards share it; their guards report
    /// [`lost`](crate::LockGuard::lost)), waits for the background releases and undos, and
    /// then stops starting background work. The store closes its connections after it.
    ///
    /// # Errors
    /// [`Error::ShutdownUnfinished`] when releases listed with
    /// [`track_release`](Self::track_release) were still unconfirmed at `deadline`;
    /// [`Error::Timeout`] (`after: limit`) when something else was still unfinished.
    pub async fn shutdown(&self, deadline: Instant, limit: Duration) -> Result<()> {
        self.inner.closing.cancel();
        // The waits in progress see the cancellation and undo what they may have taken.
        let quiet = tokio::time::timeout_at(deadline, self.inner.active.idle()).await;
        let releases = self.inner.registry.take_all();
        let work = releases
            .into_iter()
            .map(|(release, owner, guards)| async move {
                for _ in 0..guards {
                    match release.release(owner).await {
                        Ok(()) | Err(Error::NotHeld { .. }) => {}
                        // Not sent, or its reply lost: settled by the conditional release.
                        Err(err) if err.is_transient() => {
                            let _ = release.release_if_count(owner, 1).await;
                        }
                        Err(err) => {
                            tracing::warn!(target: "keylatch::client", error = %err, "shutdown: a release failed");
                            return;
                        }
                    }
                }
            });
        let work = futures_util::future::join_all(work);
        tokio::pin!(work);
        let released = tokio::time::timeout_at(deadline, work.as_mut()).await;
        let idle = tokio::time::timeout_at(deadline, self.inner.tasks.idle()).await;
        // Read before anything under way is dropped (each release is listed until it ends).
        let unfinished = self.inner.releases.snapshot();
        self.inner.stopped.store(true, Ordering::Release);
        if !unfinished.is_empty() {
            tracing::warn!(target: "keylatch::client",
                releases = %crate::error::list(&unfinished),
                "shutdown: semaphore releases the server did not confirm in time"
            );
            return Err(Error::ShutdownUnfinished {
                after: limit,
                releases: unfinished,
            });
        }
        if quiet.is_err() || released.is_err() || idle.is_err() {
            return Err(Error::Timeout { after: limit });
        }
        Ok(())
    }
}

impl fmt::Debug for Background {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Background")
            .field("holds", &self.inner.registry.stats().holds)
            .field("pending", &self.pending())
            .field("closing", &self.is_closed())
            .finish_non_exhaustive()
    }
}

/// An acquisition under way; see [`Background::begin_acquisition`].
#[derive(Debug)]
pub struct Acquisition {
    _active: Done,
    primitive: &'static str,
    /// A span per acquisition (`keylatch.acquire`): primitive, lock, owner, outcome, time
    /// waited.
    span: tracing::Span,
    started: Instant,
    /// How it ended, once known: `acquired`, `timed_out`; otherwise it failed or was dropped.
    outcome: Option<&'static str>,
}

impl Acquisition {
    /// Names what is acquired (the lock's name or wake-up channel) in the acquisition's span.
    pub fn naming(&mut self, lock: &str) {
        self.span.record("lock", lock);
    }

    /// Names the owner the acquisition is for (`<client-uuid>:<number>`) in its span.
    pub fn owned_by(&mut self, owner: OwnerId) {
        self.span.record("owner", tracing::field::display(owner));
    }

    /// Records how the acquisition ended (`acquired`, `timed_out`), for the metrics.
    pub fn finish(&mut self, outcome: &'static str) {
        self.outcome = Some(outcome);
    }
}

impl Drop for Acquisition {
    fn drop(&mut self) {
        // Neither acquired nor timed out: an error, or a dropped (cancelled) future.
        let outcome = self.outcome.unwrap_or("error_or_cancelled");
        let waited = self.started.elapsed();
        self.span.record("outcome", outcome);
        self.span.record(
            "waited_us",
            u64::try_from(waited.as_micros()).unwrap_or(u64::MAX),
        );
        self.span
            .in_scope(|| tracing::debug!(target: "keylatch::lock", outcome, "acquisition ended"));
        crate::telemetry::acquisition(self.primitive, outcome, waited);
    }
}
