//! What changed behind the connections, and when: a server that restarted (another `run_id`
//! at an address seen before) or a primary that moved (Sentinel: the primary's address;
//! Cluster: a slot's primary, in a newer slot map). The watchdog asks it
//! why a hold it found gone was lost ([`ServerChanges::reason_since`]).
//!
//! Everything here is learnt from what the command path reads anyway, plus one `INFO server`
//! per connection opened: nothing is sent per command.
//!
//! May import: `slots`, `keylatch-core`.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use keylatch_core::LossReason;
use tokio::time::Instant;

use crate::connection::slots::SlotMap;

/// How many changes are kept (the oldest are forgotten: holds confirmed since then do not
/// need them).
const KEPT: usize = 64;

/// The changes seen so far: one per client (kept by its topology).
#[derive(Debug, Default)]
pub(crate) struct ServerChanges {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The run id last read at each address.
    run_ids: HashMap<String, String>,
    /// The primary's address last found through the sentinels.
    primary: Option<String>,
    /// The last slot map read on a cluster.
    slot_map: Option<std::sync::Arc<SlotMap>>,
    /// Since when the server has been in doubt (a connection broke or timed out, the primary
    /// may have moved, the slot map went stale), until the next check: a change then found is
    /// dated from this instant, so a request sent meanwhile (which may have reached the new
    /// server) does not count as confirmed before it.
    doubted_since: Option<Instant>,
    changes: VecDeque<Change>,
}

#[derive(Debug)]
struct Change {
    at: Instant,
    reason: LossReason,
    /// The slots it concerns on a cluster, as `(first, last)` ranges; `None`: every key.
    slots: Option<Vec<(u16, u16)>>,
}

impl ServerChanges {
    /// The server may have changed (a connection broke or timed out, the primary may have
    /// moved, the slot map is stale): what the next check finds is dated from the first such
    /// doubt.
    pub(crate) fn doubt(&self) {
        let mut inner = self.inner.lock().expect("changes lock");
        inner.doubted_since.get_or_insert_with(Instant::now);
    }

    /// A connection was opened, but the server's run id could not be read (`INFO` refused):
    /// the doubt ends unresolved (a restart is not told apart).
    pub(crate) fn settled(&self) {
        self.inner.lock().expect("changes lock").doubted_since = None;
    }

    /// A connection to `address` was opened, and the server there answered `run_id`: a
    /// different one than last time is a restart.
    pub(crate) fn server_seen(&self, address: &str, run_id: &str) {
        let mut inner = self.inner.lock().expect("changes lock");
        let previous = inner.run_ids.insert(address.to_owned(), run_id.to_owned());
        if previous.is_some_and(|previous| previous != run_id) {
            tracing::info!(target: "keylatch::connection", address, "the server restarted (a new run id)");
            inner.record(LossReason::ServerRestarted, None);
        } else {
            inner.doubted_since = None;
        }
    }

    /// The sentinels named `address` as the primary: another one than last time is a
    /// failover.
    pub(crate) fn primary_seen(&self, address: &str) {
        let mut inner = self.inner.lock().expect("changes lock");
        let previous = inner.primary.replace(address.to_owned());
        if previous.is_some_and(|previous| previous != address) {
            tracing::info!(target: "keylatch::connection", address, "the primary moved to another server");
            inner.record(LossReason::PrimaryChanged, None);
        }
    }

    /// A slot map was read: the slots it gives another primary than the last map did moved.
    pub(crate) fn slot_map_seen(&self, map: &std::sync::Arc<SlotMap>) {
        let mut inner = self.inner.lock().expect("changes lock");
        let moved = inner
            .slot_map
            .as_ref()
            .map(|old| map.moved_since(old))
            .unwrap_or_default();
        inner.slot_map = Some(map.clone());
        if !moved.is_empty() {
            tracing::info!(target: "keylatch::connection", ranges = moved.len(), "slots moved to other primaries");
            inner.record(LossReason::PrimaryChanged, Some(moved));
        } else {
            inner.doubted_since = None;
        }
    }

    /// Why a hold on `slot` (`None` off a cluster) that was confirmed valid at `confirmed` and
    /// is now gone was lost: the latest restart or failover concerning it dated after
    /// `confirmed`, if any.
    pub(crate) fn reason_since(&self, confirmed: Instant, slot: Option<u16>) -> Option<LossReason> {
        let inner = self.inner.lock().expect("changes lock");
        inner
            .changes
            .iter()
            .rev()
            .filter(|change| change.at > confirmed)
            .find(|change| match (&change.slots, slot) {
                (Some(ranges), Some(slot)) => ranges
                    .iter()
                    .any(|&(first, last)| first <= slot && slot <= last),
                _ => true,
            })
            .map(|change| change.reason)
    }
}

impl Inner {
    fn record(&mut self, reason: LossReason, slots: Option<Vec<(u16, u16)>>) {
        if self.changes.len() == KEPT {
            self.changes.pop_front();
        }
        let at = self.doubted_since.take().unwrap_or_else(Instant::now);
        self.changes.push_back(Change { at, reason, slots });
    }
}

/// The `run_id` field of an `INFO server` reply.
pub(crate) fn run_id(info: &str) -> Option<&str> {
    info.lines()
        .find_map(|line| line.strip_prefix("run_id:"))
        .map(str::trim)
        .filter(|id| !id.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_run_id_at_a_known_address_is_a_restart() {
        let changes = ServerChanges::default();
        let before = Instant::now();
        changes.server_seen("a:1", "r1");
        changes.server_seen("b:2", "r2");
        assert_eq!(changes.reason_since(before, None), None, "first sight");
        changes.server_seen("a:1", "r1");
        assert_eq!(changes.reason_since(before, None), None, "same server");
        changes.server_seen("a:1", "r3");
        assert_eq!(
            changes.reason_since(before, None),
            Some(LossReason::ServerRestarted)
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(
            changes.reason_since(Instant::now(), None),
            None,
            "confirmed since"
        );
        assert_eq!(
            run_id("# Server\r\nrun_id:abc\r\ntcp_port:1\r\n"),
            Some("abc")
        );
    }

    #[test]
    fn a_moved_slot_concerns_only_its_keys() {
        use crate::connection::slots::Node;
        let changes = ServerChanges::default();
        let before = Instant::now();
        let node = |port| Node {
            host: "h".to_owned(),
            port,
        };
        let map = |second| {
            std::sync::Arc::new(SlotMap::from_ranges(vec![
                (0, 99, node(1)),
                (100, 16383, node(second)),
            ]))
        };
        changes.slot_map_seen(&map(2));
        changes.slot_map_seen(&map(2));
        assert_eq!(changes.reason_since(before, Some(7)), None, "the same map");
        changes.slot_map_seen(&map(3));
        assert_eq!(
            changes.reason_since(before, Some(100)),
            Some(LossReason::PrimaryChanged)
        );
        assert_eq!(changes.reason_since(before, Some(7)), None, "another shard");
    }
}
