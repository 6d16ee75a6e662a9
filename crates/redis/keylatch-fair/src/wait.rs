//! Acquiring: one attempt, and the queued wait around it.
//!
//! A wait joins the queue with its first attempt (the acquire script appends the waiter id to
//! the list and gives it a deadline), registers its place with the client's watchdog so the
//! deadline is refreshed every third of the waiter timeout (batched with every other renewal),
//! subscribes to its own wake-up channel, and retries when woken, when the bound the script
//! returned passes (the holder's PTTL for the head, the head's deadline for the others), or
//! after the jittered fallback poll. Whatever ends the wait other than getting the lock leaves
//! the queue: now when the wait times out or fails, in the background when it is cancelled
//! (after the reply of a request still in flight: see `flight.rs`).
//!
//! A waiter that accepts grants ([`FairLock::with_direct_grant`]) may also get the lock with
//! no request at all: a release hands the free lock to the head of the queue, and the message
//! that wakes it is a letter saying so (`hand_off` in `lua/prelude.lua`). The waiter takes the
//! letter before its next attempt, if it answers the offer of the wait's last attempt known to
//! have left it queued: attempts are numbered, the offer carries the number, and the grant's
//! letter repeats it. An attempt that runs after a grant takes the grant itself, so a letter
//! answering an older offer is for a grant that is gone (it expired, or an attempt whose reply
//! was lost took it and was undone, handing the lock on): ignored. After a lost reply no
//! offer is known until the next attempt that leaves the wait queued. A grant whose letter is
//! ignored is taken by the wait's next attempt (the letter woke it).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use keylatch_core::{
    AcquireOptions, Attempt, Error, HoldHandle, HoldKey, HoldState, LockGuard, Owner, OwnerId,
    Renewal, Result, jitter, lease_millis, retrying, validate_lease,
};
use keylatch_redis::redis::Value;
use keylatch_redis::{
    LETTER_MARK, RENEW_HASH_HOLDS, Subscription, WakeMode, bounded_attempt, open,
};
use tokio::time::Instant;

use crate::flight::{Flight, Undo};
use crate::lock::FairLock;
use crate::release::LeaveGuard;
use crate::scripts::{ACQUIRE, REFRESH_WAITERS};

/// What one acquire asks for.
struct Request {
    owner: OwnerId,
    /// The owner id as text: the hash field and the waiter id.
    field: String,
    lease: Duration,
    renewal: Renewal,
    /// The lease of a hold handed to this waiter on release (never above the waiter timeout);
    /// `None`: the waiter does not accept grants.
    grant_lease: Option<Duration>,
    /// An attempt's reply was lost: the wait may be queued whatever its last reply said.
    lost_reply: AtomicBool,
    /// The number of the wait's last attempt (numbers start at 1).
    attempts: AtomicU64,
    /// The number of the last attempt known to have left the wait queued, with its offer (0:
    /// none); a letter is taken only if it answers this one.
    queued_attempt: AtomicU64,
    /// An attempt was refused: a hold taken after that was taken after waiting.
    refused: AtomicBool,
}

/// Whether a refused attempt joins the queue.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Queue {
    Join,
    Never,
}

impl FairLock {
    /// [`FairLock::acquire`] once the name and waiter timeout are checked.
    pub(crate) async fn acquire_checked(
        &self,
        options: AcquireOptions,
    ) -> Result<Option<LockGuard>> {
        let (lease, renewal) = match options.lease() {
            Some(lease) => {
                validate_lease(lease)?;
                (lease, Renewal::Lease)
            }
            None => (
                self.client.config().watchdog_timeout,
                RENEW_HASH_HOLDS.renewal(),
            ),
        };
        let owner = self.client.owner_id(Owner::or_unique(self.owner));
        // Only a wait with an owner of its own accepts grants: it is then the one wait that a
        // letter to its owner id can be for. The grant's lease is at most the waiter timeout,
        // so a grant to a waiter that died just now delays the queue no more than its deadline
        // would have; a hold with a longer fixed lease is not granted.
        let grant_lease = match renewal {
            _ if !self.direct_grant || self.owner.is_some() => None,
            Renewal::Lease if lease > self.waiter_timeout => None,
            _ => Some(lease.min(self.waiter_timeout)),
        };
        let request = Request {
            owner,
            field: owner.to_string(),
            lease,
            renewal,
            grant_lease,
            lost_reply: AtomicBool::new(false),
            attempts: AtomicU64::new(0),
            queued_attempt: AtomicU64::new(0),
            refused: AtomicBool::new(false),
        };
        let mut acquisition = self.client.begin_acquisition("fair")?;
        acquisition.naming(self.name());
        acquisition.owned_by(owner);
        let result = match options.wait() {
            Some(wait) if wait.is_zero() => {
                let once = self.attempt(&request, Queue::Never);
                match open(
                    &self.client,
                    bounded_attempt(&self.client, options.deadline(), once).await,
                )? {
                    Attempt::Done(guard) => Ok(Some(guard)),
                    Attempt::Retry(_) => Ok(None),
                }
            }
            _ => self.wait(&request, options.deadline()).await,
        };
        match &result {
            Ok(Some(_)) if request.refused.load(Ordering::Relaxed) => {
                acquisition.finish("acquired_after_waiting");
            }
            Ok(Some(_)) => acquisition.finish("acquired"),
            Ok(None) => acquisition.finish("timed_out"),
            Err(_) => {}
        }
        result
    }

    async fn wait(
        &self,
        request: &Request,
        deadline: Option<Instant>,
    ) -> Result<Option<LockGuard>> {
        // A leave of this owner still running in the background would remove the new entry.
        // Waited for no longer than the wait bound (the wait plus twice the response timeout).
        let settled = self
            .client
            .watchdog()
            .settled(&self.keys.timeouts, &request.field);
        let grace = self.client.config().response_timeout * 2;
        match deadline.and_then(|d| d.checked_add(grace)) {
            Some(cut) => {
                if tokio::time::timeout_at(cut, settled).await.is_err() {
                    return Err(Error::Timeout { after: grace });
                }
            }
            None => settled.await,
        }
        let leave = LeaveGuard::arm(&self.client, &self.keys, &request.field);
        let mut refresh = None;
        let result = self.queued(request, deadline, &mut refresh).await;
        // A request whose reply was lost may have queued the waiter.
        let joined = refresh.is_some() || request.lost_reply.load(Ordering::Relaxed);
        drop(refresh);
        match result {
            // The acquire took the waiter out of the queue.
            Ok(Some(guard)) => {
                leave.disarm();
                Ok(Some(guard))
            }
            // Refused before joining (bad input, a key of the wrong type, no TTL): the script
            // checks all that before it writes anything.
            Err(err) if !joined && !err.is_ambiguous() => {
                leave.disarm();
                Err(err)
            }
            other => {
                leave.run_now().await;
                other
            }
        }
    }

    /// The wait loop; `refresh` holds the registration that keeps the waiter's deadline fresh.
    async fn queued(
        &self,
        request: &Request,
        deadline: Option<Instant>,
        refresh: &mut Option<HoldHandle>,
    ) -> Result<Option<LockGuard>> {
        let mut failures = 0;
        let poll = self.client.config().fallback_poll;
        let channel = self.keys.waiter_channel(&request.field);
        // Subscribed before the first attempt (the channel still lingers after an earlier
        // wait of this owner: `Config::subscription_linger`), a refusal can go straight to
        // sleep. Otherwise the first attempt joins the queue, then the waiter subscribes and
        // tries once more: a wake-up may have come before the subscription. `WakeMode::All`:
        // two waits of one owner share the channel, as they share the place in the queue.
        // Each attempt cut twice the response timeout past the deadline (its undo goes on in the
        // background): an attempt waits for an earlier undo of its hold, which may be retried
        // for up to the settle window.
        let mut attempt =
            || bounded_attempt(&self.client, deadline, self.attempt(request, Queue::Join));
        let hub = self.client.hub();
        // Every waiter has a channel of its own, and owners are new for each acquisition: a
        // pattern over this client's waiters of this lock is one server subscription for
        // all of them, which lingers between waits, so a waiter mostly finds it ready and
        // needs neither a SUBSCRIBE nor a second attempt. Not on a cluster (sharded pub/sub
        // has no patterns).
        let pattern = hub.supports_patterns().then(|| {
            self.keys
                .waiters_pattern(&request.owner.client().to_string())
        });
        // When the last attempt that left the waiter queued was sent: a grant came after it.
        let mut queued_at = None;
        let joined = hub.join_if_delivered(&channel, pattern.as_deref(), WakeMode::All);
        let mut subscription = match joined {
            Some(subscription) => subscription,
            None => {
                let sent_at = Instant::now();
                if let Attempt::Done(guard) = open(
                    &self.client,
                    retrying(&mut attempt, deadline, &mut failures).await,
                )? {
                    return Ok(Some(guard));
                }
                queued_at = Some(sent_at);
                self.keep_refreshing(refresh, &request.field, sent_at);
                if deadline.is_some_and(|d| d <= Instant::now()) {
                    return Ok(None);
                }
                hub.subscribe_through(&channel, pattern.as_deref(), WakeMode::All, poll)
                    .await?
            }
        };
        loop {
            if subscription.pattern_refused() {
                // The server refused the pattern after this waiter joined it: its own channel.
                subscription = hub.subscribe(&channel, WakeMode::All, poll).await?;
            }
            let notified = subscription.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(guard) = self.take_grant(request, &subscription, queued_at, refresh) {
                return Ok(Some(guard));
            }
            let sent_at = Instant::now();
            let outcome = retrying(&mut attempt, deadline, &mut failures).await;
            let bound = match open(&self.client, outcome)? {
                Attempt::Done(guard) => return Ok(Some(guard)),
                Attempt::Retry(bound) => bound,
            };
            queued_at = Some(sent_at);
            self.keep_refreshing(refresh, &request.field, sent_at);
            let now = Instant::now();
            let mut until = now + jitter(poll);
            if let Some(bound) = bound.and_then(|b| now.checked_add(b)) {
                until = until.min(bound);
            }
            if let Some(deadline) = deadline {
                if deadline <= now {
                    return Ok(None);
                }
                until = until.min(deadline);
            }
            tokio::select! {
                _ = tokio::time::timeout_at(until, notified) => {}
                // The client is shutting down: give up (the queue entry is left on drop).
                _ = self.client.closing() => return Err(Error::Closed),
            }
        }
    }

    /// Takes the lock if a release handed it to this waiter: the letter on its channel says so
    /// (see the module docs), carries the fencing token and names the attempt whose offer it
    /// answers. The hold's lease was the grant's (at most what was left of the waiter's
    /// deadline) from some moment after the waiter was last seen queued: after `queued_at`, and
    /// after the start of the last refresh that found it queued. Its validity counts from
    /// there, so it never ends later than the server's; a watchdog-mode hold is renewed early.
    /// `None` (try the usual way) without a letter, for a letter that answers another offer,
    /// or when that validity would already be over.
    fn take_grant(
        &self,
        request: &Request,
        subscription: &Subscription,
        queued_at: Option<Instant>,
        refresh: &Option<HoldHandle>,
    ) -> Option<LockGuard> {
        let grant_lease = request.grant_lease?;
        let letter = subscription.take_letter()?;
        // '=<token>:<attempt>', no token without fencing.
        let text = std::str::from_utf8(letter.strip_prefix(&[LETTER_MARK])?).ok()?;
        let (token, attempt) = text.split_once(':')?;
        let attempt: u64 = attempt.parse().ok()?;
        if attempt == 0 || attempt != request.queued_attempt.load(Ordering::Relaxed) {
            return None;
        }
        let token = match token {
            "" => None,
            digits => Some(digits.parse::<u64>().ok()?),
        };
        let refreshed = refresh.as_ref().and_then(|handle| match handle.state() {
            HoldState::Valid { until } => until.checked_sub(self.waiter_timeout),
            _ => None,
        });
        let seen_queued = queued_at.max(refreshed)?;
        let until = seen_queued + grant_lease;
        if until <= Instant::now() {
            return None;
        }
        let name = &self.keys.name;
        let hold = self.client.watchdog().register_until(
            HoldKey::new(name, &request.field),
            request.lease,
            request.renewal,
            until,
        );
        tracing::debug!(target: "keylatch::fair", lock = %name, waiter = request.field, "the lock was handed to this waiter");
        subscription.letter_used();
        Some(self.guard(request, hold, token))
    }

    /// The guard of a hold of `request`'s owner.
    fn guard(&self, request: &Request, hold: HoldHandle, token: Option<u64>) -> LockGuard {
        self.hold_guard(request.owner, hold, token)
    }

    /// Makes sure the watchdog refreshes this waiter's deadline: registers it after the first
    /// queued attempt, and again if a refresh found the waiter gone (it was evicted, so the
    /// last attempt queued it anew).
    fn keep_refreshing(&self, refresh: &mut Option<HoldHandle>, field: &str, sent_at: Instant) {
        if refresh
            .as_ref()
            .is_some_and(|h| matches!(h.state(), HoldState::Valid { .. }))
        {
            return;
        }
        if refresh.is_some() {
            tracing::debug!(target: "keylatch::fair", lock = %self.keys.name, waiter = field, "waiter was evicted: queued again");
        }
        *refresh = None;
        *refresh = Some(self.client.watchdog().register(
            HoldKey::new(&self.keys.timeouts, field),
            self.waiter_timeout,
            REFRESH_WAITERS.renewal(),
            sent_at,
        ));
    }

    /// One acquire script call. If this future is dropped while the request is in flight, the
    /// request finishes in the background and what it did is undone; if the reply is lost, a
    /// hold it may have granted is undone before the error is returned (see `flight.rs`).
    async fn attempt(&self, request: &Request, queue: Queue) -> Result<Attempt<LockGuard>> {
        let name = &self.keys.name;
        let field = request.field.as_str();
        let watchdog = self.client.watchdog();
        watchdog.settled(name, field).await;
        let local = watchdog.local_count(name, field) as u64;
        let number = request.attempts.fetch_add(1, Ordering::Relaxed) + 1;
        let grant_lease = request
            .grant_lease
            .filter(|_| queue == Queue::Join)
            .map_or(0, lease_millis);
        let call = self
            .keys
            .call(&ACQUIRE)
            .arg(lease_millis(request.lease))
            .arg(field)
            .arg(lease_millis(self.waiter_timeout))
            .arg(if self.fencing { "1" } else { "0" })
            .arg(if queue == Queue::Join { "1" } else { "0" })
            .arg(local)
            .arg(grant_lease)
            .arg(number)
            .arg(if self.reentrant { "0" } else { "1" });
        let undo = Undo {
            client: self.client.clone(),
            release: self.release.clone(),
            keys: self.keys.clone(),
            owner: request.owner,
            field: request.field.clone(),
            expected: local + 1,
            joins: queue == Queue::Join,
        };
        let sent_at = Instant::now();
        let reply = Flight::new(call, undo).reply().await.inspect_err(|err| {
            if err.is_ambiguous() {
                request.lost_reply.store(true, Ordering::Relaxed);
                request.queued_attempt.store(0, Ordering::Relaxed);
            }
        })?;
        let token = match reply {
            Value::Nil => None,
            Value::Array(items) => match items.as_slice() {
                [Value::Int(token)] => Some(u64::try_from(*token).unwrap_or(0)),
                _ => return Err(unexpected()),
            },
            Value::Int(-1) => {
                return Err(Error::NoTtl {
                    key: name.to_string(),
                });
            }
            Value::Int(-3) => {
                return Err(Error::AlreadyHeld {
                    name: name.to_string(),
                });
            }
            Value::Int(ms) if ms > 0 => {
                request.refused.store(true, Ordering::Relaxed);
                let ms = u64::try_from(ms).unwrap_or(0);
                if queue == Queue::Join {
                    request.queued_attempt.store(number, Ordering::Relaxed);
                }
                return Ok(Attempt::Retry(Some(Duration::from_millis(ms))));
            }
            _ => return Err(unexpected()),
        };
        let hold = watchdog.register(
            HoldKey::new(name, field),
            request.lease,
            request.renewal,
            sent_at,
        );
        Ok(Attempt::Done(self.guard(request, hold, token)))
    }
}

fn unexpected() -> Error {
    Error::UnexpectedReply {
        what: "fair_acquire",
    }
}
