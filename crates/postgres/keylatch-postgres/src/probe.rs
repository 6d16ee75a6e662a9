//! The probe: the renewal task of the core's registry, for holds that need no renewal but
//! whose session must be seen alive. Every probe interval, each hold's connection runs
//! `SELECT 1`: an answer confirms the hold for three intervals (`holds::PROBES_PER_VALIDITY`); a closed
//! connection or an error (the server ended the session: `pg_terminate_backend`, a restart)
//! makes the hold lost at once ([`LossReason::SessionExpired`]) and its connection is
//! discarded; no answer within an interval leaves the hold to end at its local deadline.
//!
//! May import: keylatch-core, tokio-postgres, `session`.

use std::sync::{Arc, Weak};
use std::time::Duration;

use keylatch_core::LossReason;
use keylatch_core::hold::{RenewalGroup, RenewalOutcome};
use tokio::time::Instant;

use crate::session::{HoldId, Shared};

/// The probe, as the registry's way of renewing a PostgreSQL hold.
#[derive(Debug)]
pub(crate) struct Probe;

/// The one probe every hold is registered with.
pub(crate) static PROBE: Probe = Probe;

/// Starts the probe task of a client; it ends when the client is dropped or shut down.
pub(crate) fn spawn(weak: Weak<Shared>, interval: Duration) {
    tokio::spawn(async move {
        loop {
            let (registry, wake) = {
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                if shared.background.is_closed() {
                    return;
                }
                let registry = shared.background.registry().clone();
                let now = Instant::now();
                let wake = registry
                    .next_tick()
                    .map_or(now + interval, |tick| tick.min(now + interval));
                (registry, wake)
            };
            tokio::time::sleep_until(wake).await;
            let Some(shared) = weak.upgrade() else {
                return;
            };
            let groups = registry.due_renewals(Instant::now(), 1, |_| None);
            let probes = groups.into_iter().map(|group| {
                let (shared, registry) = (shared.clone(), registry.clone());
                async move {
                    let sent_at = Instant::now();
                    let outcome = probe(&shared, &group).await;
                    registry.renewed(&group, outcome.as_ref().map(std::slice::from_ref), sent_at);
                }
            });
            futures_util::future::join_all(probes).await;
        }
    });
}

/// Probes the one hold of `group`: `None` when its session did not answer in time.
async fn probe(shared: &Arc<Shared>, group: &RenewalGroup) -> Option<RenewalOutcome> {
    let key = group.holds.first()?;
    let id: HoldId = (Arc::from(key.key()), key.field().to_owned());
    let Some(hold) = shared.hold(&id) else {
        // Being released: the release deregisters it.
        return Some(RenewalOutcome::Renewed);
    };
    let timeout = shared.probe_timeout;
    let mut slot = tokio::time::timeout(timeout, hold.conn.lock()).await.ok()?;
    let Some(conn) = slot.as_ref() else {
        return Some(RenewalOutcome::Renewed);
    };
    let alive = !conn.is_closed()
        && match tokio::time::timeout(timeout, conn.client().simple_query("SELECT 1")).await {
            Err(_) => return None,
            Ok(answer) => answer.is_ok(),
        };
    if alive {
        return Some(RenewalOutcome::Renewed);
    }
    tracing::debug!(target: "keylatch::postgres", lock = %id.0, "the holding session ended: the hold is lost");
    // Discarded (armed): the session is gone, and with it the lock.
    drop(slot.take());
    shared.forget(&id);
    Some(RenewalOutcome::Lost(LossReason::SessionExpired))
}
