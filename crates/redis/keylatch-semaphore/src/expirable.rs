//! `PermitExpirableSemaphore`.

use std::sync::Arc;
use std::time::Duration;

use keylatch_core::{
    AcquireOptions, Attempt, Error, Owner, Renewal, Result, lease_millis, validate_lease,
};
use keylatch_redis::redis::Value;
use keylatch_redis::{Client, prefixed, suffixed, wait_for};
use tokio::time::Instant;

use crate::counts::{MAX_PERMITS, MAX_PERMITS_PER_CALL, check_delta, check_permits, refused};
use crate::expirable_shared::Shared;
use crate::permit::Permit;
use crate::request::Requests;
use crate::retry::{Settle, run_idempotent};
use crate::scripts::{EXP_ACQUIRE, EXP_ADD, EXP_COUNTS, EXP_RENEW, EXP_SET, EXP_TRY_SET, EXP_UNDO};
use crate::semaphore_shared::{unexpected, wake_mode};

/// The longest permit id accepted; longer ids are unknown by construction.
const MAX_ID_LEN: usize = 256;

/// Whether `id` can name a permit: hex digits (either case), an even number of them, as
/// Redisson's ids. The scripts store the bytes they stand for; any other id is unknown by
/// construction and never sent.
pub(crate) fn is_permit_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id.len().is_multiple_of(2)
        && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A counting semaphore whose permits have ids and leases, compatible with Redisson's
/// `RPermitExpirableSemaphore`: a crashed holder's permits come back when their leases end.
///
/// - **Permits**: each acquire hands out [`Permit`]s, each with a random id and a lease. A
///   [`Permit`] is a guard: [`Permit::release`] or dropping it gives it back. Any process that
///   knows a permit's id may give it back too ([`release`](PermitExpirableSemaphore::release)),
///   or change its lease ([`update_lease`](PermitExpirableSemaphore::update_lease)).
/// - **Leases**: with no lease ([`acquire`](PermitExpirableSemaphore::acquire),
///   [`try_acquire`](PermitExpirableSemaphore::try_acquire)) a permit is in watchdog mode: its
///   lease is the client's watchdog timeout, renewed (in batches, by the client's watchdog)
///   every third of it while the [`Permit`] lives, so only a crashed (or cut off) holder's
///   permits come back, within the watchdog timeout. With a lease it ends after the lease,
///   renewed by no one. Lease ends are measured by the server's clock, and every script but
///   the watchdog's renewal reclaims the permits whose lease ended before doing anything else.
/// - **Total**: available + held, as Redisson counts it
///   ([`permits`](PermitExpirableSemaphore::permits)); set by
///   [`try_set_permits`](PermitExpirableSemaphore::try_set_permits) and changed by
///   [`add_permits`](PermitExpirableSemaphore::add_permits) (or by Redisson's `setPermits` and
///   `addPermits`), so asking for more permits than it has in all fails at once with
///   [`Error::InvalidPermits`].
/// - **Ids**: 32 hex digits, Redisson's form; the timeout zset holds the 16 bytes they stand
///   for, as Redisson's does, so either side can release, renew or query the other's permits.
/// - **Fairness**: none; waiters are woken through pub/sub (every waiter re-checks) and when
///   the earliest lease ends. **Reentrancy**: none; each acquire takes new permits.
/// - **Not set up yet**: acquiring from a semaphore that has no count and no total waits
///   (for someone's [`try_set_permits`](PermitExpirableSemaphore::try_set_permits)).
/// - **Lost replies**: permit ids are chosen before the request is sent, so an acquire whose
///   reply was lost (or whose future was dropped in flight) is undone by releasing those ids,
///   which is idempotent, and leaving a tombstone `{name}:req:<id>` for each (with the TTL of
///   the request window, the settle window (`Config::settle_window`, 30 s by default)), so that an acquire arriving after its
///   undo takes nothing. Only if the server cannot be reached for longer than that window after
///   a lost reply can a permit stay taken, and then only until its lease ends.
///
/// Layout (Redisson's): string `name` = available permits (no TTL); zset `{name}:timeout`,
/// permit id (its 16 bytes) → lease end in ms of the server clock (no TTL, emptied as permits
/// are released or reclaimed); channel `redisson_sc:{name}`, message = the new available count.
///
/// ```no_run
/// # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
/// use std::time::Duration;
///
/// let workers = client.permit_expirable_semaphore("workers");
/// workers.try_set_permits(3).await?;
/// let permit = workers.acquire().await?; // renewed while this process lives
/// println!("working under permit {}", permit.id());
/// permit.release().await?;
///
/// // A fixed lease: the permit comes back after 10 s at the latest.
/// let permit = workers.acquire_with_lease(Duration::from_secs(10)).await?;
/// permit.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct PermitExpirableSemaphore {
    pub(crate) shared: Arc<Shared>,
    /// The count an acquire sets up when the semaphore is missing (0: none).
    recreate: u32,
}

impl PermitExpirableSemaphore {
    /// A handle on the permit-expirable semaphore `name`. Nothing is sent to Redis; a bad name
    /// is reported by the first operation ([`Error::InvalidName`]).
    pub fn new(client: &Client, name: &str) -> PermitExpirableSemaphore {
        let name: Arc<str> = Arc::from(client.key_name(name));
        PermitExpirableSemaphore {
            shared: Arc::new(Shared {
                client: client.clone(),
                timeout_key: suffixed(&name, "timeout").into(),
                total_key: suffixed(&name, "permits").into(),
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
    /// held across such a loss are not known to the new semaphore either: their
    /// holders find them gone at their next renewal.
    #[must_use]
    pub fn with_permits(&self, permits: u32) -> Self {
        let mut handle = self.clone();
        handle.recreate = permits.min(MAX_PERMITS as u32);
        handle
    }

    /// The semaphore's name (the key of the available count).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The wake-up channel, `redisson_sc:{name}`.
    pub fn channel(&self) -> &str {
        &self.shared.channel
    }

    /// The timeout zset, `{name}:timeout`.
    pub fn timeout_key(&self) -> &str {
        &self.shared.timeout_key
    }

    /// `{name}:permits`, where keylatch versions before Redisson's layout kept the total. It
    /// is no longer read (the total is available + held, as Redisson counts it);
    /// [`try_set_permits`](PermitExpirableSemaphore::try_set_permits) and
    /// [`add_permits`](PermitExpirableSemaphore::add_permits) delete it.
    pub fn total_key(&self) -> &str {
        &self.shared.total_key
    }

    /// Sets the total (and the available count) to `permits` if the semaphore does not exist
    /// yet. Returns whether it did. Waiters are woken.
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

    /// As [`try_set_permits`](PermitExpirableSemaphore::try_set_permits), and the count
    /// expires after `time_to_live` (Redisson's `trySetPermits` with a time to live).
    ///
    /// # Errors
    /// As [`try_set_permits`](PermitExpirableSemaphore::try_set_permits), and
    /// [`Error::InvalidLease`] for a time to live of less than 1 ms or more than
    /// [`MAX_LEASE`](keylatch_core::MAX_LEASE).
    ///
    /// # Cancel safety
    /// As [`try_set_permits`](PermitExpirableSemaphore::try_set_permits).
    pub async fn try_set_permits_with_ttl(
        &self,
        permits: u32,
        time_to_live: Duration,
    ) -> Result<bool> {
        validate_lease(time_to_live)?;
        self.try_set(permits, Some(time_to_live)).await
    }

    /// Sets the total to `permits`, whatever it was (Redisson's `setPermits`): the available
    /// count becomes `permits` less the permits held now (it stays below zero, so nobody gets
    /// in, while more are held than the new total). Waiters are woken.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::InvalidPermits`] (more than [`MAX_PERMITS`]),
    /// [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have set the total; setting it again is harmless.
    pub async fn set_permits(&self, permits: u32) -> Result<()> {
        self.shared.client.validate_name(self.name())?;
        if u64::from(permits) > MAX_PERMITS {
            return Err(Error::InvalidPermits {
                reason: "more than the largest count (2147483647)",
            });
        }
        let call = self.keys(&EXP_SET).arg(permits);
        match run_idempotent(&self.shared.client, &call, Instant::now()).await? {
            (Value::Int(1), _) => Ok(()),
            _ => Err(unexpected("expirable_semaphore_set")),
        }
    }

    async fn try_set(&self, permits: u32, time_to_live: Option<Duration>) -> Result<bool> {
        self.shared.client.validate_name(self.name())?;
        check_permits(u64::from(permits))?;
        let requests = &self.shared.requests;
        let call = self
            .keys(&EXP_TRY_SET)
            .arg(permits)
            .arg(requests.window_ms())
            .arg(time_to_live.map_or(0, lease_millis));
        match requests.apply_marked(call, |r| *r == Value::Int(1)).await? {
            Value::Int(1) => Ok(true),
            Value::Int(0) => Ok(false),
            _ => Err(unexpected("expirable_semaphore_try_set")),
        }
    }

    /// Adds `delta` permits to the total and to the available count (or removes `-delta` from
    /// both). Waiters are woken when permits are added.
    ///
    /// # Errors
    /// [`Error::InvalidName`]; [`Error::InvalidPermits`] for a change of 0 or larger than
    /// [`MAX_PERMITS`], a total that would exceed [`MAX_PERMITS`], or fewer than `-delta`
    /// permits available (nothing changed); [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// As [`try_set_permits`](PermitExpirableSemaphore::try_set_permits).
    pub async fn add_permits(&self, delta: i64) -> Result<()> {
        self.shared.client.validate_name(self.name())?;
        check_delta(delta)?;
        let requests = &self.shared.requests;
        let call = self
            .keys(&EXP_ADD)
            .arg(delta)
            .arg(requests.window_ms())
            .arg(MAX_PERMITS);
        match requests.apply_marked(call, |r| *r == Value::Int(1)).await? {
            Value::Int(1) => Ok(()),
            Value::Int(code @ (-1 | -2)) => Err(refused(code)),
            _ => Err(unexpected("expirable_semaphore_add")),
        }
    }

    /// The permits available now (after reclaiming expired ones).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], Redis errors.
    ///
    /// # Cancel safety
    /// Cancel safe (the reclaim it may do is atomic and needed anyway).
    pub async fn available_permits(&self) -> Result<u64> {
        Ok(self.counts().await?.0)
    }

    /// The permits held now, by every process (after reclaiming expired ones).
    ///
    /// # Errors
    /// As [`available_permits`](PermitExpirableSemaphore::available_permits).
    ///
    /// # Cancel safety
    /// As [`available_permits`](PermitExpirableSemaphore::available_permits).
    pub async fn acquired_permits(&self) -> Result<u64> {
        Ok(self.counts().await?.1)
    }

    /// The total: available + acquired (after reclaiming expired permits), as Redisson's
    /// `getPermits` counts it; `None` when the semaphore was never set up.
    ///
    /// # Errors
    /// As [`available_permits`](PermitExpirableSemaphore::available_permits).
    ///
    /// # Cancel safety
    /// As [`available_permits`](PermitExpirableSemaphore::available_permits).
    pub async fn permits(&self) -> Result<Option<u64>> {
        Ok(self.counts().await?.2)
    }

    async fn counts(&self) -> Result<(u64, u64, Option<u64>)> {
        self.shared.client.validate_name(self.name())?;
        let call = self.keys(&EXP_COUNTS);
        match self.shared.client.eval_value(&call).await? {
            Value::Array(items) => match items.as_slice() {
                [
                    Value::Int(available),
                    Value::Int(acquired),
                    Value::Int(total),
                ] => Ok((
                    u64::try_from(*available).unwrap_or(0),
                    u64::try_from(*acquired).unwrap_or(0),
                    u64::try_from(*total).ok(),
                )),
                _ => Err(unexpected("expirable_semaphore_counts")),
            },
            _ => Err(unexpected("expirable_semaphore_counts")),
        }
    }

    /// Takes one permit in watchdog mode, waiting as long as it takes.
    ///
    /// # Errors
    /// As [`acquire_many`](PermitExpirableSemaphore::acquire_many).
    ///
    /// # Cancel safety
    /// As [`acquire_many`](PermitExpirableSemaphore::acquire_many).
    pub async fn acquire(&self) -> Result<Permit> {
        self.acquire_with(AcquireOptions::new())
            .await
            .map(|p| p.expect("an unbounded wait returns a permit"))
    }

    /// Takes one permit whose lease ends after `lease`, waiting as long as it takes.
    ///
    /// # Errors
    /// As [`acquire_many`](PermitExpirableSemaphore::acquire_many).
    ///
    /// # Cancel safety
    /// As [`acquire_many`](PermitExpirableSemaphore::acquire_many).
    pub async fn acquire_with_lease(&self, lease: Duration) -> Result<Permit> {
        self.acquire_with(AcquireOptions::new().with_lease(lease))
            .await
            .map(|p| p.expect("an unbounded wait returns a permit"))
    }

    /// Tries once to take one permit, in watchdog mode.
    ///
    /// # Errors
    /// As [`acquire_many`](PermitExpirableSemaphore::acquire_many).
    ///
    /// # Cancel safety
    /// As [`acquire_many`](PermitExpirableSemaphore::acquire_many).
    pub async fn try_acquire(&self) -> Result<Option<Permit>> {
        self.acquire_with(AcquireOptions::new().with_wait(Duration::ZERO))
            .await
    }

    /// Takes one permit, waiting at most `wait`; `lease` as in
    /// [`AcquireOptions::with_lease`] (`None`: watchdog mode).
    ///
    /// # Errors
    /// As [`acquire_many`](PermitExpirableSemaphore::acquire_many).
    ///
    /// # Cancel safety
    /// As [`acquire_many`](PermitExpirableSemaphore::acquire_many).
    pub async fn try_acquire_for(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<Permit>> {
        self.acquire_with(AcquireOptions::within(wait, lease)).await
    }

    /// Takes one permit with `options` (wait bound, lease); `None` when the wait bound passed
    /// first.
    ///
    /// # Errors
    /// As [`acquire_many`](PermitExpirableSemaphore::acquire_many).
    ///
    /// # Cancel safety
    /// As [`acquire_many`](PermitExpirableSemaphore::acquire_many).
    pub async fn acquire_with(&self, options: AcquireOptions) -> Result<Option<Permit>> {
        Ok(self
            .acquire_many(1, options)
            .await?
            .and_then(|mut permits| permits.pop()))
    }

    /// Takes `permits` permits at once (all or none), each with its own id and the lease of
    /// `options`, waiting as `options` says; `None` when the wait bound passed first (never
    /// without a wait bound).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::InvalidLease`]; [`Error::InvalidPermits`] for 0, more
    /// than [`MAX_PERMITS_PER_CALL`], or more than the semaphore's total (reported at once,
    /// nothing changed); [`Error::WrongType`], Redis errors. Transient failures are undone and
    /// retried.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped acquire holds nothing and leaves no subscription or watchdog
    /// entry behind (a request already sent is undone in the background by releasing its ids).
    pub async fn acquire_many(
        &self,
        permits: u32,
        options: AcquireOptions,
    ) -> Result<Option<Vec<Permit>>> {
        self.shared.client.validate_name(self.name())?;
        check_permits(u64::from(permits))?;
        if permits > MAX_PERMITS_PER_CALL {
            return Err(Error::InvalidPermits {
                reason: "at most 1000 permits per call",
            });
        }
        let (lease, renewal) = match options.lease() {
            Some(lease) => {
                validate_lease(lease)?;
                (lease, Renewal::Lease)
            }
            None => (
                self.shared.client.config().watchdog_timeout,
                EXP_RENEW.renewal(),
            ),
        };
        let deadline = options.deadline();
        wait_for(
            &self.shared.client,
            "expirable_semaphore",
            None,
            self.channel(),
            wake_mode(permits),
            deadline,
            || self.attempt(permits, lease, renewal),
        )
        .await
    }

    async fn attempt(
        &self,
        permits: u32,
        lease: Duration,
        renewal: Renewal,
    ) -> Result<Attempt<Vec<Permit>>> {
        let client = &self.shared.client;
        let ids: Vec<String> = (0..permits)
            .map(|_| uuid::Uuid::new_v4().simple().to_string())
            .collect();
        let requests = &self.shared.requests;
        let tombstones: Vec<String> = ids.iter().map(|id| requests.tombstone(id)).collect();
        // The undo releases the ids if the acquire ran and leaves a tombstone for each, so
        // that an acquire still on its way takes nothing.
        let mut undo_call = EXP_UNDO
            .call()
            .key(self.name())
            .key(self.timeout_key())
            .key(self.channel());
        let mut call = self.keys(&EXP_ACQUIRE);
        for tombstone in &tombstones {
            undo_call = undo_call.key(tombstone.as_str());
            call = call.key(tombstone.as_str());
        }
        undo_call = undo_call.arg(requests.window_ms());
        call = call.arg(lease_millis(lease)).arg(self.recreate);
        for id in &ids {
            undo_call = undo_call.arg(id.as_str());
            call = call.arg(id.as_str());
        }
        let undo = Settle::arm_undo(client, undo_call, &self.shared.name, ids.len() as u64);
        let sent_at = Instant::now();
        let reply = match client.eval_value(&call).await {
            Ok(reply) => reply,
            Err(err) if err.is_ambiguous() => {
                // If the undo fails too it goes on in the background; the next attempt uses
                // new ids, so it never races it.
                let _ = undo.run_now().await;
                return Err(err);
            }
            Err(err) => {
                undo.disarm();
                return Err(err);
            }
        };
        undo.disarm();
        match reply {
            Value::Nil => {
                let owner = client.owner_id(Owner::unique());
                let permits = ids
                    .into_iter()
                    .map(|id| Permit::new(&self.shared, id, owner, lease, renewal, sent_at))
                    .collect();
                Ok(Attempt::Done(permits))
            }
            Value::Int(-2) => Err(Error::InvalidPermits {
                reason: "more permits than the semaphore has in all",
            }),
            Value::Int(-1) => Ok(Attempt::Retry(None)),
            Value::Int(ms) if ms >= 0 => Ok(Attempt::Retry(Some(Duration::from_millis(
                u64::try_from(ms).unwrap_or(0) + 1,
            )))),
            _ => Err(unexpected("expirable_semaphore_acquire")),
        }
    }
}
