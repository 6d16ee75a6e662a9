//! What the hub keeps: each channel's local waiters and whether the server has it, the
//! waiters' inboxes, and how a message wakes them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::Instant;

use super::sink::Sink;

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

#[derive(Debug)]
pub(super) struct HubShared {
    pub(super) state: Mutex<HubState>,
    pub(super) commands: mpsc::UnboundedSender<HubCommand>,
    pub(super) connected: AtomicBool,
    /// Notified each time a connection is up with every channel in use subscribed on it.
    pub(super) up: tokio::sync::Notify,
    pub(super) reconnects: AtomicU64,
    pub(super) messages: AtomicU64,
    /// Letters waiters acted on (see [`Subscription::letter_used`]).
    pub(super) letters: AtomicU64,
    /// How long an unused channel stays subscribed.
    pub(super) linger: Duration,
    /// On a Redis Cluster: no pattern subscriptions.
    pub(super) cluster: bool,
    /// The server refused a pattern (`NOPERM`: an ACL user's channel rules match patterns
    /// only literally): waiters subscribe to their exact channels from then on.
    pub(super) patterns_denied: AtomicBool,
    /// The most patterns in use at once (`Config::pubsub_patterns`).
    pub(super) max_patterns: usize,
}

/// Everything that changes together, under one lock.
#[derive(Default)]
pub(super) struct HubState {
    /// What the server is asked to deliver: channels, and patterns (`pattern` set).
    pub(super) channels: HashMap<String, ChannelState>,
    /// Exact channels whose messages arrive through a pattern subscription: local waiters
    /// only, nothing on the server (see [`PubSubHub::subscribe_covered`]).
    pub(super) covered: HashMap<String, ChannelState>,
    /// The sink of the current connection, if connected.
    pub(super) sink: Option<Sink>,
    /// Bumped with every connection change, so a reconcile that ran on a dead connection does
    /// not mark channels as subscribed.
    pub(super) generation: u64,
}

impl HubShared {
    /// Asks the reconciler to bring the server in line and waits for it, `bound` at most. With
    /// no connection (not made yet, or being made again) the reconciler can do nothing: the
    /// wait goes on until a connection is up with every channel subscribed, then asks again.
    pub(super) async fn settle(&self, bound: Duration) {
        let _ = tokio::time::timeout(bound, async {
            loop {
                let up = self.up.notified();
                tokio::pin!(up);
                up.as_mut().enable();
                match self.reconcile_once().await {
                    Some(false) => up.await,
                    Some(true) | None => return,
                }
            }
        })
        .await;
    }

    /// Asks the reconciler to bring the server in line once and waits for its answer: whether
    /// it could (`None` when the hub is gone).
    pub(super) async fn reconcile_once(&self) -> Option<bool> {
        let (tx, rx) = oneshot::channel();
        self.commands.send(HubCommand(Some(tx))).ok()?;
        rx.await.ok()
    }

    /// A connection is up with every channel in use subscribed on it.
    pub(super) fn mark_up(&self) {
        self.connected
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.up.notify_waiters();
    }

    /// Whether the server refused the subscription to `name` (a channel or a pattern).
    pub(super) fn denied(&self, name: &str) -> bool {
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
pub(super) struct ChannelState {
    /// A pattern (`PSUBSCRIBE`), not a channel.
    pub(super) pattern: bool,
    pub(super) refs: usize,
    /// Of `refs`, how many asked for [`WakeMode::All`] and how many for [`WakeMode::Counted`].
    pub(super) all: usize,
    pub(super) counted: usize,
    pub(super) inbox: Arc<Inbox>,
    pub(super) subscribed: bool,
    /// An `UNSUBSCRIBE` for it is in flight: the server may stop delivering its messages any
    /// moment, so a new waiter must wait for the resubscription.
    pub(super) unsubscribing: bool,
    /// When the last waiter left (`refs` fell to 0).
    pub(super) idle_since: Option<Instant>,
    /// The server refused the subscription (`NOPERM`): the ACL user may not use this channel.
    pub(super) denied: bool,
}

impl ChannelState {
    pub(super) fn new() -> ChannelState {
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
    pub(super) fn ready(&self) -> bool {
        self.subscribed && !self.unsubscribing
    }

    pub(super) fn join(&mut self, wake: WakeMode) {
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

    pub(super) fn leave(&mut self, wake: WakeMode) {
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
    pub(super) fn wake(&self, payload: &[u8]) {
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
/// last letter for its waiters: [`Subscription::take_letter`](crate::Subscription::take_letter).
pub const LETTER_MARK: u8 = b'=';

/// What a channel's waiters share: the wake-up, and the last letter not taken yet.
#[derive(Debug, Default)]
pub(super) struct Inbox {
    pub(super) notify: Notify,
    pub(super) letter: Mutex<Option<Box<[u8]>>>,
}

/// Asks the reconciler to bring the server's subscriptions in line with the local reference
/// counts; the sender, if any, learns whether it succeeded.
#[derive(Debug)]
pub(super) struct HubCommand(pub(super) Option<oneshot::Sender<bool>>);

pub(super) fn dispatch(shared: &HubShared, channel: &str, payload: &[u8]) {
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

pub(super) fn wake_everyone(shared: &HubShared) {
    let state = shared.state.lock().expect("hub lock");
    for channel in state.channels.values().chain(state.covered.values()) {
        channel.inbox.notify.notify_waiters();
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
