//! The pub/sub hub: one dedicated pub/sub connection per client, shared by every waiter.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_redis::redis;
use futures_util::StreamExt;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::Instant;

/// How a message on a channel wakes the local waiters of that channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WakeMode {
    /// Wake one waiter (a lock was released: only one can take it).
    One,
    /// Wake every waiter (several may proceed, or each must re-check).
    All,
    /// Wake as many waiters as the message says: its payload is an integer, the number of
    /// units now available (a semaphore's permits), and each waiter of this mode needs one.
    /// A payload that is not an integer wakes every waiter; zero or less wakes none.
    ///
    /// A channel with waiters of several modes wakes as the most generous of them asks: all
    /// if any waiter asked for [`All`](WakeMode::All), otherwise as many as counted (or one).
    Counted,
}

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
    shared: Arc<HubShared>,
}

#[derive(Debug)]
struct HubShared {
    state: Mutex<HubState>,
    commands: mpsc::UnboundedSender<HubCommand>,
    connected: AtomicBool,
    reconnects: AtomicU64,
    messages: AtomicU64,
    /// Letters waiters acted on (see [`Subscription::letter_used`]).
    letters: AtomicU64,
    /// How long an unused channel stays subscribed.
    linger: Duration,
    /// On a Redis Cluster: no pattern subscriptions.
    cluster: bool,
    /// The server refused a pattern (`NOPERM`: an ACL user's channel rules match patterns
    /// only literally): waiters subscribe to their exact channels from then on.
    patterns_denied: AtomicBool,
    /// The most patterns in use at once (`Config::pubsub_patterns`).
    max_patterns: usize,
}

/// Everything that changes together, under one lock.
#[derive(Default)]
struct HubState {
    /// What the server is asked to deliver: channels, and patterns (`pattern` set).
    channels: HashMap<String, ChannelState>,
    /// Exact channels whose messages arrive through a pattern subscription: local waiters
    /// only, nothing on the server (see [`PubSubHub::subscribe_covered`]).
    covered: HashMap<String, ChannelState>,
    /// The sink of the current connection, if connected.
    sink: Option<Sink>,
    /// Bumped with every connection change, so a reconcile that ran on a dead connection does
    /// not mark channels as subscribed.
    generation: u64,
}

impl HubShared {
    /// Asks the reconciler to bring the server in line and waits for it, `bound` at most (the
    /// hub may be reconnecting).
    async fn settle(&self, bound: Duration) {
        let (tx, rx) = oneshot::channel();
        if self.commands.send(HubCommand(Some(tx))).is_ok() {
            let _ = tokio::time::timeout(bound, rx).await;
        }
    }

    /// Whether the server refused the subscription to `name` (a channel or a pattern).
    fn denied(&self, name: &str) -> bool {
        let state = self.state.lock().expect("hub lock");
        state.channels.get(name).is_some_and(|c| c.denied)
    }
}

impl std::fmt::Debug for HubState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubState")
            .field("channels", &self.channels.len())
            .field("connected", &self.sink.is_some())
            .field("generation", &self.generation)
            .finish()
    }
}

#[derive(Debug)]
struct ChannelState {
    /// A pattern (`PSUBSCRIBE`), not a channel.
    pattern: bool,
    refs: usize,
    /// Of `refs`, how many asked for [`WakeMode::All`] and how many for [`WakeMode::Counted`].
    all: usize,
    counted: usize,
    inbox: Arc<Inbox>,
    subscribed: bool,
    /// An `UNSUBSCRIBE` for it is in flight: the server may stop delivering its messages any
    /// moment, so a new waiter must wait for the resubscription.
    unsubscribing: bool,
    /// When the last waiter left (`refs` fell to 0).
    idle_since: Option<Instant>,
    /// The server refused the subscription (`NOPERM`): the ACL user may not use this channel.
    denied: bool,
}

impl ChannelState {
    fn new() -> ChannelState {
        ChannelState {
            pattern: false,
            refs: 0,
            all: 0,
            counted: 0,
            inbox: Arc::new(Inbox::default()),
            subscribed: false,
            unsubscribing: false,
            idle_since: None,
            denied: false,
        }
    }

    /// Whether the server delivers this channel's messages now and will go on doing so while
    /// a waiter holds a reference.
    fn ready(&self) -> bool {
        self.subscribed && !self.unsubscribing
    }

    fn join(&mut self, wake: WakeMode) {
        if self.refs == 0 {
            // A letter left from an earlier wait on this channel is not for the new one.
            self.inbox.letter.lock().expect("letter lock").take();
        }
        self.refs += 1;
        self.idle_since = None;
        match wake {
            WakeMode::All => self.all += 1,
            WakeMode::Counted => self.counted += 1,
            WakeMode::One => {}
        }
    }

    fn leave(&mut self, wake: WakeMode) {
        self.refs -= 1;
        if self.refs == 0 {
            self.idle_since = Some(Instant::now());
        }
        match wake {
            WakeMode::All => self.all -= 1,
            WakeMode::Counted => self.counted -= 1,
            WakeMode::One => {}
        }
    }

    /// Wakes the waiters a message with `payload` calls for, and keeps a letter (a payload
    /// that begins with [`LETTER_MARK`]) for them to take.
    fn wake(&self, payload: &[u8]) {
        if payload.first() == Some(&LETTER_MARK) && self.refs > 0 {
            *self.inbox.letter.lock().expect("letter lock") = Some(payload.into());
        }
        if self.all > 0 {
            self.inbox.notify.notify_waiters();
        } else if self.counted > 0 {
            let count = std::str::from_utf8(payload)
                .ok()
                .and_then(|text| text.trim().parse::<i64>().ok());
            match count {
                None => self.inbox.notify.notify_waiters(),
                Some(count) => {
                    // One wake-up per unit, never more than there are waiters: a surplus
                    // `notify_one` would only store a permit for a later, needless re-check.
                    let wakes = usize::try_from(count.max(0)).unwrap_or(usize::MAX);
                    for _ in 0..wakes.min(self.refs) {
                        self.inbox.notify.notify_one();
                    }
                }
            }
        } else {
            self.inbox.notify.notify_one();
        }
    }
}

/// The first byte of a letter: a message whose payload matters to the waiter beyond waking it
/// (the fair lock's grant: the lock was handed to the waiter on release). The channel keeps the
/// last letter for its waiters: [`Subscription::take_letter`].
pub const LETTER_MARK: u8 = b'=';

/// What a channel's waiters share: the wake-up, and the last letter not taken yet.
#[derive(Debug, Default)]
struct Inbox {
    notify: Notify,
    letter: Mutex<Option<Box<[u8]>>>,
}

/// Asks the reconciler to bring the server's subscriptions in line with the local reference
/// counts; the sender, if any, learns whether it succeeded.
#[derive(Debug)]
struct HubCommand(Option<oneshot::Sender<bool>>);

impl PubSubHub {
    pub(crate) fn start(
        topology: Arc<crate::topology::Topology>,
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
    fn join_covered(
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
    fn join_if_covered(
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

/// What the server should be told, computed under the lock: channels to subscribe, channels
/// idle for the linger to unsubscribe, and when the next idle one is due.
#[allow(clippy::type_complexity)]
fn plan(
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
async fn reconcile(shared: &HubShared) -> (bool, Option<Instant>) {
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
async fn reconcile_loop(
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
fn is_refusal(err: &redis::RedisError) -> bool {
    !(err.is_io_error() || err.is_connection_dropped() || err.is_timeout())
}

fn is_noperm(err: &redis::RedisError) -> bool {
    matches!(
        crate::error::from_redis(err.clone()),
        keylatch_core::Error::NoPermission { .. }
    )
}

fn dispatch(shared: &HubShared, channel: &str, payload: &[u8]) {
    shared.messages.fetch_add(1, Ordering::Relaxed);
    tracing::trace!(target: "keylatch::pubsub", channel, "wake-up message");
    let state = shared.state.lock().expect("hub lock");
    if let Some(entry) = state.channels.get(channel) {
        entry.wake(payload);
    }
    if let Some(entry) = state.covered.get(channel) {
        entry.wake(payload);
    }
}

/// The sending half of the hub's connection: a pub/sub connection to one server, or a RESP3
/// cluster connection (redis-rs keeps one connection per node, and sends each subscription
/// to the node that owns its channel's slot).
#[derive(Clone)]
enum Sink {
    Classic(redis::aio::PubSubSink),
    Cluster {
        conn: redis::cluster_async::ClusterConnection,
        /// `SSUBSCRIBE` rather than `SUBSCRIBE`.
        sharded: bool,
    },
}

/// Names of one kind: channels (`false`) or patterns (`true`).
fn of_kind(names: &[(String, bool)], pattern: bool) -> Vec<&str> {
    names
        .iter()
        .filter(|(_, p)| *p == pattern)
        .map(|(name, _)| name.as_str())
        .collect()
}

impl Sink {
    /// Subscribes to channels and patterns (`(name, is_pattern)`).
    async fn subscribe(&mut self, names: &[(String, bool)]) -> redis::RedisResult<()> {
        let channels = of_kind(names, false);
        let patterns = of_kind(names, true);
        match self {
            Sink::Classic(sink) => {
                if !channels.is_empty() {
                    sink.subscribe(channels).await?;
                }
                if !patterns.is_empty() {
                    sink.psubscribe(patterns).await?;
                }
                Ok(())
            }
            Sink::Cluster { .. } if !patterns.is_empty() => Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "no pattern subscriptions on a Redis Cluster",
            ))),
            Sink::Cluster { conn, sharded } => {
                // One command per channel: channels of different slots live on different
                // nodes (and a sharded one must name channels of one slot).
                let sharded = *sharded;
                let calls = channels.iter().map(|channel| {
                    let mut conn = conn.clone();
                    async move {
                        if sharded {
                            conn.ssubscribe(channel).await
                        } else {
                            conn.subscribe(channel).await
                        }
                    }
                });
                futures_util::future::join_all(calls)
                    .await
                    .into_iter()
                    .collect::<redis::RedisResult<Vec<()>>>()
                    .map(|_| ())
            }
        }
    }

    /// Unsubscribes from channels and patterns (`(name, is_pattern)`).
    async fn unsubscribe(&mut self, names: &[(String, bool)]) -> redis::RedisResult<()> {
        let channels = of_kind(names, false);
        let patterns = of_kind(names, true);
        match self {
            Sink::Classic(sink) => {
                if !channels.is_empty() {
                    sink.unsubscribe(channels).await?;
                }
                if !patterns.is_empty() {
                    sink.punsubscribe(patterns).await?;
                }
                Ok(())
            }
            Sink::Cluster { conn, sharded } => {
                let sharded = *sharded;
                let calls = channels.iter().map(|channel| {
                    let mut conn = conn.clone();
                    async move {
                        if sharded {
                            conn.sunsubscribe(channel).await
                        } else {
                            conn.unsubscribe(channel).await
                        }
                    }
                });
                futures_util::future::join_all(calls)
                    .await
                    .into_iter()
                    .collect::<redis::RedisResult<Vec<()>>>()
                    .map(|_| ())
            }
        }
    }
}

fn wake_everyone(shared: &HubShared) {
    let state = shared.state.lock().expect("hub lock");
    for channel in state.channels.values().chain(state.covered.values()) {
        channel.inbox.notify.notify_waiters();
    }
}

/// A new connection (or none): nothing is subscribed on it yet.
fn switch_connection(shared: &HubShared, sink: Option<Sink>) {
    let mut state = shared.state.lock().expect("hub lock");
    state.generation += 1;
    state.sink = sink;
    for channel in state.channels.values_mut() {
        channel.subscribed = false;
        channel.unsubscribing = false;
    }
    state.channels.retain(|_, c| c.refs > 0);
}

/// Owns the connection: connects, hands the sink to the reconciler, delivers messages, and on
/// loss reconnects with back-off and wakes every waiter. Message delivery never waits for a
/// subscribe or unsubscribe round trip.
async fn read_loop(
    shared: std::sync::Weak<HubShared>,
    topology: Arc<crate::topology::Topology>,
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
        hub.settle(connect_timeout).await;
        backoff = reconnecting;
        hub.connected.store(true, Ordering::Relaxed);
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
async fn cluster_read_loop(
    shared: std::sync::Weak<HubShared>,
    topology: Arc<crate::topology::Topology>,
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
        let map = crate::cluster::slot_map(&mut probe).await.ok();
        switch_connection(&hub, Some(Sink::Cluster { conn, sharded }));
        hub.settle(connect_timeout).await;
        backoff = reconnecting;
        hub.connected.store(true, Ordering::Relaxed);
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
                    let now = crate::cluster::slot_map(&mut probe).await.ok();
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
const WATCH_EVERY: Duration = Duration::from_millis(250);
const WATCH_FOR: Duration = Duration::from_secs(60);

/// One push from a cluster node; `true` when a node's connection dropped.
fn on_push(hub: &HubShared, push: redis::PushInfo, reconnected: &Notify) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(modes: &[WakeMode]) -> ChannelState {
        let mut state = ChannelState::new();
        state.subscribed = true;
        for &mode in modes {
            state.join(mode);
        }
        state
    }

    /// Registers `n` waiters, delivers one message, and counts the waiters it woke.
    fn woken(state: &ChannelState, waiters: usize, payload: &[u8]) -> usize {
        let mut futures: Vec<_> = (0..waiters)
            .map(|_| Box::pin(state.inbox.notify.notified()))
            .collect();
        for future in &mut futures {
            future.as_mut().enable();
        }
        state.wake(payload);
        let waker = futures_util::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        let mut ready = 0;
        for future in &mut futures {
            if future.as_mut().poll(&mut cx).is_ready() {
                ready += 1;
            }
        }
        ready
    }

    #[test]
    fn counted_wakes_as_many_as_the_payload_says() {
        let state = channel(&[WakeMode::Counted; 5]);
        assert_eq!(woken(&state, 5, b"1"), 1);
        assert_eq!(woken(&state, 5, b"3"), 3);
        assert_eq!(woken(&state, 5, b"0"), 0);
        assert_eq!(woken(&state, 5, b"-2"), 0);
        // More units than waiters: every waiter, and no surplus stored for later.
        assert_eq!(woken(&state, 5, b"99"), 5);
        assert_eq!(woken(&state, 5, b"0"), 0);
        // Not a count: everyone re-checks.
        assert_eq!(woken(&state, 5, b"released"), 5);
        assert_eq!(woken(&state, 5, b""), 5);
    }

    #[test]
    fn the_most_generous_subscriber_decides() {
        let mut state = channel(&[WakeMode::Counted, WakeMode::Counted, WakeMode::All]);
        assert_eq!(woken(&state, 3, b"1"), 3);
        state.leave(WakeMode::All);
        assert_eq!(woken(&state, 2, b"1"), 1);
        let state = channel(&[WakeMode::One, WakeMode::One]);
        assert_eq!(woken(&state, 2, b"0"), 1);
        let state = channel(&[WakeMode::One, WakeMode::Counted]);
        assert_eq!(woken(&state, 2, b"2"), 2);
    }
}
