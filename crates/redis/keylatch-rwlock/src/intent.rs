//! A waiting writer's intent: the member `<owner id>` of the zset `{name}:write_intent`, whose
//! score is the deadline (server time, ms) until which new readers defer to it.
//!
//! The intent is recorded by the write acquire script when it is refused, refreshed by the
//! watchdog (a short lease, renewed every third of it) while the writer waits, removed by the
//! acquire script when the writer gets in, and withdrawn by this guard when the wait ends
//! otherwise — at once, or in the background if the wait is dropped. A writer that dies stops
//! refreshing, so its intent expires after the timeout.

use std::sync::Arc;
use std::time::Duration;

use keylatch_core::{HoldHandle, HoldKey, HoldState, Result};
use tokio::time::Instant;

use crate::scripts::{INTENT_RENEW, INTENT_WITHDRAW};
use crate::shared::Shared;

/// Owns one writer's intent while it waits.
#[derive(Debug)]
pub(crate) struct IntentGuard {
    shared: Arc<Shared>,
    field: String,
    timeout: Duration,
    /// An acquire that may have recorded the intent was sent.
    armed: bool,
    /// The watchdog's refresh of the intent.
    refresh: Option<HoldHandle>,
}

impl IntentGuard {
    pub(crate) fn new(shared: Arc<Shared>, field: String, timeout: Duration) -> IntentGuard {
        IntentGuard {
            shared,
            field,
            timeout,
            armed: false,
            refresh: None,
        }
    }

    /// A request that may record the intent is about to be sent.
    pub(crate) fn arm(&mut self) {
        self.armed = true;
    }

    /// The request was refused and recorded the intent (sent at `sent_at`): keep it fresh.
    pub(crate) fn recorded(&mut self, sent_at: Instant) {
        let fresh = self
            .refresh
            .as_ref()
            .is_some_and(|h| !matches!(h.state(), HoldState::Lost));
        if !fresh {
            self.refresh = None;
            self.refresh = Some(self.shared.client.watchdog().register(
                HoldKey::new(&self.shared.intent_key, &self.field),
                self.timeout,
                INTENT_RENEW.renewal(),
                sent_at,
            ));
        }
    }

    /// The writer got in: the acquire script removed the intent.
    pub(crate) fn acquired(&mut self) {
        self.refresh = None;
        self.armed = false;
    }

    /// The wait ended without the lock: remove the intent now (in the background if this
    /// fails or is dropped).
    pub(crate) async fn withdraw(mut self) -> Result<()> {
        self.refresh = None;
        if !self.armed {
            return Ok(());
        }
        self.withdraw_call().await?;
        self.armed = false;
        Ok(())
    }

    async fn withdraw_call(&self) -> Result<()> {
        // Keyed first by the lock's name: commands on one key share a connection, so the
        // withdrawal is sent after the acquire that may have recorded the intent, and the
        // server runs it after that acquire.
        let call = INTENT_WITHDRAW
            .call()
            .key(&*self.shared.name)
            .key(&*self.shared.intent_key)
            .key(&*self.shared.channel)
            .arg(self.field.as_str());
        let _removed: i64 = self.shared.client.eval(&call).await?;
        Ok(())
    }
}

impl Drop for IntentGuard {
    fn drop(&mut self) {
        self.refresh = None;
        if !self.armed {
            return;
        }
        let client = self.shared.client.clone();
        // The next write attempt of this owner waits for the withdrawal (`settled`).
        let pending = client
            .watchdog()
            .begin_pending(&HoldKey::new(&self.shared.intent_key, &self.field));
        let guard = IntentGuard {
            shared: self.shared.clone(),
            field: std::mem::take(&mut self.field),
            timeout: self.timeout,
            armed: false,
            refresh: None,
        };
        client.spawn_background(async move {
            let _pending = pending;
            guard.withdraw_call().await
        });
    }
}
