//! `Semaphore`.

use std::sync::Arc;
use std::time::Duration;

use keylatch_core::{AcquireOptions, Attempt, Error, Result, lease_millis, validate_lease};
use keylatch_redis::redis::{self, Value};
use keylatch_redis::{Client, ScriptCall, prefixed, wait_for};
use tokio::time::Instant;

use crate::counts::{MAX_PERMITS, check_delta, check_permits, parse_count, refused};
use crate::request::Requests;
use crate::retry::{Settle, run_idempotent, with_keys};
use crate::scripts::{ACQUIRE, ADD, DRAIN, SET, TRY_SET, UNDO_ACQUIRE};
use crate::semaphore_permit::SemaphorePermit;
use crate::semaphore_shared::{Shared, unexpected, wake_mode};

/// A counting semaphore shared by every process using the name, compatible with Redisson's
/// `RSemaphore`.
///
/// - **Permits are not owned.** [`acquire_many`](Semaphore::acquire_many) takes permits and
///   [`release`](Semaphore::release) gives permits back, from any task or process: a producer
///   may release what a consumer acquires. Nothing ties a permit to whoever took it, so
///   **a permit taken by a process that then crashes is never returned** (nothing expires).
///   When that matters use [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore),
///   whose permits have leases.
/// - **Fairness**: none. Waiters are woken through pub/sub (every waiter re-checks) and race;
///   a waiter for many permits can be overtaken by waiters for fewer.
/// - **Reentrancy**: not applicable; each acquire takes new permits.
/// - **No total**: the semaphore knows only how many permits are available (missing = 0), so
///   asking for more than it will ever have waits (use the permit-expirable semaphore, which
///   stores its total, to be told at once).
/// - **Lost replies**: every call that changes the count carries a request marker (a
///   short-lived key `{name}:req:<uuid>`), so a release or `add_permits` whose reply was lost
///   is retried without applying twice, and an acquire whose reply was lost (or whose future
///   was dropped in flight) is undone: its permits are given back if it ran, and it takes
///   nothing if it arrives late.
/// - **Releases outlive outages**: a release (by [`release`](Semaphore::release), or of a
///   dropped [`SemaphorePermit`]) is retried until the server answers, for as long as the
///   client lives, however long the server is unreachable; [`Client::shutdown`] lists those
///   it could not finish ([`Error::ShutdownUnfinished`]). A release's marker lives an hour
///   counted from when the server applied it, and is deleted soon after its reply is seen, so
///   a retry that reaches the server within that hour of the attempt it applied does nothing
///   (past it, after a reply lost just before an outage that long, the permits would be given
///   back twice).
/// - **Other calls** (`add_permits`, `try_set_permits`, `drain_permits`) are retried within
///   the request window of their first attempt: past it, their outcome stays unknown (a
///   warning is logged), applied at most once.
///
/// Layout (Redisson's): string `name` = available permits, no TTL; channel
/// `redisson_sc:{name}`, message = the new count. keylatch adds the request markers, each with
/// a TTL of the request window (a release's: an hour); those of calls whose reply was seen
/// are deleted in batches by later calls on the same name through the same client, and a
/// release's within 100 ms by a background `DEL` when no call takes it along.
///
/// The guard form, one permit that is released on unlock or drop, is [`as_lock`](Semaphore::as_lock).
///
/// ```no_run
/// # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
/// let uploads = client.semaphore("uploads");
/// uploads.try_set_permits(4).await?; // only the first caller sets it
/// let permit = uploads.acquire().await?;
/// // at most 4 holders are here at once
/// permit.release().await?; // or drop it
///
/// // Permits that are not owned: a producer hands its permit over, a consumer gives it back.
/// uploads.acquire().await?.forget();
/// uploads.release(1).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Semaphore {
    pub(crate) shared: Arc<Shared>,
    /// The count an acquire sets up when the semaphore is missing (0: none).
    recreate: u32,
}

impl Semaphore {
    /// A handle on the semaphore `name`. Nothing is sent to Redis; a bad name is reported by
    /// the first operation ([`Error::InvalidName`]).
    pub fn new(client: &Client, name: &str) -> Semaphore {
        let name: Arc<str> = Arc::from(client.key_name(name));
        Semaphore {
            shared: Arc::new(Shared {
                client: client.clone(),
                channel: prefixed("redisson_sc", &name).into(),
                requests: Requests::new(client, &name),
                name,
            }),
            recreate: 0,
        }
    }

    /// A handle that knows the semaphore's permit count: an acquire that finds the semaphore
    /// missing (its keys were lost to a restart without persistence, a failover or a
    /// `FLUSHALL`) sets it up again with `permits`, inside the acquire script, so waiters never
    /// wait for a semaphore that no longer exists. 0 (the default) never sets it up. Permits
    /// held across such a loss are not known to the new semaphore: given back later, they
    /// come on top of `permits`.
    #[must_use]
    pub fn with_permits(&self, permits: u32) -> Self {
        let mut handle = self.clone();
        handle.recreate = permits.min(MAX_PERMITS as u32);
        handle
    }

    /// The semaphore's name (the key of the permit count).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The wake-up channel, `redisson_sc:{name}`.
    pub fn channel(&self) -> &str {
        &self.shared.channel
    }

    /// Sets the number of available permits to `permits` if the semaphore has no count yet.
    /// Returns whether it did. Waiters are woken.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::InvalidPermits`] (0, or more than
    /// [`MAX_PERMITS`]), [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// Once polled, the call applies exactly once even if the future is dropped (it is
    /// finished in the background).
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.try_set(permits, None).await
    }

    /// As [`try_set_permits`](Semaphore::try_set_permits), and the count expires after
    /// `time_to_live` (Redisson's `trySetPermits` with a time to live): the semaphore then has no
    /// permits until set again.
    ///
    /// # Errors
    /// As [`try_set_permits`](Semaphore::try_set_permits), and [`Error::InvalidLease`] for a
    /// time to live of less than 1 ms or more than [`MAX_LEASE`](keylatch_core::MAX_LEASE).
    ///
    /// # Cancel safety
    /// As [`try_set_permits`](Semaphore::try_set_permits).
    pub async fn try_set_permits_with_ttl(
        &self,
        permits: u32,
        time_to_live: Duration,
    ) -> Result<bool> {
        validate_lease(time_to_live)?;
        self.try_set(permits, Some(time_to_live)).await
    }

    async fn try_set(&self, permits: u32, time_to_live: Option<Duration>) -> Result<bool> {
        self.shared.client.validate_name(self.name())?;
        check_permits(u64::from(permits))?;
        let requests = &self.shared.requests;
        let call = TRY_SET
            .call()
            .key(self.name())
            .key(self.channel())
            .arg(permits)
            .arg(requests.window_ms())
            .arg(time_to_live.map_or(0, lease_millis));
        match requests.apply_marked(call, |r| *r == Value::Int(1)).await? {
            Value::Int(1) => Ok(true),
            Value::Int(0) => Ok(false),
            _ => Err(unexpected("semaphore_try_set")),
        }
    }

    /// Sets the number of available permits to `permits`, whatever it was (Redisson's
    /// `setPermits`), and wakes the waiters. Permits out now still come back on top of it when
    /// released. Any expiry set by
    /// [`try_set_permits_with_ttl`](Semaphore::try_set_permits_with_ttl) is removed.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::InvalidPermits`] (more than [`MAX_PERMITS`]),
    /// [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have set the count; setting it again is harmless.
    pub async fn set_permits(&self, permits: u32) -> Result<()> {
        self.shared.client.validate_name(self.name())?;
        if u64::from(permits) > MAX_PERMITS {
            return Err(Error::InvalidPermits {
                reason: "more than the largest count (2147483647)",
            });
        }
        let call = SET.call().key(self.name()).key(self.channel()).arg(permits);
        match run_idempotent(&self.shared.client, &call, Instant::now()).await? {
            (Value::Int(1), _) => Ok(()),
            _ => Err(unexpected("semaphore_set")),
        }
    }

    /// Adds `delta` permits (or removes `-delta`). Waiters are woken when permits are added.
    /// Removing is refused if fewer than `-delta` are available: to shrink a semaphore while
    /// permits are out, acquire the permits to remove and never release them.
    ///
    /// # Errors
    /// [`Error::InvalidName`]; [`Error::InvalidPermits`] for a change of 0, a change larger than
    /// [`MAX_PERMITS`], or one that would take the count above [`MAX_PERMITS`] or below zero
    /// (nothing changed); [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// As [`try_set_permits`](Semaphore::try_set_permits).
    pub async fn add_permits(&self, delta: i64) -> Result<()> {
        self.shared.client.validate_name(self.name())?;
        check_delta(delta)?;
        self.add(delta).await
    }

    /// Gives back `permits` permits, whoever took them, and wakes the waiters.
    ///
    /// A lost reply, a failed connection or an unreachable server is retried, with back-off,
    /// until the server answers, for as long as the client lives; the release applies once
    /// (see [`Semaphore`] for the one exception). The call waits for it at most
    /// [`Config::release_timeout`](keylatch_redis::Config::release_timeout); after that it
    /// returns [`Error::Timeout`] and the release goes on in the background.
    /// [`Client::shutdown`](keylatch_redis::Client::shutdown) reports it
    /// ([`Error::ShutdownUnfinished`]) if it is still unconfirmed then.
    ///
    /// # Errors
    /// [`Error::InvalidName`]; [`Error::InvalidPermits`] for 0, more than [`MAX_PERMITS`], or
    /// a count that would exceed [`MAX_PERMITS`] (nothing changed); [`Error::WrongType`];
    /// [`Error::Timeout`] when the server did not confirm it within the release timeout (it
    /// goes on in the background); [`Error::Closed`]; other Redis errors.
    ///
    /// # Cancel safety
    /// Once polled, the release applies exactly once even if the future is dropped (it is
    /// finished in the background, as after the release timeout).
    pub async fn release(&self, permits: u32) -> Result<()> {
        self.shared.client.validate_name(self.name())?;
        check_permits(u64::from(permits))?;
        let requests = &self.shared.requests;
        let call = self.add_call(i64::from(permits), requests.release_window_ms());
        let reply = requests.release_marked(call, u64::from(permits)).await?;
        add_reply(&reply)
    }

    /// The `ADD` call for `delta`, without its marker, whose marker lives `marker_ms`.
    fn add_call(&self, delta: i64, marker_ms: u64) -> ScriptCall {
        ADD.call()
            .key(self.name())
            .key(self.channel())
            .arg(delta)
            .arg(marker_ms)
            .arg(MAX_PERMITS)
    }

    async fn add(&self, delta: i64) -> Result<()> {
        let call = self.add_call(delta, self.shared.requests.window_ms());
        let reply = self
            .shared
            .requests
            .apply_marked(call, |r| *r == Value::Int(1))
            .await?;
        add_reply(&reply)
    }

    /// The number of permits available now (a negative count, which Redisson's `addPermits`
    /// can leave, reads as 0).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn available_permits(&self) -> Result<u64> {
        self.shared.client.validate_name(self.name())?;
        let value: Option<String> = self
            .shared
            .client
            .query(redis::cmd("GET").arg(self.name()), self.name())
            .await?;
        parse_count(value, self.name())
    }

    /// Takes every available permit and returns how many that was.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// As [`try_set_permits`](Semaphore::try_set_permits).
    pub async fn drain_permits(&self) -> Result<u64> {
        self.shared.client.validate_name(self.name())?;
        let requests = &self.shared.requests;
        let call = DRAIN.call().key(self.name()).arg(requests.window_ms());
        match requests
            .apply_marked(call, |r| matches!(r, Value::Int(_)))
            .await?
        {
            Value::Int(drained) => Ok(u64::try_from(drained).unwrap_or(0)),
            _ => Err(unexpected("semaphore_drain")),
        }
    }

    /// Takes one permit, waiting as long as it takes. The permit goes back when the returned
    /// guard is released or dropped.
    ///
    /// # Errors
    /// As [`acquire_many`](Semaphore::acquire_many).
    ///
    /// # Cancel safety
    /// As [`acquire_many`](Semaphore::acquire_many).
    pub async fn acquire(&self) -> Result<SemaphorePermit> {
        self.acquire_with(AcquireOptions::new())
            .await
            .map(|p| p.expect("an unbounded wait returns a permit"))
    }

    /// Takes one permit, waiting as long as it takes; this process gives it back when `lease`
    /// ends (the server never expires it: see [`SemaphorePermit`]).
    ///
    /// # Errors
    /// As [`acquire_many`](Semaphore::acquire_many).
    ///
    /// # Cancel safety
    /// As [`acquire_many`](Semaphore::acquire_many).
    pub async fn acquire_with_lease(&self, lease: Duration) -> Result<SemaphorePermit> {
        self.acquire_with(AcquireOptions::new().with_lease(lease))
            .await
            .map(|p| p.expect("an unbounded wait returns a permit"))
    }

    /// Tries once to take one permit; `None` when none is available.
    ///
    /// # Errors
    /// As [`acquire_many`](Semaphore::acquire_many).
    ///
    /// # Cancel safety
    /// As [`acquire_many`](Semaphore::acquire_many).
    pub async fn try_acquire(&self) -> Result<Option<SemaphorePermit>> {
        self.acquire_with(AcquireOptions::new().with_wait(Duration::ZERO))
            .await
    }

    /// Takes one permit, waiting at most `wait`; `lease` as in
    /// [`acquire_with_lease`](Semaphore::acquire_with_lease) (`None`: held until released).
    ///
    /// # Errors
    /// As [`acquire_many`](Semaphore::acquire_many).
    ///
    /// # Cancel safety
    /// As [`acquire_many`](Semaphore::acquire_many).
    pub async fn try_acquire_for(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<SemaphorePermit>> {
        self.acquire_with(AcquireOptions::within(wait, lease)).await
    }

    /// Takes one permit with `options` (wait bound, lease); `None` when the wait bound passed
    /// first.
    ///
    /// # Errors
    /// As [`acquire_many`](Semaphore::acquire_many).
    ///
    /// # Cancel safety
    /// As [`acquire_many`](Semaphore::acquire_many).
    pub async fn acquire_with(&self, options: AcquireOptions) -> Result<Option<SemaphorePermit>> {
        self.acquire_many(1, options).await
    }

    /// Takes `permits` permits at once (all or none), waiting as `options` says; `None` when
    /// the wait bound passed first (never without a wait bound). One guard holds them all.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::InvalidLease`], [`Error::InvalidPermits`] (0 or more
    /// than [`MAX_PERMITS`]), [`Error::WrongType`], [`Error::Closed`], Redis errors. Transient
    /// failures are undone and retried.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped acquire takes nothing and leaves no subscription behind (a
    /// request already sent is undone in the background).
    pub async fn acquire_many(
        &self,
        permits: u32,
        options: AcquireOptions,
    ) -> Result<Option<SemaphorePermit>> {
        self.shared.client.validate_name(self.name())?;
        check_permits(u64::from(permits))?;
        if let Some(lease) = options.lease() {
            validate_lease(lease)?;
        }
        let taken = wait_for(
            &self.shared.client,
            "semaphore",
            None,
            self.channel(),
            wake_mode(permits),
            options.deadline(),
            || self.attempt(permits),
        )
        .await?;
        Ok(taken.map(|()| SemaphorePermit::new(&self.shared, permits, options.lease())))
    }

    /// One acquire attempt, with its own marker (an attempt that failed transiently has been
    /// undone, which tombstones its marker).
    async fn attempt(&self, permits: u32) -> Result<Attempt<()>> {
        let requests = &self.shared.requests;
        let client = &self.shared.client;
        let marker = requests.marker();
        let window = requests.window_ms();
        let undo = Settle::arm_undo(
            client,
            UNDO_ACQUIRE
                .call()
                .key(self.name())
                .key(self.channel())
                .key(&marker)
                .arg(permits)
                .arg(window),
            &self.shared.name,
            u64::from(permits),
        );
        let settled = requests.take_settled();
        let call = ACQUIRE.call().key(self.name()).key(&marker);
        let call = with_keys(call, settled.keys())
            .arg(permits)
            .arg(window)
            .arg(self.recreate);
        match client.eval_value(&call).await {
            Ok(Value::Int(1)) => {
                undo.disarm();
                settled.deleted();
                requests.settle(marker);
                Ok(Attempt::Done(()))
            }
            Ok(Value::Int(0)) => {
                undo.disarm();
                settled.give_back();
                Ok(Attempt::Retry(None))
            }
            Ok(_) => {
                // Not our script's reply: whatever ran, settle it as not acquired.
                let _ = undo.run_now().await;
                Err(unexpected("semaphore_acquire"))
            }
            Err(err) if err.is_ambiguous() => {
                // If the undo fails too it goes on in the background; the next attempt uses a
                // new marker, so it never races it.
                let _ = undo.run_now().await;
                Err(err)
            }
            Err(err) => {
                undo.disarm();
                settled.give_back();
                Err(err)
            }
        }
    }
}

/// The outcome of an `ADD` reply.
fn add_reply(reply: &Value) -> Result<()> {
    match reply {
        Value::Int(1) => Ok(()),
        Value::Int(code @ (-1 | -2)) => Err(refused(*code)),
        _ => Err(unexpected("semaphore_add")),
    }
}
