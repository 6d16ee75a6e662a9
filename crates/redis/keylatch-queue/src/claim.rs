//! The undo of a take whose reply may be lost: armed before the take is sent, disarmed when
//! its reply is seen; dropped armed (a lost reply, a dropped future), it puts the element back
//! in the background, retried until applied while the client lives (the undo is idempotent: it
//! leaves a tombstone). Imports `scripts` of this crate.

use std::time::Duration;

use keylatch_core::{Backoff, Result};
use keylatch_redis::{Client, ScriptCall};

use crate::scripts::UNDO_POLL;

#[derive(Debug)]
#[must_use]
pub(crate) struct ClaimUndo {
    client: Client,
    call: Option<ScriptCall>,
}

impl ClaimUndo {
    pub(crate) fn arm(client: &Client, destination: &str, claim: &str, ttl_ms: u64) -> ClaimUndo {
        ClaimUndo {
            client: client.clone(),
            call: Some(UNDO_POLL.call().key(destination).key(claim).arg(ttl_ms)),
        }
    }

    /// The reply was seen: the element is the caller's.
    pub(crate) fn disarm(mut self) {
        self.call = None;
    }
}

impl Drop for ClaimUndo {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            let client = self.client.clone();
            self.client
                .spawn_background(async move { put_back(&client, &call).await });
        }
    }
}

/// Sends the undo until the server answers, for as long as the client lives.
async fn put_back(client: &Client, call: &ScriptCall) -> Result<()> {
    let pause = (client.settle_window() / 4).min(Duration::from_secs(1));
    let mut backoff = Backoff::new(Duration::from_millis(10), pause);
    loop {
        match client.eval_value(call).await {
            Ok(_) => return Ok(()),
            Err(err) if err.is_transient() => {
                tracing::debug!(target: "keylatch::queue", error = %err, "putting back a taken element: retrying");
                backoff.wait().await;
            }
            Err(err) => return Err(err),
        }
    }
}
