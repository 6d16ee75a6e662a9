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
//!
//! May import: `counts.rs`, `settled.rs`, `retry.rs`, the Redis layer's client and scripts.

use std::sync::Arc;

use keylatch_core::{Result, lease_millis};
use keylatch_redis::redis::Value;
use keylatch_redis::{Client, ScriptCall, suffixed};
use tokio::time::Instant;

use crate::retry::{Settle, release_once, run_idempotent, window, with_keys};
use crate::settled::{
    RELEASE_MARKER_LIFE, ReleaseDone, SETTLED_BATCH, SETTLED_CAP, SETTLED_MIN, Settled, Taken,
    settled_queue,
};

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
    /// gathered, then at most a batch. They come back to the queue unless the call reports its
    /// script deleted them ([`Taken`]).
    pub(crate) fn take_settled(&self) -> Taken {
        let markers = {
            let mut settled = self.settled.markers.lock().expect("settled lock");
            if settled.len() < SETTLED_MIN {
                Vec::new()
            } else {
                let n = settled.len().min(SETTLED_BATCH);
                settled.drain(..n).collect()
            }
        };
        Taken {
            from: (!markers.is_empty()).then(|| (self.client.clone(), self.settled.clone())),
            markers,
        }
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
        let call = with_keys(call.key(marker.as_str()), settled.keys());
        let reply = self.apply_once(call).await?;
        if applied(&reply) {
            settled.deleted();
            self.settle(marker);
        } else {
            settled.give_back();
        }
        Ok(reply)
    }

    /// Runs a release that must apply exactly once: as [`apply_marked`](Self::apply_marked),
    /// sent by [`release_once`] (retried while the client lives, waited for at most the
    /// release timeout).
    pub(crate) async fn release_marked(&self, call: ScriptCall, permits: u64) -> Result<Value> {
        let marker = self.marker();
        let settled = self.take_settled();
        let call = with_keys(call.key(marker.as_str()), settled.keys());
        let done = self.release_done(marker);
        let (reply, _) = release_once(&self.client, call, &self.name, permits, Some(done)).await?;
        if reply == Value::Int(1) {
            // Its marker is settled by `release_once` (the reply came in time, or later in the
            // background); the script deleted the settled ones.
            settled.deleted();
        } else {
            settled.give_back();
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
