//! [`MultiLock`]: several locks taken all-or-nothing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{join_all, select_all};
use keylatch_core::{AcquireOptions, DistributedLock, Error, LockGuard, Result};
use tokio::time::Instant;

/// Several locks taken as one, all-or-nothing (Redisson's `RedissonMultiLock`).
///
/// The parts are taken one after the other in the order of their names, whatever order they
/// were given in, so callers that take overlapping sets never wait for each other in a cycle.
/// Names must be distinct. Each part keeps its own semantics (a fair lock queues, a read lock
/// shares, a semaphore's lock view takes a permit).
///
/// A wait bound ([`try_lock_for`](MultiLock::try_lock_for), [`AcquireOptions::with_wait`])
/// covers the whole set: each part waits at most what is left of it, and a part reached when
/// nothing is left still gets one try. If a part is not taken, the parts taken before it are
/// released, and the call returns `Ok(None)` (or the part's error).
///
/// With a fixed lease, each part's lease starts when that part is taken: the set is valid until
/// the earliest of them ([`MultiGuard::valid_until`]). In watchdog mode every part is renewed.
///
/// # Cancel safety
/// Cancel safe: dropping an acquire releases the parts it had taken (in the background), and
/// the part being acquired is itself cancel safe.
#[derive(Clone)]
pub struct MultiLock {
    parts: Arc<[Arc<dyn DistributedLock>]>,
}

impl std::fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLock")
            .field("names", &self.names().collect::<Vec<_>>())
            .finish()
    }
}

impl MultiLock {
    /// A multi-lock over `locks`.
    ///
    /// # Errors
    /// [`Error::InvalidName`] when `locks` is empty or two locks have the same name.
    pub fn new<I>(locks: I) -> Result<MultiLock>
    where
        I: IntoIterator<Item = Arc<dyn DistributedLock>>,
    {
        let mut parts: Vec<Arc<dyn DistributedLock>> = locks.into_iter().collect();
        if parts.is_empty() {
            return Err(Error::InvalidName {
                reason: "a MultiLock needs at least one lock",
            });
        }
        parts.sort_by(|a, b| a.name().cmp(b.name()));
        if parts.windows(2).any(|w| w[0].name() == w[1].name()) {
            return Err(Error::InvalidName {
                reason: "the locks of a MultiLock need distinct names",
            });
        }
        Ok(MultiLock {
            parts: parts.into(),
        })
    }

    /// The parts' names, in the order they are taken.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().map(|p| p.name())
    }

    /// How many locks the set has.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Always `false`: a multi-lock has at least one part.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Takes every part, waiting as long as it takes; watchdog mode.
    ///
    /// # Errors
    /// A part's error (the parts taken before it are released).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lock(&self) -> Result<MultiGuard> {
        let guard = self.acquire(AcquireOptions::new()).await?;
        Ok(guard.expect("an unbounded wait returns a guard"))
    }

    /// Takes every part if each is free now; no waiting.
    ///
    /// # Errors
    /// A part's error (the parts taken before it are released).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn try_lock(&self) -> Result<Option<MultiGuard>> {
        self.acquire(AcquireOptions::new().with_wait(Duration::ZERO))
            .await
    }

    /// Takes every part within `wait` in all; `lease` as in [`AcquireOptions::with_lease`]
    /// (`None`: watchdog mode).
    ///
    /// # Errors
    /// A part's error (the parts taken before it are released).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn try_lock_for(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<MultiGuard>> {
        self.acquire(AcquireOptions::within(wait, lease)).await
    }

    /// Takes every part with `options`; `Ok(None)` when the wait bound passed first.
    ///
    /// # Errors
    /// A part's error (the parts taken before it are released).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn acquire(&self, options: AcquireOptions) -> Result<Option<MultiGuard>> {
        let deadline = options.deadline();
        let mut guards: Vec<LockGuard> = Vec::with_capacity(self.parts.len());
        for part in self.parts.iter() {
            let mut part_options = AcquireOptions::new();
            if options.wait().is_some() {
                let left = deadline.map_or(Duration::ZERO, |d| {
                    d.saturating_duration_since(Instant::now())
                });
                part_options = part_options.with_wait(left);
            }
            if let Some(lease) = options.lease() {
                part_options = part_options.with_lease(lease);
            }
            let outcome = part.acquire(part_options).await;
            match outcome {
                Ok(Some(guard)) => guards.push(guard),
                Ok(None) => {
                    release_all(guards).await;
                    return Ok(None);
                }
                Err(err) => {
                    release_all(guards).await;
                    return Err(err);
                }
            }
        }
        Ok(Some(MultiGuard { guards }))
    }
}

/// Releases `guards`, all at once; errors are left to each guard's own settling (a release
/// whose reply was lost goes on in the background).
async fn release_all(guards: Vec<LockGuard>) {
    join_all(guards.into_iter().map(LockGuard::unlock)).await;
}

/// Every part of a [`MultiLock`], held. Dropping it releases every part in the background;
/// [`unlock`](MultiGuard::unlock) releases them and reports errors.
#[derive(Debug)]
#[must_use = "dropping the guard releases every part at once"]
pub struct MultiGuard {
    guards: Vec<LockGuard>,
}

impl MultiGuard {
    /// The parts' guards, in the order the parts were taken.
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// The local instant until which every part is known valid: the earliest of the parts',
    /// or `None` once any part is lost.
    pub fn valid_until(&self) -> Option<Instant> {
        self.guards
            .iter()
            .map(LockGuard::valid_until)
            .try_fold(None::<Instant>, |earliest, until| {
                until.map(|u| Some(earliest.map_or(u, |e| e.min(u))))
            })
            .flatten()
    }

    /// Whether any part is lost.
    pub fn is_lost(&self) -> bool {
        self.guards.iter().any(LockGuard::is_lost)
    }

    /// Completes when any part is lost (see [`LockGuard::lost`]).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let parts: Vec<_> = self.guards.iter().map(|g| Box::pin(g.lost())).collect();
        async move {
            if !parts.is_empty() {
                select_all(parts).await;
            }
        }
    }

    /// Releases every part, all at once.
    ///
    /// # Errors
    /// The first part's error ([`NotHeld`](Error::NotHeld) when its hold had already ended,
    /// [`Timeout`](Error::Timeout) when the server did not answer in time: that release goes on
    /// in the background); every other part is released all the same.
    pub async fn unlock(self) -> Result<()> {
        let results = join_all(self.guards.into_iter().map(LockGuard::unlock)).await;
        results.into_iter().collect()
    }

    /// Keeps every part without releasing it (see [`LockGuard::forget`]).
    pub fn forget(self) {
        for guard in self.guards {
            guard.forget();
        }
    }
}
