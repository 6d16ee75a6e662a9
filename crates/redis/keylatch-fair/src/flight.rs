//! Acquire requests that finish even when their caller is gone.
//!
//! An undo sent the moment an acquire's future is dropped can reach Redis *before* the acquire
//! it undoes: the client spreads requests over several connections, and Redis does not order
//! requests across connections. The undo then finds nothing to undo, and the late acquire
//! leaves a queue entry (or a hold) behind. So when a fair-lock acquire is dropped while its
//! request is in flight, the request itself is handed to a background task, which waits for the
//! reply and undoes exactly what the reply says happened, after it happened.
//!
//! A reply lost to the response timeout (or a broken connection) is different: the request's
//! connection is dropped, and the undo (and the wait's leave) goes over a new one, while the
//! request may still be on its way on the old one (TCP retransmits it after a partition heals).
//! The command path kills the old connection on the server before the new one carries
//! anything (keylatch-redis, `commands/fence.rs`), so the acquire runs before its undo or
//! never.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use keylatch_core::{Backoff, HoldKey, OwnerId, PendingWork, Result};
use keylatch_redis::redis::Value;
use keylatch_redis::{Client, ScriptCall};
use tokio::sync::oneshot;

use crate::keys::Keys;
use crate::release::{FairRelease, leave};

/// What an acquire may have done, to undo it for a caller that never saw the reply.
#[derive(Debug)]
pub(crate) struct Undo {
    pub(crate) client: Client,
    pub(crate) release: Arc<FairRelease>,
    pub(crate) keys: Arc<Keys>,
    pub(crate) owner: OwnerId,
    /// The owner id as text (hash field and waiter id).
    pub(crate) field: String,
    /// The owner's hold count if the acquire granted a hold.
    pub(crate) expected: u64,
    /// Whether the acquire may have queued the waiter.
    pub(crate) joins: bool,
}

impl Undo {
    /// Marks the hold (and the queue entry) as having work under way, so the same owner's next
    /// attempt on this client waits for it (`WatchdogRegistry::settled`).
    fn pending(&self) -> (PendingWork, Option<PendingWork>) {
        let watchdog = self.client.watchdog();
        (
            watchdog.begin_pending(&HoldKey::new(&self.keys.name, &self.field)),
            self.joins
                .then(|| watchdog.begin_pending(&HoldKey::new(&self.keys.timeouts, &self.field))),
        )
    }

    /// Releases a hold the acquire may have granted, only if the owner's count says it did
    /// (so it is harmless if the acquire did not run), and never a hold handed to the waiter
    /// on release after the request (see `FairRelease::release_counted`). A few tries ride out
    /// connections killed together.
    async fn release_hold(&self) -> Result<()> {
        let mut tries = 0;
        let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(40));
        loop {
            match self
                .release
                .release_counted(self.owner, self.expected, true)
                .await
            {
                Err(err) if err.is_ambiguous() && tries < 3 => {
                    tries += 1;
                    backoff.wait().await;
                }
                other => return other,
            }
        }
    }

    /// Undoes what `reply` says the acquire did, for a caller that will never see it.
    async fn abandon(&self, reply: &Result<Value>) -> Result<()> {
        let granted = matches!(reply, Ok(Value::Nil | Value::Array(_)));
        let unknown = matches!(reply, Err(err) if err.is_ambiguous());
        let queued = matches!(reply, Ok(Value::Int(ms)) if *ms > 0);
        if granted || unknown {
            self.release_hold().await?;
        }
        if self.joins && (queued || unknown) {
            leave(&self.client, &self.keys, &self.field).await?;
        }
        Ok(())
    }
}

type Request = Pin<Box<dyn Future<Output = Result<Value>> + Send>>;

/// One acquire request; see the module docs.
pub(crate) struct Flight {
    request: Option<Request>,
    /// Whether the request was polled, so may have been sent.
    sent: bool,
    undo: Option<Undo>,
}

impl std::fmt::Debug for Flight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flight")
            .field("in_flight", &self.request.is_some())
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

impl Flight {
    pub(crate) fn new(call: ScriptCall, undo: Undo) -> Flight {
        let client = undo.client.clone();
        Flight {
            request: Some(Box::pin(async move { client.eval_value(&call).await })),
            sent: false,
            undo: Some(undo),
        }
    }

    /// Sends the request and returns its reply. If the reply is lost (an ambiguous error), a
    /// hold the acquire may have granted is undone before this returns. If this future is
    /// dropped first, the request finishes and is undone in the background.
    pub(crate) async fn reply(mut self) -> Result<Value> {
        let reply = std::future::poll_fn(|cx| {
            self.sent = true;
            self.request
                .as_mut()
                .expect("a flight is awaited once")
                .as_mut()
                .poll(cx)
        })
        .await;
        self.request = None;
        if let Err(err) = &reply
            && err.is_ambiguous()
            && let Some(undo) = self.undo.take()
        {
            // The acquire may or may not have run: the caller retries or gives up, and either
            // way a hold it may have granted goes now. In the background, so that dropping
            // this future does not drop the undo; waited for, so a retry never races it.
            let (done, finished) = oneshot::channel();
            let pending = undo.pending();
            let client = undo.client.clone();
            client.spawn_background(async move {
                let _pending = pending;
                let result = undo.release_hold().await;
                let _ = done.send(());
                result
            });
            let _ = finished.await;
        }
        reply
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        let (Some(request), Some(undo)) = (self.request.take(), self.undo.take()) else {
            return;
        };
        if !self.sent {
            return;
        }
        let pending = undo.pending();
        let client = undo.client.clone();
        client.spawn_background(async move {
            let _pending = pending;
            let reply = request.await;
            undo.abandon(&reply).await
        });
    }
}
