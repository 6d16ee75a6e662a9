//! The hub's public face: [`PubSubHub`] and the [`Subscription`] a waiter holds.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::read::*;
use super::reconcile::*;
use super::state::*;
use deadpool_redis::redis;
use tokio::sync::{Notify, mpsc};

/// One dedicated pub/sub connection per client, never a pooled one.
///
/// Subscriptions are reference-counted: the first local waiter on a channel subscribes, and any
/// number of waiters share one server subscription. When the last one leaves, the channel stays
/// subscribed for [`Config::subscription_linger`], so a waiter that comes back soon finds it
/// ready; then the hub unsubscribes. Messages
/// are hints: waiters always bound their waits (see [`Config::fallback_poll`]) and re-check.
/// When the connection drops, the hub reconnects with back-off, resubscribes every channel in
/// use and wakes every waiter so each re-checks at once.
///
/// [`Config::fallback_poll`]: crate::Config::fallback_poll
/// [`Config::subscription_linger`]: crate::Config::subscription_linger
#[derive(Clone, Debug)]
pub struct PubSubHub {
    pub(super) shared: Arc<HubShared>,
}

impl PubSubHub {
    pub(crate) fn start(
        topology: Arc<crate::connection::topology::Topology>,
        linger: Duration,
        reconnected: Arc<Notify>,
        sharded: bool,
        max_patterns: usize,
    ) -> (PubSubHub, Vec<tokio::task::JoinHandle<()>>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(HubShared {
            state: Mutex::new(HubState::default()),
            commands: tx,
            connected: AtomicBool::new(false),
            up: Notify::new(),
            reconnects: AtomicU64::new(0),
            messages: AtomicU64::new(0),
            letters: AtomicU64::new(0),
            linger,
            cluster: topology.is_cluster(),
            patterns_denied: AtomicBool::new(false),
            max_patterns,
        });
        let reader = if topology.is_cluster() {
            tokio::spawn(cluster_read_loop(
                Arc::downgrade(&shared),
                topology,
                reconnected,
                sharded,
            ))
        } else {
            tokio::spawn(read_loop(Arc::downgrade(&shared), topology, reconnected))
        };
        let reconciler = tokio::spawn(reconcile_loop(Arc::downgrade(&shared), rx));
        (PubSubHub { shared }, vec![reader, reconciler])
    }

    /// Subscribes to `channel` (or joins the existing subscription) and returns once the
    /// server has confirmed it, or after `bound` if the hub is reconnecting (the waiter then
    /// relies on its bounded waits until the hub resubscribes).
    ///
    /// # Errors
    /// [`Error::NoPermission`](keylatch_core::Error::NoPermission) when the server refused the
    /// subscription (the ACL user may not use the channel).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call releases its reference and the hub unsubscribes when no one
    /// is left.
    pub async fn subscribe(
        &self,
        channel: &str,
        wake: WakeMode,
        bound: Duration,
    ) -> keylatch_core::Result<Subscription> {
        let (inbox, subscribed) = {
            let mut state = self.shared.state.lock().expect("hub lock");
            let state = state
                .channels
                .entry(channel.to_owned())
                .or_insert_with(ChannelState::new);
            state.join(wake);
            (state.inbox.clone(), state.ready())
        };
        let subscription = Subscription {
            hub: self.shared.clone(),
            channel: channel.to_owned(),
            inbox,
            wake,
            pattern: None,
        };
        if !subscribed {
            self.shared.settle(bound).await;
        }
        if self.shared.denied(channel) {
            return Err(keylatch_core::Error::NoPermission {
                what: format!("the channel {channel:?}"),
                source: keylatch_core::StoreError::new(redis::RedisError::from((
                    redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm),
                    "SUBSCRIBE refused",
                ))),
            });
        }
        Ok(subscription)
    }

    /// Joins the subscription to `channel` only if the server delivers its messages already
    /// (another local waiter has it, or it lingers after an earlier wait), without any round
    /// trip; `None` otherwise. A waiter that joins before its first attempt cannot miss a
    /// message published after that attempt, so a refusal can go straight to sleep.
    pub fn join_if_subscribed(&self, channel: &str, wake: WakeMode) -> Option<Subscription> {
        let mut state = self.shared.state.lock().expect("hub lock");
        let entry = state.channels.get_mut(channel).filter(|c| c.ready())?;
        entry.join(wake);
        Some(Subscription {
            hub: self.shared.clone(),
            channel: channel.to_owned(),
            inbox: entry.inbox.clone(),
            wake,
            pattern: None,
        })
    }

    /// Joins the entry of `pattern` (which must exist) and the local one of `channel`.
    pub(super) fn join_covered(
        &self,
        state: &mut HubState,
        pattern: &str,
        channel: &str,
        wake: WakeMode,
    ) -> Subscription {
        if let Some(entry) = state.channels.get_mut(pattern) {
            entry.join(WakeMode::One);
        }
        let local = state
            .covered
            .entry(channel.to_owned())
            .or_insert_with(ChannelState::new);
        local.join(wake);
        Subscription {
            hub: self.shared.clone(),
            channel: channel.to_owned(),
            inbox: local.inbox.clone(),
            wake,
            pattern: Some(pattern.to_owned()),
        }
    }

    /// [`subscribe`](Self::subscribe) for a channel that `pattern` also matches: through the
    /// pattern where one can be used ([`supports_patterns`](Self::supports_patterns), and
    /// within the client's budget, `Config::pubsub_patterns`), otherwise the channel itself. Many channels of one shape (one per waiter, say) then
    /// share one server subscription, which lingers between uses.
    ///
    /// # Errors
    /// As `subscribe`, when it falls back to the channel.
    ///
    /// # Cancel safety
    /// As `subscribe`.
    pub async fn subscribe_through(
        &self,
        channel: &str,
        pattern: Option<&str>,
        wake: WakeMode,
        bound: Duration,
    ) -> keylatch_core::Result<Subscription> {
        if let Some(pattern) = pattern
            && let Some(subscription) = self.subscribe_covered(pattern, channel, wake, bound).await
        {
            return Ok(subscription);
        }
        self.subscribe(channel, wake, bound).await
    }

    /// [`join_if_subscribed`](Self::join_if_subscribed) for a channel that `pattern` also
    /// matches: joins through the pattern if the server delivers it already, else the channel
    /// if it is subscribed; `None` otherwise. No round trip either way.
    pub fn join_if_delivered(
        &self,
        channel: &str,
        pattern: Option<&str>,
        wake: WakeMode,
    ) -> Option<Subscription> {
        pattern
            .filter(|_| self.supports_patterns())
            .and_then(|pattern| self.join_if_covered(pattern, channel, wake))
            .or_else(|| self.join_if_subscribed(channel, wake))
    }

    /// Whether a pattern can be used: not on a Redis Cluster (sharded pub/sub has no
    /// patterns), not with `Config::pubsub_patterns` 0, not once the server refused one.
    pub fn supports_patterns(&self) -> bool {
        self.shared.max_patterns > 0
            && !self.shared.cluster
            && !self.shared.patterns_denied.load(Ordering::Relaxed)
    }

    /// Waits on the exact `channel` through a subscription to `pattern`, which must match
    /// it: many channels of one shape (one per waiter, say) then share one server
    /// subscription, kept while any of them is in use and for the linger after, so a later
    /// waiter of the same shape joins with no round trip. Returns once the server has confirmed
    /// the pattern, or after `bound`, as [`subscribe`](Self::subscribe) does. Only where
    /// [`supports_patterns`](Self::supports_patterns); `channel` gets messages from both.
    ///
    /// `None` when no pattern can be used: not [`supports_patterns`](Self::supports_patterns),
    /// the client's budget of patterns ([`Config::pubsub_patterns`](crate::Config)) is spent,
    /// or the server refused it; subscribe to the exact channel instead.
    ///
    /// # Cancel safety
    /// Cancel safe, as `subscribe`.
    async fn subscribe_covered(
        &self,
        pattern: &str,
        channel: &str,
        wake: WakeMode,
        bound: Duration,
    ) -> Option<Subscription> {
        if !self.supports_patterns() {
            return None;
        }
        let (subscription, ready) = {
            let mut state = self.shared.state.lock().expect("hub lock");
            let in_use = state.channels.values().filter(|c| c.pattern).count();
            if !state.channels.contains_key(pattern) && in_use >= self.shared.max_patterns {
                // The budget is spent: the server would pay for one more on every publish.
                return None;
            }
            state
                .channels
                .entry(pattern.to_owned())
                .or_insert_with(|| ChannelState {
                    pattern: true,
                    ..ChannelState::new()
                });
            let ready = state.channels[pattern].ready();
            (self.join_covered(&mut state, pattern, channel, wake), ready)
        };
        if !ready {
            self.shared.settle(bound).await;
        }
        // Refused (see `supports_patterns`): the waiter takes its own channel.
        (!self.shared.denied(pattern)).then_some(subscription)
    }

    /// Joins `channel` through `pattern` only if the server delivers the pattern's messages
    /// already (another waiter of the same shape uses it, or it lingers), with no round trip;
    /// `None` otherwise. As [`join_if_subscribed`](Self::join_if_subscribed): a waiter that
    /// joins before its first attempt cannot miss a message published after it.
    pub(super) fn join_if_covered(
        &self,
        pattern: &str,
        channel: &str,
        wake: WakeMode,
    ) -> Option<Subscription> {
        let mut state = self.shared.state.lock().expect("hub lock");
        state.channels.get(pattern).filter(|c| c.ready())?;
        Some(self.join_covered(&mut state, pattern, channel, wake))
    }

    /// Channels in use (subscribed, or being subscribed or unsubscribed).
    pub fn channel_count(&self) -> usize {
        self.shared.state.lock().expect("hub lock").channels.len()
    }

    /// Local waiters holding a subscription, summed over channels (a waiter through a
    /// pattern counts once).
    pub fn subscriber_count(&self) -> usize {
        let state = self.shared.state.lock().expect("hub lock");
        state
            .channels
            .values()
            .filter(|c| !c.pattern)
            .map(|c| c.refs)
            .sum::<usize>()
            + state.covered.values().map(|c| c.refs).sum::<usize>()
    }

    /// How many times the pub/sub connection was re-established.
    pub fn reconnects(&self) -> u64 {
        self.shared.reconnects.load(Ordering::Relaxed)
    }

    /// Whether the pub/sub connection is up.
    pub fn is_connected(&self) -> bool {
        self.shared.connected.load(Ordering::Relaxed)
    }

    /// Messages received since the client connected.
    pub fn messages(&self) -> u64 {
        self.shared.messages.load(Ordering::Relaxed)
    }

    /// Letters waiters acted on ([`Subscription::letter_used`]): for the fair lock, locks
    /// handed to this client's waiters on release and taken from the message.
    pub fn letters(&self) -> u64 {
        self.shared.letters.load(Ordering::Relaxed)
    }
}

/// A reference to one channel subscription; dropping it releases the reference.
#[derive(Debug)]
pub struct Subscription {
    hub: Arc<HubShared>,
    channel: String,
    inbox: Arc<Inbox>,
    wake: WakeMode,
    /// The pattern that delivers `channel`, for a subscription through one.
    pattern: Option<String>,
}

impl Subscription {
    /// The channel.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Whether the server refused the pattern this subscription relies on: its channel's
    /// messages no longer arrive, and the waiter should subscribe to the channel itself.
    pub fn pattern_refused(&self) -> bool {
        self.pattern.is_some() && self.hub.patterns_denied.load(Ordering::Relaxed)
    }

    /// A future that completes on the next wake-up of this channel. Create and `enable` it
    /// *before* re-checking the condition, so a message between the check and the wait is not
    /// missed.
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.inbox.notify.notified()
    }

    /// Takes the last letter that arrived on this channel since a waiter first joined it (a
    /// message whose payload begins with [`LETTER_MARK`]), if no one took it yet. Letters wake
    /// waiters as any message does; only one waiter gets each.
    pub fn take_letter(&self) -> Option<Box<[u8]>> {
        self.inbox.letter.lock().expect("letter lock").take()
    }

    /// Counts a letter the waiter acted on ([`PubSubHub::letters`]).
    pub fn letter_used(&self) {
        self.hub.letters.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut state = self.hub.state.lock().expect("hub lock");
        if let Some(pattern) = &self.pattern {
            if let Some(local) = state.covered.get_mut(&self.channel) {
                local.leave(self.wake);
                if local.refs == 0 {
                    state.covered.remove(&self.channel);
                }
            }
            let Some(entry) = state.channels.get_mut(pattern) else {
                return;
            };
            entry.leave(WakeMode::One);
            if entry.refs == 0 {
                let _ = self.hub.commands.send(HubCommand(None));
            }
            return;
        }
        let Some(channel) = state.channels.get_mut(&self.channel) else {
            return;
        };
        channel.leave(self.wake);
        if channel.refs == 0 {
            // The entry stays until the reconciler has settled it: a SUBSCRIBE for it may be
            // in flight, and forgetting it here would leave the server subscribed.
            let _ = self.hub.commands.send(HubCommand(None));
        }
    }
}
