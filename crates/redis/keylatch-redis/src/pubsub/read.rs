//! The read loops: own the pub/sub connection (one server, or every node of a cluster),
//! deliver messages, and reconnect with back-off.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::reconcile::*;
use super::sink::*;
use super::state::*;
use deadpool_redis::redis;
use futures_util::StreamExt;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

/// Owns the connection: connects, hands the sink to the reconciler, delivers messages, and on
/// loss reconnects with back-off and wakes every waiter. Message delivery never waits for a
/// subscribe or unsubscribe round trip.
pub(super) async fn read_loop(
    shared: std::sync::Weak<HubShared>,
    topology: Arc<crate::connection::topology::Topology>,
    reconnected: Arc<Notify>,
) {
    let connect_timeout = topology.connect_timeout();
    let mut moves = topology.watch_moves();
    let reconnecting =
        keylatch_core::Backoff::new(Duration::from_millis(20), Duration::from_millis(200));
    let mut backoff = reconnecting;
    let mut first = true;
    loop {
        moves.borrow_and_update();
        let connection = topology.pubsub().await;
        let Some(hub) = shared.upgrade() else { return };
        let Ok(pubsub) = connection else {
            drop(hub);
            backoff.wait().await;
            continue;
        };
        let (sink, mut stream) = pubsub.split();
        switch_connection(&hub, Some(Sink::Classic(sink)));
        // Resubscribe every channel in use before telling waiters to re-check.
        // Bounded: a connection that fails meanwhile is replaced by the next round.
        let _ = tokio::time::timeout(connect_timeout, hub.reconcile_once()).await;
        backoff = reconnecting;
        hub.mark_up();
        if !first {
            hub.reconnects.fetch_add(1, Ordering::Relaxed);
            let channels = hub.state.lock().expect("hub lock").channels.len();
            tracing::info!(target: "keylatch::pubsub", channels, "pub/sub reconnected; channels resubscribed");
            wake_everyone(&hub);
            // The server may have restarted or been replaced: the watchdog checks every hold
            // now rather than at its next renewal.
            reconnected.notify_one();
        }
        first = false;
        drop(hub);
        loop {
            tokio::select! {
                msg = stream.next() => {
                    let Some(msg) = msg else { break };
                    let Some(hub) = shared.upgrade() else { return };
                    dispatch(&hub, msg.get_channel_name(), msg.get_payload_bytes());
                }
                // The primary moved: subscribe on the new one.
                _ = moves.changed() => break,
            }
        }
        let Some(hub) = shared.upgrade() else { return };
        hub.connected.store(false, Ordering::Relaxed);
        switch_connection(&hub, None);
        // Wake everyone: messages may have been lost while the connection was down.
        wake_everyone(&hub);
    }
}

/// The hub's loop on a Redis Cluster: one RESP3 cluster connection whose pushes (messages, and
/// the server's own unsubscriptions) arrive on a channel. redis-rs moves subscriptions to a
/// slot's new owner when it refreshes its slot map and resubscribes a node it reconnects to;
/// this loop resubscribes a channel the server dropped by itself (`SUNSUBSCRIBE` after its
/// slot migrated) and wakes that channel's waiters, and wakes everyone when a node's
/// connection dropped (messages may have been lost).
pub(super) async fn cluster_read_loop(
    shared: std::sync::Weak<HubShared>,
    topology: Arc<crate::connection::topology::Topology>,
    reconnected: Arc<Notify>,
    sharded: bool,
) {
    let connect_timeout = topology.connect_timeout();
    let reconnecting =
        keylatch_core::Backoff::new(Duration::from_millis(20), Duration::from_millis(200));
    let mut backoff = reconnecting;
    let mut first = true;
    loop {
        let (tx, mut pushes) = mpsc::unbounded_channel();
        let connection = topology.cluster_subscriber(tx).await;
        let Some(hub) = shared.upgrade() else { return };
        let conn = match connection {
            Ok(conn) => conn,
            Err(err) => {
                tracing::debug!(target: "keylatch::pubsub", error = %err, "pub/sub: cannot connect to the cluster");
                drop(hub);
                backoff.wait().await;
                continue;
            }
        };
        // The slot map this connection starts from: after a node's connection drops, the
        // loop watches for a new map (a replica promoted) to subscribe afresh.
        let mut probe = conn.clone();
        let map = crate::connection::cluster::slot_map(&mut probe).await.ok();
        switch_connection(&hub, Some(Sink::Cluster { conn, sharded }));
        // Bounded: a connection that fails meanwhile is replaced by the next round.
        let _ = tokio::time::timeout(connect_timeout, hub.reconcile_once()).await;
        backoff = reconnecting;
        hub.mark_up();
        if !first {
            hub.reconnects.fetch_add(1, Ordering::Relaxed);
            wake_everyone(&hub);
            reconnected.notify_one();
        }
        first = false;
        drop(hub);
        // Set when a node's connection dropped: until when to watch the slot map.
        let mut watching: Option<Instant> = None;
        loop {
            let check = tokio::time::sleep(WATCH_EVERY);
            tokio::select! {
                push = pushes.recv() => {
                    let Some(push) = push else { break };
                    let Some(hub) = shared.upgrade() else { return };
                    if on_push(&hub, push, &reconnected) {
                        watching = Some(Instant::now() + WATCH_FOR);
                    }
                }
                () = check, if watching.is_some() => {
                    if watching.is_some_and(|until| Instant::now() >= until) {
                        watching = None;
                        continue;
                    }
                    // A primary that died is replaced by its replica: redis-rs's subscriber
                    // connection does not learn of it until it sends a command there, so a
                    // new slot map means subscribing afresh on a new connection.
                    let now = crate::connection::cluster::slot_map(&mut probe).await.ok();
                    let changed = match (&map, &now) {
                        (Some(before), Some(now)) => !before.same_as(now),
                        (None, Some(_)) => true,
                        _ => false,
                    };
                    if changed {
                        tracing::info!(target: "keylatch::pubsub", "pub/sub: the cluster's slot map changed; subscribing afresh");
                        break;
                    }
                }
            }
        }
        // The cluster connection is gone, or the cluster changed: connect anew.
        let Some(hub) = shared.upgrade() else { return };
        hub.connected.store(false, Ordering::Relaxed);
        switch_connection(&hub, None);
        wake_everyone(&hub);
    }
}

/// How often the cluster hub reads the slot map after a node's connection dropped, and for
/// how long.
pub(super) const WATCH_EVERY: Duration = Duration::from_millis(250);
pub(super) const WATCH_FOR: Duration = Duration::from_secs(60);

/// One push from a cluster node; `true` when a node's connection dropped.
pub(super) fn on_push(hub: &HubShared, push: redis::PushInfo, reconnected: &Notify) -> bool {
    use redis::PushKind;
    let text = |value: Option<&redis::Value>| match value {
        Some(redis::Value::BulkString(bytes)) => std::str::from_utf8(bytes).ok().map(str::to_owned),
        Some(redis::Value::SimpleString(text)) => Some(text.clone()),
        _ => None,
    };
    match push.kind {
        PushKind::Message | PushKind::SMessage => {
            let payload = match push.data.get(1) {
                Some(redis::Value::BulkString(bytes)) => bytes.as_slice(),
                _ => &[],
            };
            if let Some(channel) = text(push.data.first()) {
                dispatch(hub, &channel, payload);
            }
            false
        }
        PushKind::SUnsubscribe | PushKind::Unsubscribe => {
            let Some(name) = text(push.data.first()) else {
                return false;
            };
            let mut state = hub.state.lock().expect("hub lock");
            let Some(channel) = state.channels.get_mut(&name) else {
                return false;
            };
            if channel.unsubscribing || !channel.subscribed || channel.refs == 0 {
                // The confirmation of the hub's own unsubscription.
                return false;
            }
            // The server dropped the subscription by itself: the channel's slot moved to
            // another node. Subscribe again (on the new owner) and let its waiters re-check.
            channel.subscribed = false;
            channel.inbox.notify.notify_waiters();
            drop(state);
            hub.reconnects.fetch_add(1, Ordering::Relaxed);
            tracing::info!(target: "keylatch::pubsub", channel = %name, "pub/sub: the server dropped a subscription (its slot moved); subscribing again");
            let _ = hub.commands.send(HubCommand(None));
            false
        }
        PushKind::Disconnection => {
            // A node's connection dropped: redis-rs reconnects it and resubscribes if it comes
            // back; if a replica replaces it, the read loop sees the new slot map.
            hub.reconnects.fetch_add(1, Ordering::Relaxed);
            wake_everyone(hub);
            reconnected.notify_one();
            true
        }
        _ => false,
    }
}
