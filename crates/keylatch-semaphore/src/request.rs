//! Requests whose reply may be lost: markers that make them idempotent, retries, and the
//! settle-on-drop guard.
//!
//! Every call that changes a plain semaphore's count (and the expirable semaphore's
//! `try_set_permits` / `add_permits`) carries a fresh request marker `{name}:req:<uuid>`. The
//! script records in it that the request was applied, with a TTL (the *request window*)
//! counted from when the server applied it (a retry that finds it sets the TTL again), so:
//!
//! - a release, an `add_permits`, a drain or a `try_set_permits` whose reply was lost can be
//!   sent again with the same marker: it applies at most once, as long as the retry reaches
//!   the server within the request window of the last attempt that did;
//! - an acquire whose reply was lost is settled by its undo, which gives the permits back if
//!   the marker says they were taken, and otherwise leaves a tombstone in the marker, so an
//!   acquire still on its way takes nothing when it arrives.
//!
//! A release (permits given back, or permit ids released) is retried until the server answers
//! for as long as the client lives ([`release_once`]), listed with the client meanwhile so that
//! its shutdown reports it if it gives up first. The other calls are retried within the request
//! window of their first attempt ([`run_idempotent`]).
//!
//! A release's marker lives far longer ([`RELEASE_MARKER_LIFE`], an hour): the release is
//! retried until the server answers, and the server may have applied it (its reply lost) just
//! before an outage of any length, so a marker that lived only the request window could be
//! gone when the retry arrives, which would give the permits back twice.
//!
//! Once a reply has been seen the marker is no longer needed: it is queued for its semaphore
//! name on the client (shared by every handle of that name, so a handle made per call leaves
//! nothing behind), and once a few have gathered the next call that changes the count deletes
//! them with one `DEL` (the others expire).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keylatch_core::{Backoff, Error, ReleaseTicket, Result, lease_millis};
use keylatch_redis::redis::Value;
use keylatch_redis::{Client, ScriptCall, suffixed};
use tokio::time::Instant;

/// The largest permit count a semaphore holds: Java's `Integer.MAX_VALUE`, so that Redisson
/// clients can read every count keylatch writes. Larger counts are refused with
/// [`Error::InvalidPermits`].
pub const MAX_PERMITS: u64 = i32::MAX as u64;

/// How many permit ids one call of the permit-expirable semaphore hands out at most.
pub const MAX_PERMITS_PER_CALL: u32 = 1000;

/// How many settled markers one call deletes at most (with one `DEL`).
const SETTLED_BATCH: usize = 16;
/// How many settled markers gather before a call deletes them, so that most calls send none.
const SETTLED_MIN: usize = 8;
/// How many settled markers a semaphore name's queue remembers; older ones are left to expire.
const SETTLED_CAP: usize = 4096;
/// How many semaphore names' queues of settled markers a process keeps; past it the least
/// recently made is dropped (its markers expire).
const SETTLED_NAMES: usize = 10_000;
/// How long a release's marker lives once the server applied the release (at least the
/// request window): a release whose reply was lost is retried until the server answers, and
/// a retry that arrives within this finds the marker and applies nothing.
pub(crate) const RELEASE_MARKER_LIFE: Duration = Duration::from_secs(3600);

/// How long after a release's reply its marker waits for a call to take it along before a
/// background `DEL` removes it (with the others gathered meanwhile).
const FLUSH_DELAY: Duration = Duration::from_millis(100);

/// Settled markers of one semaphore name on one client, shared by its handles.
#[derive(Debug, Default)]
struct SettledQueue {
    markers: Mutex<VecDeque<String>>,
    /// A background flush is scheduled.
    flushing: std::sync::atomic::AtomicBool,
}

type Settled = Arc<SettledQueue>;
type Queues = HashMap<(uuid::Uuid, Arc<str>), (u64, Settled)>;

/// The settled-marker queue of `name` on the client `client`, made on first use.
fn settled_queue(client: &Client, name: &Arc<str>) -> Settled {
    static QUEUES: Mutex<Option<Queues>> = Mutex::new(None);
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut queues = QUEUES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let queues = queues.get_or_insert_with(HashMap::new);
    if let Some((_, queue)) = queues.get(&(client.id(), name.clone())) {
        return queue.clone();
    }
    if queues.len() >= SETTLED_NAMES
        && let Some(oldest) = queues
            .iter()
            .min_by_key(|(_, (made, _))| *made)
            .map(|(key, _)| key.clone())
    {
        queues.remove(&oldest);
    }
    let queue = Settled::default();
    let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    queues.insert((client.id(), name.clone()), (made, queue.clone()));
    queue
}

/// A release's marker, to settle once the release's reply is seen.
#[derive(Debug)]
pub(crate) struct ReleaseDone {
    client: Client,
    queue: Settled,
    marker: String,
}

impl ReleaseDone {
    /// Queues the marker for deletion, and schedules a background `DEL` unless one is.
    pub(crate) fn settle(self) {
        let ReleaseDone {
            client,
            queue,
            marker,
        } = self;
        {
            let mut markers = queue.markers.lock().expect("settled lock");
            if markers.len() >= SETTLED_CAP {
                markers.pop_front();
            }
            markers.push_back(marker);
        }
        if queue
            .flushing
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        let background = client.clone();
        background.spawn_background(async move {
            tokio::time::sleep(FLUSH_DELAY).await;
            // Settled from now on, a marker schedules a flush of its own.
            queue
                .flushing
                .store(false, std::sync::atomic::Ordering::Release);
            loop {
                let batch: Vec<String> = {
                    let mut markers = queue.markers.lock().expect("settled lock");
                    let n = markers.len().min(SETTLED_BATCH);
                    markers.drain(..n).collect()
                };
                let Some(first) = batch.first() else {
                    return Ok(());
                };
                let mut del = keylatch_redis::redis::cmd("DEL");
                for marker in &batch {
                    del.arg(marker.as_str());
                }
                // A marker not deleted (the server could not be reached) expires.
                if client.query::<i64>(&del, first).await.is_err() {
                    return Ok(());
                }
            }
        });
    }
}

/// Request markers of one semaphore handle (shared by its clones).
#[derive(Debug)]
pub(crate) struct Requests {
    client: Client,
    name: Arc<str>,
    settled: Settled,
}

impl Requests {
    pub(crate) fn new(client: &Client, name: &Arc<str>) -> Requests {
        Requests {
            client: client.clone(),
            name: name.clone(),
            settled: settled_queue(client, name),
        }
    }

    /// A fresh marker key, `{name}:req:<uuid>`.
    pub(crate) fn marker(&self) -> String {
        self.tombstone(&uuid::Uuid::new_v4().simple().to_string())
    }

    /// The tombstone key of a permit id, `{name}:req:<id>` (the marker namespace).
    pub(crate) fn tombstone(&self, id: &str) -> String {
        suffixed(&self.name, &format!("req:{id}"))
    }

    /// How long a marker lives, in ms (see [`window`]).
    pub(crate) fn window_ms(&self) -> u64 {
        lease_millis(window(&self.client))
    }

    /// How long a release's marker lives, in ms (see [`RELEASE_MARKER_LIFE`]).
    pub(crate) fn release_window_ms(&self) -> u64 {
        lease_millis(window(&self.client).max(RELEASE_MARKER_LIFE))
    }

    /// Markers whose replies were seen, to delete with the next call: none until a few have
    /// gathered, then at most a batch.
    pub(crate) fn take_settled(&self) -> Vec<String> {
        let mut settled = self.settled.markers.lock().expect("settled lock");
        if settled.len() < SETTLED_MIN {
            return Vec::new();
        }
        let n = settled.len().min(SETTLED_BATCH);
        settled.drain(..n).collect()
    }

    /// Remembers a marker whose reply was seen.
    pub(crate) fn settle(&self, marker: String) {
        let mut settled = self.settled.markers.lock().expect("settled lock");
        if settled.len() >= SETTLED_CAP {
            settled.pop_front();
        }
        settled.push_back(marker);
    }

    /// Remembers the marker of a release whose reply was seen, and makes sure it is deleted
    /// soon: by the next call that changes the count, or else by a background `DEL` a moment
    /// later (a release's marker would otherwise live [`RELEASE_MARKER_LIFE`]).
    pub(crate) fn settle_release(&self, marker: String) {
        self.release_done(marker).settle();
    }

    /// What settles a release's `marker` once its reply is seen, wherever that happens (the
    /// caller, or the background after the release timeout).
    pub(crate) fn release_done(&self, marker: String) -> ReleaseDone {
        ReleaseDone {
            client: self.client.clone(),
            queue: self.settled.clone(),
            marker,
        }
    }

    /// Puts back markers taken for a call that deleted nothing.
    pub(crate) fn give_back(&self, markers: Vec<String>) {
        let mut settled = self.settled.markers.lock().expect("settled lock");
        for marker in markers.into_iter().rev() {
            if settled.len() < SETTLED_CAP {
                settled.push_front(marker);
            }
        }
    }

    /// Runs a call that must apply exactly once, with the marker bookkeeping: a fresh marker
    /// and the settled markers to delete are added as keys after `call`'s own (so its script
    /// reads the marker at `KEYS[n + 1]` and the settled ones after it). `applied` tells from
    /// the reply whether the script applied the change (the marker is then settled) or not (it
    /// deleted nothing, so the settled markers are put back).
    ///
    /// Finished in the background if the future is dropped before the reply.
    pub(crate) async fn apply_marked(
        &self,
        call: ScriptCall,
        applied: impl FnOnce(&Value) -> bool,
    ) -> Result<Value> {
        let marker = self.marker();
        let settled = self.take_settled();
        let call = with_keys(call.key(marker.as_str()), &settled);
        let reply = self.apply_once(call).await?;
        if applied(&reply) {
            self.settle(marker);
        } else {
            self.give_back(settled);
        }
        Ok(reply)
    }

    /// Runs a release that must apply exactly once: as [`apply_marked`](Self::apply_marked),
    /// sent by [`release_once`] (retried while the client lives, waited for at most the
    /// release timeout).
    pub(crate) async fn release_marked(&self, call: ScriptCall, permits: u64) -> Result<Value> {
        let marker = self.marker();
        let settled = self.take_settled();
        let call = with_keys(call.key(marker.as_str()), &settled);
        let done = self.release_done(marker);
        let (reply, _) = release_once(&self.client, call, &self.name, permits, Some(done)).await?;
        if reply == Value::Int(1) {
            // Settled by `release_once` (the reply came in time, or later in the background).
        } else {
            self.give_back(settled);
        }
        Ok(reply)
    }

    /// Runs a call that must apply exactly once (it carries a marker), finishing it in the
    /// background if the future is dropped before the reply.
    pub(crate) async fn apply_once(&self, call: ScriptCall) -> Result<Value> {
        let since = Instant::now();
        let settle = Settle::arm(&self.client, call.clone(), since);
        let result = run_idempotent(&self.client, &call, since).await;
        settle.disarm();
        result.map(|(value, _)| value)
    }
}

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
    /// takes longer, it goes on in the background.
    pub(crate) async fn run_now(mut self) -> Result<Value> {
        let Some(job) = self.job.take() else {
            return Ok(Value::Nil);
        };
        let limit = job.client.config().release_timeout;
        let attempt = job.run();
        match tokio::time::timeout(limit, attempt).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => {
                if retriable(&err) {
                    drop(Settle { job: Some(job) });
                }
                Err(err)
            }
            Err(_) => {
                drop(Settle { job: Some(job) });
                Err(Error::Timeout { after: limit })
            }
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

/// Checks a permit count: at least 1, at most [`MAX_PERMITS`].
pub(crate) fn check_permits(permits: u64) -> Result<()> {
    if permits == 0 {
        return Err(Error::InvalidPermits {
            reason: "the permit count is zero",
        });
    }
    if permits > MAX_PERMITS {
        return Err(Error::InvalidPermits {
            reason: "the permit count is larger than 2147483647",
        });
    }
    Ok(())
}

/// Checks a change of the permit count: not zero, at most [`MAX_PERMITS`] either way.
pub(crate) fn check_delta(delta: i64) -> Result<()> {
    if delta == 0 {
        return Err(Error::InvalidPermits {
            reason: "the change is zero",
        });
    }
    if delta.unsigned_abs() > MAX_PERMITS {
        return Err(Error::InvalidPermits {
            reason: "the change is larger than 2147483647",
        });
    }
    Ok(())
}

/// The error for a change refused by a script (`-1`: over the maximum, `-2`: below zero).
pub(crate) fn refused(code: i64) -> Error {
    Error::InvalidPermits {
        reason: if code == -1 {
            "the count would exceed 2147483647"
        } else {
            "the count would fall below zero"
        },
    }
}

/// Parses a count read with `GET`; `None` means missing (0). A negative count (Redisson's
/// `addPermits` can leave one) reads as 0.
pub(crate) fn parse_count(value: Option<String>, key: &str) -> Result<u64> {
    let Some(text) = value else { return Ok(0) };
    let count: i64 = text.trim().parse().map_err(|_| Error::WrongType {
        key: key.to_owned(),
    })?;
    Ok(u64::try_from(count).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_checked() {
        assert!(check_permits(0).is_err());
        assert!(check_permits(1).is_ok());
        assert!(check_permits(MAX_PERMITS).is_ok());
        assert!(check_permits(MAX_PERMITS + 1).is_err());
        assert!(check_delta(0).is_err());
        assert!(check_delta(-1).is_ok());
        assert!(check_delta(i64::MIN).is_err());
        assert!(check_delta(MAX_PERMITS as i64 + 1).is_err());
        assert_eq!(parse_count(None, "k").unwrap(), 0);
        assert_eq!(parse_count(Some("7".into()), "k").unwrap(), 7);
        assert_eq!(parse_count(Some("-3".into()), "k").unwrap(), 0);
        assert!(matches!(
            parse_count(Some("seven".into()), "k"),
            Err(Error::WrongType { .. })
        ));
    }
}
