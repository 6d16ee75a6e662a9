//! The command path's part in telling why a hold was lost: the run id read when a connection
//! opens, and the restarts and failovers seen since a hold was confirmed (see `changes.rs`).
//!
//! May import: the parent `commands` module, `changes`, `keylatch-core`.

use deadpool_redis::redis;

use super::Commands;

/// Restarts and failovers.
impl Commands {
    /// Reads the run id of the server at `address` from the `INFO server` reply got on a
    /// connection just opened (once per connection, never per command; see `fence.rs`):
    /// another one than last time there is a restart, recorded for the watchdog's loss
    /// reasons. A server that refuses `INFO` is not checked. Returns the error when the
    /// connection broke meanwhile (the caller opens another one).
    pub(super) fn note_run_id(
        &self,
        address: &str,
        info: redis::RedisResult<String>,
    ) -> redis::RedisResult<()> {
        let changes = self.topology.changes();
        match info {
            Ok(info) => match crate::connection::changes::run_id(&info) {
                Some(run_id) => changes.server_seen(address, run_id),
                None => changes.settled(),
            },
            Err(err) if err.is_io_error() || err.is_connection_dropped() => {
                return Err(err);
            }
            Err(err) => {
                tracing::debug!(target: "keylatch::connection", error = %err, "INFO server refused: restarts are not told apart");
                changes.settled();
            }
        }
        Ok(())
    }

    /// Why a hold on `key`, confirmed valid at `confirmed` and now found gone, was lost: a
    /// restart or a failover concerning it seen since then, if any.
    pub(crate) fn loss_reason_since(
        &self,
        key: &str,
        confirmed: tokio::time::Instant,
    ) -> Option<keylatch_core::LossReason> {
        self.topology
            .changes()
            .reason_since(confirmed, self.slot_of(key))
    }
}
