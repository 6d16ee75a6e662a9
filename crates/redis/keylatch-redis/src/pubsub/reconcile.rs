//! Reconciliation: what the server should be subscribed to, worked out under the lock and
//! sent on the hub's connection (`Sink`), one round trip per change.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::sink::*;
use super::state::*;
use deadpool_redis::redis;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// What the server should be told, computed under the lock: channels to subscribe, channels
/// idle for the linger to unsubscribe, and when the next idle one is due.
#[allow(clippy::type_complexity)]
pub(super) fn plan(
    state: &mut HubState,
    linger: Duration,
) -> (Vec<(String, bool)>, Vec<(String, bool)>, Option<Instant>) {
    state
        .channels
        .retain(|_, c| c.refs > 0 || c.subscribed && !c.denied);
    let now = Instant::now();
    let mut next_due: Option<Instant> = None;
    let mut unsubscribe = Vec::new();
    for (name, c) in &mut state.channels {
        if c.refs > 0 || !c.subscribed || c.unsubscribing {
            continue;
        }
        let due = c.idle_since.unwrap_or(now) + linger;
        if due <= now {
            c.unsubscribing = true;
            unsubscribe.push((name.clone(), c.pattern));
        } else {
            next_due = Some(next_due.map_or(due, |d| d.min(due)));
        }
    }
    let subscribe = state
        .channels
        .iter()
        .filter(|(_, c)| c.refs > 0 && !c.subscribed && !c.denied)
        .map(|(name, c)| (name.clone(), c.pattern))
        .collect();
    (subscribe, unsubscribe, next_due)
}

/// Brings the server's subscriptions in line with the local reference counts, repeating until
/// nothing is left to do (references may change while a request is in flight). Returns
/// whether it succeeded, and when a lingering channel is next due to be unsubscribed.
pub(super) async fn reconcile(shared: &HubShared) -> (bool, Option<Instant>) {
    for _ in 0..8 {
        let (generation, mut sink, subscribe, unsubscribe, due) = {
            let mut state = shared.state.lock().expect("hub lock");
            let Some(sink) = state.sink.clone() else {
                return (false, None);
            };
            let (subscribe, unsubscribe, due) = plan(&mut state, shared.linger);
            (state.generation, sink, subscribe, unsubscribe, due)
        };
        if subscribe.is_empty() && unsubscribe.is_empty() {
            return (true, due);
        }
        if !unsubscribe.is_empty() {
            let (channels, patterns): (Vec<_>, Vec<_>) = unsubscribe
                .iter()
                .cloned()
                .partition(|(_, pattern)| !pattern);
            let mut unsubscribed = true;
            if !channels.is_empty() {
                unsubscribed = sink.unsubscribe(&channels).await.is_ok();
            }
            if unsubscribed && !patterns.is_empty() {
                match sink.unsubscribe(&patterns).await {
                    Ok(()) => {}
                    // Refused (an ACL user without `+punsubscribe`): the pattern stays on the
                    // server until the connection closes, so use no more of them.
                    Err(err) if is_refusal(&err) => {
                        tracing::debug!(target: "keylatch::pubsub", error = %err, "pub/sub: PUNSUBSCRIBE refused; exact channels from now on");
                        shared.patterns_denied.store(true, Ordering::Relaxed);
                    }
                    Err(_) => unsubscribed = false,
                }
            }
            let mut state = shared.state.lock().expect("hub lock");
            if state.generation == generation {
                // On failure the server's state is unknown: counted as unsubscribed, so a
                // channel still in use is subscribed again (which is harmless if it still was).
                for (name, _) in &unsubscribe {
                    if let Some(channel) = state.channels.get_mut(name) {
                        channel.subscribed = false;
                        channel.unsubscribing = false;
                    }
                }
            }
            if !unsubscribed {
                return (false, None);
            }
        }
        let (channels, patterns): (Vec<_>, Vec<_>) =
            subscribe.into_iter().partition(|(_, pattern)| !pattern);
        if !channels.is_empty() {
            let (subscribed, denied) = match sink.subscribe(&channels).await {
                Ok(()) => (channels, Vec::new()),
                Err(err) if is_noperm(&err) => {
                    // The ACL user may not use some channel: find which, one at a time.
                    let mut subscribed = Vec::new();
                    let mut denied = Vec::new();
                    for name in channels {
                        match sink.subscribe(std::slice::from_ref(&name)).await {
                            Ok(()) => subscribed.push(name),
                            Err(err) if is_noperm(&err) => denied.push(name),
                            Err(_) => return (false, None),
                        }
                    }
                    (subscribed, denied)
                }
                Err(_) => return (false, None),
            };
            let mut state = shared.state.lock().expect("hub lock");
            if state.generation == generation {
                for (name, _) in &subscribed {
                    // Kept even if its references dropped meanwhile: the next round
                    // unsubscribes it.
                    if let Some(channel) = state.channels.get_mut(name) {
                        channel.subscribed = true;
                    }
                }
            }
            for (name, _) in &denied {
                tracing::warn!(target: "keylatch::pubsub", channel = %name, "pub/sub: the ACL user may not subscribe");
                if let Some(channel) = state.channels.get_mut(name) {
                    channel.denied = true;
                }
            }
        }
        if !patterns.is_empty() {
            let refused = match sink.subscribe(&patterns).await {
                Ok(()) => false,
                // Any refusal (`NOPERM`: an ACL user's channel rules match a pattern only
                // literally; a renamed or missing command): exact channels for good.
                Err(err) if is_refusal(&err) => {
                    tracing::debug!(target: "keylatch::pubsub", error = %err, "pub/sub: patterns refused; exact channels from now on");
                    true
                }
                Err(_) => return (false, None),
            };
            let mut state = shared.state.lock().expect("hub lock");
            if refused {
                shared.patterns_denied.store(true, Ordering::Relaxed);
                for (name, _) in &patterns {
                    if let Some(entry) = state.channels.get_mut(name) {
                        entry.denied = true;
                    }
                }
                // Waiters already on a pattern switch to their own channel when they wake.
                for entry in state.covered.values() {
                    entry.inbox.notify.notify_waiters();
                }
            } else if state.generation == generation {
                for (name, _) in &patterns {
                    if let Some(entry) = state.channels.get_mut(name) {
                        entry.subscribed = true;
                    }
                }
            }
        }
    }
    // Still busy after eight rounds: come back at once.
    (true, Some(Instant::now()))
}

/// Serves subscribe and unsubscribe requests, in order, batching whatever is queued.
pub(super) async fn reconcile_loop(
    shared: std::sync::Weak<HubShared>,
    mut commands: mpsc::UnboundedReceiver<HubCommand>,
) {
    // When a lingering channel is due to be unsubscribed, if any.
    let mut due: Option<Instant> = None;
    loop {
        let first = match due {
            Some(at) => match tokio::time::timeout_at(at, commands.recv()).await {
                Ok(Some(command)) => Some(command),
                Ok(None) => return,
                Err(_) => None,
            },
            None => match commands.recv().await {
                Some(command) => Some(command),
                None => return,
            },
        };
        let mut acks: Vec<oneshot::Sender<bool>> = first.and_then(|c| c.0).into_iter().collect();
        while let Ok(HubCommand(ack)) = commands.try_recv() {
            acks.extend(ack);
        }
        let Some(hub) = shared.upgrade() else { return };
        let (ok, next) = reconcile(&hub).await;
        due = next;
        for ack in acks {
            let _ = ack.send(ok);
        }
    }
}

/// An error reply from the server (as opposed to a lost connection or a timeout).
pub(super) fn is_refusal(err: &redis::RedisError) -> bool {
    !(err.is_io_error() || err.is_connection_dropped() || err.is_timeout())
}

pub(super) fn is_noperm(err: &redis::RedisError) -> bool {
    matches!(
        crate::error::from_redis(err.clone()),
        keylatch_core::Error::NoPermission { .. }
    )
}

/// A new connection (or none): nothing is subscribed on it yet.
pub(super) fn switch_connection(shared: &HubShared, sink: Option<Sink>) {
    let mut state = shared.state.lock().expect("hub lock");
    state.generation += 1;
    state.sink = sink;
    for channel in state.channels.values_mut() {
        channel.subscribed = false;
        channel.unsubscribing = false;
    }
    state.channels.retain(|_, c| c.refs > 0);
}
