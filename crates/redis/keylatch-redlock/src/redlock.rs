//! [`RedLock`]: one lock held on a majority of independent Redis servers.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::join_all;
use futures_util::stream::FuturesUnordered;
use keylatch_core::{AcquireOptions, DistributedLock, Error, LockGuard, Result, TRANSIENT_RETRIES};
use keylatch_redis::{Client, Subscription, WakeMode};
use tokio::time::Instant;

/// The default time one server may take to answer an attempt.
pub const DEFAULT_SERVER_TIMEOUT: Duration = Duration::from_millis(50);
/// The default longest random pause between two attempts.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(200);
/// The longest random stagger after a release message woke a waiter.
const MAX_STAGGER: Duration = Duration::from_millis(25);

/// A lock held on a majority of independent Redis servers (the RedLock algorithm, Redisson's
/// `RedissonRedLock`), so that the failure or failover of a minority of them loses nothing.
///
/// Built from one lock handle per server, each on its own [`Client`](keylatch_redis::Client)
/// (typically `client.lock(name)` for the same name on every server). An attempt asks every
/// server at once, each for at most the server timeout (50 ms by default, far below any
/// lease); it holds when a majority granted it and the validity — the lease, less the time
/// the attempt took, less a clock drift of 1 % of the lease + 2 ms — is still positive.
/// Otherwise every part it took is released (a server that did not answer in time has its
/// attempt undone in the background), and it tries again after a random pause while the wait
/// allows.
///
/// A refused attempt subscribes to the lock's release channel on every server; a release on
/// any of them wakes the next attempt (after a short random stagger), and a random pause of up
/// to the retry delay bounds each wait for one.
///
/// In watchdog mode (no lease), each part is renewed by its own client's watchdog, and the
/// guard's [`lost`](RedLockGuard::lost) completes once fewer than a majority of the parts are
/// still held.
///
/// No fencing token is promised: no single counter spans the servers. Where stale writes must
/// be refused, prefer one replicated primary with fencing tokens and replica acknowledgement
/// (`Config::replicas`).
///
/// ```no_run
/// # async fn demo() -> keylatch::Result<()> {
/// use std::sync::Arc;
/// use keylatch::{Client, DistributedLock, RedLock};
///
/// let mut parts: Vec<Arc<dyn DistributedLock>> = Vec::new();
/// for url in ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"] {
///     let client = Client::connect(url).await?;
///     parts.push(Arc::new(client.lock("nightly-report")));
/// }
/// let lock = RedLock::new(parts)?;
/// let guard = lock.lock().await?; // held on at least 2 of the 3
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
///
/// # Cancel safety
/// Cancel safe: dropping an acquire releases what it had taken, in the background.
#[derive(Clone)]
pub struct RedLock {
    parts: Arc<[Arc<dyn DistributedLock>]>,
    /// Servers in all, the ones without a part (unreachable when it was built) included.
    servers: usize,
    server_timeout: Duration,
    retry_delay: Duration,
}

impl std::fmt::Debug for RedLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedLock")
            .field("servers", &self.servers)
            .field("quorum", &self.quorum())
            .field("server_timeout", &self.server_timeout)
            .field("retry_delay", &self.retry_delay)
            .finish_non_exhaustive()
    }
}

impl RedLock {
    /// A RedLock over `locks`, one per independent server.
    ///
    /// # Errors
    /// [`Error::InvalidName`] when `locks` is empty.
    pub fn new<I>(locks: I) -> Result<RedLock>
    where
        I: IntoIterator<Item = Arc<dyn DistributedLock>>,
    {
        let parts: Vec<Arc<dyn DistributedLock>> = locks.into_iter().collect();
        if parts.is_empty() {
            return Err(Error::InvalidName {
                reason: "a RedLock needs at least one server's lock",
            });
        }
        Ok(RedLock {
            servers: parts.len(),
            parts: parts.into(),
            server_timeout: DEFAULT_SERVER_TIMEOUT,
            retry_delay: DEFAULT_RETRY_DELAY,
        })
    }

    /// Declares `servers` servers in all, when some had no lock handle to give (a client could
    /// not connect to them): they count in the majority and as failed in every attempt. With 5
    /// servers of which 2 were unreachable, 3 must still grant the lock.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `servers` is less than the number of locks.
    pub fn with_servers(&self, servers: usize) -> Result<RedLock> {
        if servers < self.parts.len() {
            return Err(Error::InvalidConfig {
                field: "servers",
                reason: "fewer servers than locks",
            });
        }
        let mut handle = self.clone();
        handle.servers = servers;
        Ok(handle)
    }

    /// How long one server may take to answer an attempt (50 ms by default); keep it far below
    /// the lease.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for zero.
    pub fn with_server_timeout(&self, timeout: Duration) -> Result<RedLock> {
        if timeout.is_zero() {
            return Err(Error::InvalidConfig {
                field: "server_timeout",
                reason: "must be positive",
            });
        }
        let mut handle = self.clone();
        handle.server_timeout = timeout;
        Ok(handle)
    }

    /// The longest random pause between two attempts (200 ms by default).
    pub fn with_retry_delay(&self, delay: Duration) -> RedLock {
        let mut handle = self.clone();
        handle.retry_delay = delay;
        handle
    }

    /// How many servers must grant the lock: a majority.
    pub fn quorum(&self) -> usize {
        self.servers / 2 + 1
    }

    /// How many servers the lock spans.
    pub fn servers(&self) -> usize {
        self.servers
    }

    /// Waits as long as it takes; watchdog mode.
    ///
    /// # Errors
    /// [`Error::NoQuorum`] when a majority of the servers failed or did not answer in
    /// [`TRANSIENT_RETRIES`] attempts in a row.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lock(&self) -> Result<RedLockGuard> {
        let guard = self.acquire(AcquireOptions::new()).await?;
        Ok(guard.expect("an unbounded wait returns a guard"))
    }

    /// One attempt, no waiting.
    ///
    /// # Errors
    /// [`Error::NoQuorum`] when a majority of the servers failed or did not answer.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn try_lock(&self) -> Result<Option<RedLockGuard>> {
        self.acquire(AcquireOptions::new().with_wait(Duration::ZERO))
            .await
    }

    /// Waits at most `wait`; `lease` as in [`AcquireOptions::with_lease`] (`None`: watchdog).
    ///
    /// # Errors
    /// [`Error::NoQuorum`] when the wait ended while a majority of the servers failed or did
    /// not answer.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn try_lock_for(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<RedLockGuard>> {
        self.acquire(AcquireOptions::within(wait, lease)).await
    }

    /// Acquires with `options`; `Ok(None)` when the wait bound passed while others held the
    /// lock.
    ///
    /// # Errors
    /// [`Error::NoQuorum`] when the wait ended (or, without a bound, [`TRANSIENT_RETRIES`]
    /// attempts in a row ended) with a majority of the servers failing or not answering; bad
    /// input errors of the parts.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn acquire(&self, options: AcquireOptions) -> Result<Option<RedLockGuard>> {
        let deadline = options.deadline();
        let bounded = options.wait().is_some();
        let mut unreachable_in_a_row = 0;
        // Subscribed after the first refusal: a release on any server wakes the next attempt.
        let mut subscriptions: Option<Vec<Subscription>> = None;
        loop {
            let mut woken: Vec<_> = subscriptions
                .iter()
                .flatten()
                .map(|s| Box::pin(s.notified()))
                .collect();
            for notified in &mut woken {
                notified.as_mut().enable();
            }
            let attempt = self.attempt(options.lease()).await?;
            match attempt {
                Attempt::Held(guard) => return Ok(Some(guard)),
                Attempt::Refused {
                    acquired,
                    failed,
                    first_error,
                } => {
                    let no_quorum = self.servers - failed < self.quorum();
                    unreachable_in_a_row = if no_quorum {
                        unreachable_in_a_row + 1
                    } else {
                        0
                    };
                    let give_up = if bounded {
                        deadline.is_none_or(|d| Instant::now() >= d)
                    } else {
                        unreachable_in_a_row >= TRANSIENT_RETRIES
                    };
                    if give_up {
                        if no_quorum {
                            if let Some(err) = first_error.filter(|e| !e.is_transient()) {
                                return Err(err);
                            }
                            return Err(Error::NoQuorum {
                                acquired,
                                needed: self.quorum(),
                                servers: self.servers,
                                failed,
                            });
                        }
                        return Ok(None);
                    }
                    if subscriptions.is_none() {
                        // Subscribe, then try again at once: a release may have come meanwhile.
                        drop(woken);
                        subscriptions = Some(self.subscribe().await);
                        continue;
                    }
                    let mut pause = random_below(self.retry_delay);
                    if let Some(d) = deadline {
                        pause = pause.min(d.saturating_duration_since(Instant::now()));
                    }
                    if woken.is_empty() {
                        tokio::time::sleep(pause).await;
                    } else {
                        tokio::select! {
                            _ = futures_util::future::select_all(woken) => {
                                // Woken by a release: a short random stagger, so contenders
                                // woken together do not split the servers between them.
                                let stagger = (self.retry_delay / 8).min(MAX_STAGGER);
                                tokio::time::sleep(random_below(stagger)).await;
                            }
                            () = tokio::time::sleep(pause) => {}
                        }
                    }
                }
            }
        }
    }

    /// A subscription to each part's release channel (on its own client's hub); a part whose
    /// server cannot be subscribed to now is left out (the random pause still bounds the wait).
    async fn subscribe(&self) -> Vec<Subscription> {
        let mut subscriptions = Vec::new();
        for part in self.parts.iter() {
            let part = part
                .release_channel()
                .and_then(|(client, channel)| Some((client.downcast_ref::<Client>()?, channel)));
            if let Some((client, channel)) = part {
                let subscribing =
                    client
                        .hub()
                        .subscribe(channel, WakeMode::One, client.config().fallback_poll);
                if let Ok(Ok(subscription)) =
                    tokio::time::timeout(self.server_timeout, subscribing).await
                {
                    subscriptions.push(subscription);
                }
            }
        }
        subscriptions
    }

    /// One attempt on every server at once.
    async fn attempt(&self, lease: Option<Duration>) -> Result<Attempt> {
        let started = Instant::now();
        let mut part_options = AcquireOptions::new().with_wait(Duration::ZERO);
        if let Some(lease) = lease {
            part_options = part_options.with_lease(lease);
        }
        let outcomes = join_all(self.parts.iter().map(|part| {
            // A part that does not answer in time is dropped, which undoes it in the
            // background (every acquire is cancel safe).
            tokio::time::timeout(self.server_timeout, part.acquire(part_options))
        }))
        .await;
        let elapsed = started.elapsed();
        let mut guards = Vec::new();
        // Servers without a part fail every attempt.
        let mut failed = self.servers - self.parts.len();
        let mut first_error = None;
        for outcome in outcomes {
            match outcome {
                Ok(Ok(Some(guard))) => guards.push(guard),
                Ok(Ok(None)) => {}
                Ok(Err(err)) => {
                    if matches!(
                        err,
                        Error::InvalidLease { .. } | Error::InvalidName { .. } | Error::Closed
                    ) {
                        release_all(guards).await;
                        return Err(err);
                    }
                    failed += 1;
                    first_error.get_or_insert(err);
                }
                Err(_elapsed) => failed += 1,
            }
        }
        let until = lease.map(|lease| {
            let drift = lease / 100 + Duration::from_millis(2);
            (started + lease).checked_sub(drift).unwrap_or(started)
        });
        let valid = until.is_none_or(|u| u > started + elapsed);
        if guards.len() >= self.quorum() && valid {
            return Ok(Attempt::Held(RedLockGuard {
                guards,
                quorum: self.quorum(),
                until,
            }));
        }
        let acquired = guards.len();
        release_all(guards).await;
        Ok(Attempt::Refused {
            acquired,
            failed,
            first_error,
        })
    }
}

enum Attempt {
    Held(RedLockGuard),
    Refused {
        acquired: usize,
        failed: usize,
        first_error: Option<Error>,
    },
}

async fn release_all(guards: Vec<LockGuard>) {
    join_all(guards.into_iter().map(LockGuard::unlock)).await;
}

/// A pause in `[0, max)`, from the clock's low bits (no need for a better generator here).
fn random_below(max: Duration) -> Duration {
    let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
    if nanos == 0 {
        return Duration::ZERO;
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut x = u64::from(seed) ^ 0x9e37_79b9_7f4a_7c15;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    Duration::from_nanos(x % nanos)
}

/// A [`RedLock`], held on a majority of its servers. Dropping it releases every part in the
/// background; [`unlock`](RedLockGuard::unlock) releases them and reports errors.
#[derive(Debug)]
#[must_use = "dropping the guard releases the lock at once"]
pub struct RedLockGuard {
    guards: Vec<LockGuard>,
    quorum: usize,
    /// With a fixed lease: the end of the validity (lease − elapsed − drift).
    until: Option<Instant>,
}

impl RedLockGuard {
    /// The parts held, one per server that granted the lock (at least a majority).
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// The local instant until which a majority of the parts are known valid (with a fixed
    /// lease, at most the lease less the attempt's time and the drift), or `None` once fewer
    /// than a majority are.
    pub fn valid_until(&self) -> Option<Instant> {
        let mut valid: Vec<Instant> = self
            .guards
            .iter()
            .filter_map(LockGuard::valid_until)
            .collect();
        if valid.len() < self.quorum {
            return None;
        }
        valid.sort_unstable_by(|a, b| b.cmp(a));
        let majority = valid[self.quorum - 1];
        let until = self.until.map_or(majority, |u| u.min(majority));
        (until > Instant::now()).then_some(until)
    }

    /// Whether fewer than a majority of the parts are still held.
    pub fn is_lost(&self) -> bool {
        self.valid_until().is_none()
    }

    /// Completes when fewer than a majority of the parts are still held (or, with a fixed
    /// lease, when its validity ends).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut parts: FuturesUnordered<_> = self.guards.iter().map(LockGuard::lost).collect();
        let spare = self.guards.len().saturating_sub(self.quorum);
        let until = self.until;
        async move {
            let majority_gone = async move {
                let mut lost = 0;
                while parts.next().await.is_some() {
                    lost += 1;
                    if lost > spare {
                        return;
                    }
                }
            };
            match until {
                Some(until) => {
                    tokio::select! {
                        () = majority_gone => {}
                        () = tokio::time::sleep_until(until) => {}
                    }
                }
                None => majority_gone.await,
            }
        }
    }

    /// The parts' guards, to keep (`forget`) or release one by one.
    pub fn into_guards(self) -> Vec<LockGuard> {
        self.guards
    }

    /// Releases the lock on every server that granted it.
    ///
    /// # Errors
    /// The first part's error; every other part is released all the same.
    pub async fn unlock(self) -> Result<()> {
        let results = join_all(self.guards.into_iter().map(LockGuard::unlock)).await;
        results.into_iter().collect()
    }

    /// Keeps the lock on every server without releasing it: no renewal, no release on drop
    /// (see [`LockGuard::forget`]). Each part stays until its lease ends or someone releases
    /// it. For a deliberate hand-over.
    pub fn forget(self) {
        for guard in self.guards {
            guard.forget();
        }
    }
}
