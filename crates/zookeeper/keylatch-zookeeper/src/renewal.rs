//! Bounded holds: a lock node lives as long as its session, but a process cannot see that its
//! session expired while it was stopped (a `SIGSTOP`, a long pause of the whole process, a
//! frozen VM): when it runs again its guards would still say "held" until the session watcher
//! gets to run, and the ensemble may have handed the lock on meanwhile. So, under the default
//! [`DisconnectLoss::OnDisconnect`](crate::DisconnectLoss), each hold is registered with a
//! local deadline, [`hold_lease`] after the last request the server answered, and this task
//! confirms the session with one cheap request (`exists` on the root) every third of that,
//! for all of the client's holds at once. The server cannot expire the session before a
//! session timeout after it received that request, so a hold is never valid past the moment
//! the lock could pass on; a guard read after a pause longer than that says "lost" at once
//! (`is_lost`, `valid_until`), before the task or the watcher has run.
//!
//! May import: keylatch-core, `session`.

use std::sync::Weak;
use std::time::Duration;

use keylatch_core::hold::{RenewWith, RenewalOutcome, WeakRegistry};
use keylatch_core::{Renewal, WatchdogRegistry};
use tokio::time::Instant;

use crate::session::Shared;

/// What the registry renews this store's holds with: a confirmation of the session.
static SESSION_CONTACT: SessionContact = SessionContact;

#[derive(Debug)]
struct SessionContact;

/// The renewal of a bounded hold.
pub(crate) fn renewal() -> Renewal {
    Renewal::Watchdog(RenewWith::new(&SESSION_CONTACT))
}

/// How long a hold stays valid after the last request the server answered: two thirds of the
/// session timeout, so that a third of it is left for the ensemble's own session tracking
/// (a follower reports a session's activity to the leader once a tick) and for clock rates.
pub(crate) fn hold_lease(session_timeout: Duration) -> Duration {
    (session_timeout * 2 / 3).max(Duration::from_millis(30))
}

/// Starts the renewal task of a client's holds; it ends with the client.
pub(crate) fn start(shared: Weak<Shared>, registry: &WatchdogRegistry) {
    tokio::spawn(run(shared, registry.downgrade()));
}

async fn run(shared: Weak<Shared>, registry: WeakRegistry) {
    loop {
        let Some(live) = registry.upgrade() else {
            return;
        };
        let next = live.next_tick();
        let rescheduled = live.rescheduled();
        drop(live);
        match next {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    () = rescheduled => continue,
                }
            }
            None => {
                rescheduled.await;
                continue;
            }
        }
        let (Some(live), Some(shared)) = (registry.upgrade(), shared.upgrade()) else {
            return;
        };
        let groups = live.due_renewals(Instant::now(), usize::MAX, |_| None);
        if groups.is_empty() {
            continue;
        }
        let sent_at = Instant::now();
        let confirmed = match shared.client() {
            Ok(client) => client.check_stat("/").await.is_ok(),
            Err(_) => false,
        };
        drop(shared);
        for group in &groups {
            if confirmed {
                let outcomes = vec![RenewalOutcome::Renewed; group.holds.len()];
                live.renewed(group, Some(&outcomes), sent_at);
            } else {
                // Tried again soon; the hold's deadline runs on.
                live.renewed(group, None, sent_at);
            }
        }
    }
}
