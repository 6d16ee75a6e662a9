//! Sending a marked call until it is applied: within the request window, or (a release) for
//! as long as the client lives; and the settle-on-drop guard of a call whose reply may be lost.
//!
//! May import: `settled.rs`, the Redis layer's client and scripts, the core.

use std::sync::Arc;
use std::time::Duration;

use keylatch_core::{Backoff, Error, ReleaseTicket, Result};
use keylatch_redis::redis::Value;
use keylatch_redis::{Client, ScriptCall};
use tokio::time::Instant;

use crate::settled::ReleaseDone;

/// Adds the settled markers as keys after a call's own.
pub(crate) fn with_keys(mut call: ScriptCall, keys: &[String]) -> ScriptCall {
    for key in keys {
        call = call.key(key.as_str());
    }
    call
}

/// The request window: how long a marker lives once the server applied its request. A
/// request is assumed to reach the server within a response timeout of being sent, or never;
/// the calls other than releases (and the undos) are retried only while the first attempt's
/// marker, written at the earliest when it was sent, is certain to exist.
pub(crate) fn window(client: &Client) -> Duration {
    client.settle_window()
}

/// The longest pause between two attempts of a release: a quarter of the request window, at
/// most 1 s. Once the server answers again, the next attempt then reaches it well within the
/// request window of any earlier attempt it applied on its return (a paused server applies
/// what waited in its socket when it resumes).
fn release_pause(client: &Client) -> Duration {
    (window(client) / 4).min(Duration::from_secs(1))
}

/// Whether an error leaves the call's outcome unknown or means it was never sent: either way,
/// sending an idempotent call again is safe.
fn retriable(err: &Error) -> bool {
    err.is_transient() || matches!(err, Error::Pool(_))
}

/// Sends an idempotent call, and again after a lost reply or a failed connection, while the
/// request window of the first attempt (sent at `since`) allows. Returns the reply and how
/// many attempts it took.
pub(crate) async fn run_idempotent(
    client: &Client,
    call: &ScriptCall,
    since: Instant,
) -> Result<(Value, u32)> {
    let response_timeout = client.config().response_timeout;
    // Every attempt must reach the server while the first attempt's marker still exists (an
    // attempt sent later could apply twice, or an undo could find no trace of its acquire).
    let last_send = since + window(client).saturating_sub(response_timeout * 2);
    let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(500));
    let mut attempts = 0;
    loop {
        if Instant::now() >= last_send {
            tracing::warn!(target: "keylatch::semaphore",
                script = call.script().name(),
                key = call.first_key(),
                "the request window passed: the outcome of this semaphore call stays unknown"
            );
            return Err(Error::Timeout {
                after: response_timeout,
            });
        }
        attempts += 1;
        match client.eval_value(call).await {
            Ok(value) => return Ok((value, attempts)),
            Err(err) if retriable(&err) => {
                tracing::debug!(target: "keylatch::semaphore", error = %err, script = call.script().name(), "retrying");
                backoff.wait().await;
            }
            Err(err) => return Err(err),
        }
    }
}

/// Sends a release (a call that gives permits back and applies at most once: it carries a
/// marker, or releases permit ids) until the server answers, for as long as the client lives:
/// lost replies, failed connections and an unreachable server are retried with back-off (each
/// attempt bounded by the response timeout). Ends with the reply and how many attempts it took,
/// or with an error that is not transient ([`Error::Closed`] once the client is shut down).
pub(crate) async fn run_until_applied(client: &Client, call: &ScriptCall) -> Result<(Value, u32)> {
    let started = Instant::now();
    let mut warned = false;
    let mut backoff = Backoff::new(Duration::from_millis(10), release_pause(client));
    let mut attempts = 0;
    loop {
        attempts += 1;
        match client.eval_value(call).await {
            Ok(value) => return Ok((value, attempts)),
            Err(err) if retriable(&err) => {
                if !warned && started.elapsed() >= window(client) {
                    warned = true;
                    tracing::warn!(
                        error = %err,
                        script = call.script().name(),
                        key = call.first_key(),
                        "a semaphore release is still not confirmed after the request window: \
                         retrying until the server answers"
                    );
                } else {
                    tracing::debug!(error = %err, script = call.script().name(), "retrying");
                }
                backoff.wait().await;
            }
            Err(err) => return Err(err),
        }
    }
}

/// Runs a release of `permits` permits of `name` (see [`run_until_applied`]), listed with the
/// client until it ends, and waits for it at most the client's release timeout: then it
/// returns [`Error::Timeout`] and the release goes on in the background (the same if the
/// future is dropped). The client's shutdown reports it if it is still unconfirmed then.
pub(crate) async fn release_once(
    client: &Client,
    call: ScriptCall,
    name: &Arc<str>,
    permits: u64,
    done: Option<ReleaseDone>,
) -> Result<(Value, u32)> {
    let limit = client.config().release_timeout;
    // Armed with the marker to settle: if this future is dropped or times out, the release
    // goes on in the background and settles it there.
    let mut settle = Settle::arm_release(
        client,
        call.clone(),
        client.track_release(name, permits),
        done,
    );
    match tokio::time::timeout(limit, run_until_applied(client, &call)).await {
        Ok(result) => {
            let done = settle.job.as_mut().and_then(|job| job.done.take());
            settle.disarm();
            if let (Ok((Value::Int(1), _)), Some(done)) = (&result, done) {
                done.settle();
            }
            result
        }
        // Dropped armed: the release goes on in the background.
        Err(_) => Err(Error::Timeout { after: limit }),
    }
}

/// A call that must reach the server (an undo, or a change of the count already sent): armed
/// before the request is sent, disarmed when its reply is seen. Dropped armed (the future was
/// cancelled in flight), it runs the call in the background: a release until it is applied
/// (while the client lives), anything else within the request window.
#[derive(Debug)]
#[must_use]
pub(crate) struct Settle {
    job: Option<Job>,
}

#[derive(Debug)]
struct Job {
    client: Client,
    call: ScriptCall,
    until: Until,
    /// A release's marker, settled once the release is known applied.
    done: Option<ReleaseDone>,
}

/// How long a settling call is retried.
#[derive(Debug)]
enum Until {
    /// Within the request window of the first attempt, sent at this instant.
    Window(Instant),
    /// Until applied, while the client lives; listed with the client meanwhile (until the
    /// ticket drops with the job).
    Applied { _ticket: ReleaseTicket },
}

impl Settle {
    pub(crate) fn arm(client: &Client, call: ScriptCall, since: Instant) -> Settle {
        Settle {
            job: Some(Job {
                client: client.clone(),
                call,
                until: Until::Window(since),
                done: None,
            }),
        }
    }

    /// Arms the undo of an acquisition (it gives back `permits` of `name` if the acquisition
    /// ran), retried until applied while the client lives, as a release is: an undo is
    /// idempotent (it leaves a tombstone), so sending it again is always safe, and giving it up
    /// would lose the permits of an acquisition that a paused server applies on its return.
    /// What an outage longer than a marker's life can cost is the release's bound: an
    /// acquisition that reaches the server after its tombstone expired takes its permits.
    pub(crate) fn arm_undo(
        client: &Client,
        call: ScriptCall,
        name: &Arc<str>,
        permits: u64,
    ) -> Settle {
        Settle::arm_release(client, call, client.track_release(name, permits), None)
    }

    /// Arms a release, retried until applied (see [`run_until_applied`]).
    pub(crate) fn arm_release(
        client: &Client,
        call: ScriptCall,
        ticket: ReleaseTicket,
        done: Option<ReleaseDone>,
    ) -> Settle {
        Settle {
            job: Some(Job {
                client: client.clone(),
                call,
                until: Until::Applied { _ticket: ticket },
                done,
            }),
        }
    }

    /// The reply arrived: nothing to do.
    pub(crate) fn disarm(mut self) {
        self.job = None;
    }

    /// Runs the call now and waits, at most the client's release timeout; if that fails or
    /// takes longer, it goes on in the background. The job stays armed while it runs, so a
    /// caller cut off mid-call (a deadline, a dropped future) hands it to the background too.
    pub(crate) async fn run_now(mut self) -> Result<Value> {
        let Some(job) = self.job.as_ref() else {
            return Ok(Value::Nil);
        };
        let limit = job.client.config().release_timeout;
        match tokio::time::timeout(limit, job.run()).await {
            Ok(Ok(value)) => {
                self.settled(&value);
                Ok(value)
            }
            // Transient: dropped armed, it goes on in the background.
            Ok(Err(err)) if retriable(&err) => Err(err),
            Ok(Err(err)) => {
                self.job = None;
                Err(err)
            }
            Err(_) => Err(Error::Timeout { after: limit }),
        }
    }

    /// The call was applied with this reply: a release's marker is settled, nothing is left
    /// to run.
    fn settled(&mut self, value: &Value) {
        if let Some(job) = self.job.take()
            && let (Value::Int(1), Some(done)) = (value, job.done)
        {
            done.settle();
        }
    }
}

impl Job {
    async fn run(&self) -> Result<Value> {
        match self.until {
            Until::Window(since) => run_idempotent(&self.client, &self.call, since)
                .await
                .map(|(value, _)| value),
            Until::Applied { .. } => run_until_applied(&self.client, &self.call)
                .await
                .map(|(value, _)| value),
        }
    }
}

impl Drop for Settle {
    fn drop(&mut self) {
        if let Some(job) = self.job.take() {
            let client = job.client.clone();
            // The job (and a release's ticket) lives until the background task ends.
            client.spawn_background(async move {
                let value = job.run().await?;
                if let (Value::Int(1), Some(done)) = (value, job.done) {
                    done.settle();
                }
                Ok(())
            });
        }
    }
}
