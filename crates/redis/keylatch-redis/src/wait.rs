//! The wait loop of the Redis primitives: try; if refused, subscribe to the lock's channel
//! through the client's pub/sub hub and try again on every wake-up or poll.

use std::time::Duration;

use keylatch_core::lock::{Attempt, jitter, retrying};
use keylatch_core::{OwnerId, Result};
use tokio::time::Instant;

use crate::client::Client;
use crate::pubsub::WakeMode;

/// The wait loop shared by the primitives: try; if refused and the budget allows, subscribe to
/// `channel` *before* retrying, then retry whenever a message arrives, the holder's lease
/// ends, or the jittered fallback poll passes, until `deadline` (`None`: forever).
///
/// Returns `Ok(None)` when the deadline passed first. Transient failures (`is_ambiguous`)
/// are retried with back-off, up to 8 in a row, while the deadline allows; `attempt` must have
/// undone its own effect before returning one.
///
/// With a deadline, the call returns by the deadline plus twice the
/// [`response_timeout`](crate::Config::response_timeout), whatever the servers do: an attempt
/// still running then (waiting for an earlier undo of the same hold, connecting, or waiting for
/// a reply, a replica acknowledgement or its own undo) is dropped, which leaves its undo to
/// the background, and the call ends with [`Error::Timeout`](keylatch_core::Error::Timeout).
///
/// # Cancel safety
/// Cancel safe if `attempt` is: the subscription is released on drop.
// Not an async fn, on purpose (see the comment in the body).
#[allow(clippy::too_many_arguments, clippy::manual_async_fn)]
pub fn wait_for<T, F, Fut>(
    client: &Client,
    primitive: &'static str,
    owner: Option<OwnerId>,
    channel: &str,
    wake: WakeMode,
    deadline: Option<Instant>,
    mut attempt: F,
) -> impl Future<Output = Result<Option<T>>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>>>,
{
    // An async block rather than an async fn: it keeps its arguments once, where an async
    // fn's future keeps them twice (as arguments and as locals), in every acquisition's future.
    async move {
        let mut attempt = move || bounded_attempt(client, deadline, attempt());
        let mut acquisition = client.begin_acquisition(primitive)?;
        acquisition.naming(channel);
        if let Some(owner) = owner {
            acquisition.owned_by(owner);
        }
        let mut failures = 0;
        let remaining = match open(
            client,
            retrying(&mut attempt, deadline, &mut failures).await,
        )? {
            Attempt::Done(value) => {
                acquisition.finish("acquired");
                return Ok(Some(value));
            }
            Attempt::Retry(remaining) => remaining,
        };
        if deadline.is_some_and(|d| d <= Instant::now()) {
            acquisition.finish("timed_out");
            return Ok(None);
        }
        // Boxed: waiting is the slow path, and inline it would make every acquisition's future
        // (the first attempt's, which most acquisitions end with) twice as large.
        Box::pin(wait_subscribed(
            client,
            channel,
            wake,
            deadline,
            attempt,
            acquisition,
            failures,
            remaining,
        ))
        .await
    }
}

/// The rest of [`wait_for`] after a refused first attempt: subscribe, then try again on every
/// wake-up or poll until the lock is taken or the deadline passes.
#[allow(clippy::too_many_arguments)]
async fn wait_subscribed<T, F, Fut>(
    client: &Client,
    channel: &str,
    wake: WakeMode,
    deadline: Option<Instant>,
    mut attempt: F,
    mut acquisition: keylatch_core::Acquisition,
    mut failures: u32,
    mut remaining: Option<Duration>,
) -> Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>>>,
{
    let poll = client.config().fallback_poll;
    let subscription = client.hub().subscribe(channel, wake, poll).await?;
    loop {
        let notified = subscription.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        // The first retry happens right after subscribing: a release may have come before.
        match open(
            client,
            retrying(&mut attempt, deadline, &mut failures).await,
        )? {
            Attempt::Done(value) => {
                acquisition.finish("acquired_after_waiting");
                return Ok(Some(value));
            }
            Attempt::Retry(r) => remaining = r.or(remaining),
        }
        let now = Instant::now();
        let mut until = now + jitter(poll);
        if let Some(r) = remaining.and_then(|r| now.checked_add(r)) {
            until = until.min(r);
        }
        if let Some(deadline) = deadline {
            if deadline <= now {
                acquisition.finish("timed_out");
                return Ok(None);
            }
            until = until.min(deadline);
        }
        tokio::select! {
            _ = tokio::time::timeout_at(until, notified) => {}
            // The client is shutting down: give up (what a dropped attempt took is undone).
            _ = client.closing() => return Err(keylatch_core::Error::Closed),
        }
        remaining = None;
    }
}

/// One attempt of an acquisition bounded by `deadline`, cut off twice the
/// [`response_timeout`](crate::Config::response_timeout) after it with
/// [`Error::Timeout`](keylatch_core::Error::Timeout). Dropping an attempt leaves its undo to
/// the background, so the wait bound holds even when a server never answers, or while an
/// earlier undo of the same hold is still retried (for up to the settle window, which the
/// attempt waits for). For primitives that run their own wait loop; [`wait_for`] cuts its
/// attempts so.
///
/// # Errors
/// The attempt's error, or `Timeout`.
///
/// # Cancel safety
/// As `attempt`.
#[doc(hidden)]
pub async fn bounded_attempt<T>(
    client: &Client,
    deadline: Option<Instant>,
    attempt: impl Future<Output = Result<Attempt<T>>>,
) -> Result<Attempt<T>> {
    // Twice the response timeout: a request sent by the deadline gets its own response
    // timeout first (so a lost reply is settled on its connection, which is then fenced);
    // only an attempt held up before sending (waiting for an earlier undo) is cut.
    let grace = client.config().response_timeout * 2;
    let Some(cut) = deadline.and_then(|d| d.checked_add(grace)) else {
        return attempt.await;
    };
    // Boxed: the timer inline would grow every acquisition's future, and a round trip costs
    // far more than the allocation.
    tokio::select! {
        biased;
        outcome = attempt => outcome,
        () = Box::pin(tokio::time::sleep_until(cut)) => {
            Err(keylatch_core::Error::Timeout { after: grace })
        }
    }
}

/// An attempt's outcome, or [`Error::Closed`](keylatch_core::Error::Closed) when the client started
/// shutting down meanwhile (what the attempt took is dropped, which releases it). For
/// primitives that run their own wait loop, after each attempt.
///
/// # Errors
/// The attempt's error, or `Closed`.
pub fn open<T>(client: &Client, outcome: Result<T>) -> Result<T> {
    if client.is_closed() {
        return Err(keylatch_core::Error::Closed);
    }
    outcome
}
