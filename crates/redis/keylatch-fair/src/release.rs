//! How a fair hold is released, and how a waiter leaves the queue.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::hold::{Extension, HoldExtend};
use keylatch_core::{Error, HoldKey, HoldRelease, OwnerId, Renewal, Result};
use keylatch_redis::redis::Value;
use keylatch_redis::{Client, RENEW_HASH_HOLDS};

use crate::keys::Keys;
use crate::scripts::{LEAVE, RELEASE, RELEASE_IF_COUNT};

/// Releases holds of one fair lock name; a full release wakes the head of the queue.
#[derive(Debug)]
pub(crate) struct FairRelease {
    pub(crate) client: Client,
    pub(crate) keys: Arc<Keys>,
}

/// A fair hold's lease is its hash's expiry, as the reentrant lock's.
#[async_trait]
impl HoldExtend for FairRelease {
    async fn extend(&self, owner: OwnerId, how: Extension) -> Result<Option<Duration>> {
        keylatch_redis::extend_hash_hold(&self.client, &self.keys.name, owner, how).await
    }

    fn watchdog_renewal(&self) -> Option<(Renewal, Duration)> {
        Some((
            RENEW_HASH_HOLDS.renewal(),
            self.client.config().watchdog_timeout,
        ))
    }
}

#[async_trait]
impl HoldRelease for FairRelease {
    async fn release(&self, owner: OwnerId) -> Result<()> {
        let call = self.keys.call(&RELEASE).arg(owner.wire_form().as_str());
        match self.client.eval_value(&call).await? {
            Value::Nil => Err(Error::NotHeld {
                name: self.keys.name.to_string(),
            }),
            Value::Int(0 | 1) => Ok(()),
            _ => Err(Error::UnexpectedReply {
                what: "fair_release",
            }),
        }
    }

    async fn release_if_count(&self, owner: OwnerId, expected: u64) -> Result<()> {
        self.release_counted(owner, expected, false).await
    }
}

impl FairRelease {
    /// Releases one hold of `owner` only if its count is `expected`. With `spare_grant`, not
    /// a hold the lock was handed to the owner with on release and that the owner has not
    /// taken yet: undoing an acquire request, such a hold came after the request, not from
    /// it (the waiter takes it, or its leave releases it).
    pub(crate) async fn release_counted(
        &self,
        owner: OwnerId,
        expected: u64,
        spare_grant: bool,
    ) -> Result<()> {
        let call = self
            .keys
            .call(&RELEASE_IF_COUNT)
            .arg(owner.wire_form().as_str())
            .arg(expected)
            .arg(if spare_grant { "1" } else { "0" });
        let _released: i64 = self.client.eval(&call).await?;
        Ok(())
    }
}

/// Takes `waiter` out of the queue (a no-op when it is not queued) and wakes the new head if
/// that changed who is first.
pub(crate) async fn leave(client: &Client, keys: &Keys, waiter: &str) -> Result<()> {
    let _was_queued: i64 = client.eval(&keys.call(&LEAVE).arg(waiter)).await?;
    Ok(())
}

/// Leaves the queue unless disarmed: armed before the first request that may enqueue the
/// waiter is sent, disarmed when the waiter got the lock (the acquire took it out of the
/// queue). Dropped armed — the wait was cancelled — it leaves in the background, and until
/// then the same owner's next wait on this client waits for it
/// ([`WatchdogRegistry::settled`](keylatch_core::WatchdogRegistry::settled) on the deadline
/// zset), so the late leave cannot remove the new entry.
#[derive(Debug)]
#[must_use]
pub(crate) struct LeaveGuard {
    armed: Option<LeaveJob>,
}

#[derive(Debug)]
struct LeaveJob {
    client: Client,
    keys: Arc<Keys>,
    waiter: String,
}

impl LeaveGuard {
    pub(crate) fn arm(client: &Client, keys: &Arc<Keys>, waiter: &str) -> LeaveGuard {
        LeaveGuard {
            armed: Some(LeaveJob {
                client: client.clone(),
                keys: keys.clone(),
                waiter: waiter.to_owned(),
            }),
        }
    }

    /// The waiter got the lock: it is no longer queued.
    pub(crate) fn disarm(mut self) {
        self.armed = None;
    }

    /// Leaves now and waits; if that fails, leaves in the background (and, if that fails too,
    /// the waiter is no longer refreshed, so it is evicted after its waiter timeout). Stays
    /// armed until the leave is done, so dropping this future also leaves in the background.
    pub(crate) async fn run_now(mut self) {
        let Some(job) = self.armed.as_ref() else {
            return;
        };
        match leave(&job.client, &job.keys, &job.waiter).await {
            Ok(()) => self.armed = None,
            Err(err) => {
                tracing::debug!(target: "keylatch::fair", lock = %job.keys.name, error = %err, "leaving the queue: retrying in the background");
            }
        }
    }
}

impl Drop for LeaveGuard {
    fn drop(&mut self) {
        if let Some(job) = self.armed.take() {
            let pending = job
                .client
                .watchdog()
                .begin_pending(&HoldKey::new(&job.keys.timeouts, &job.waiter));
            let client = job.client.clone();
            client.spawn_background(async move {
                let _pending = pending;
                leave(&job.client, &job.keys, &job.waiter).await
            });
        }
    }
}
