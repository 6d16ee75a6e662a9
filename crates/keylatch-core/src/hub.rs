//! The pub/sub hub: one dedicated pub/sub connection per client, shared by every waiter.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_redis::redis;
use futures_util::StreamExt;
use tokio::sync::{Notify, mpsc, oneshot};

/// How a message on a channel wakes the local waiters of that channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WakeMode {
    /// Wake one waiter (a lock was released: only one can take it).
    One,
    /// Wake every waiter (several may proceed, or each must re-check).
    All,
}

/// One dedicated pub/sub connection per client, never a pooled one.
///
/// Subscriptions are reference-counted: the first local waiter on a channel subscribes, the last
/// one to leave unsubscribes, and any number of waiters share one server subscription. Messages
/// are hints: waiters always bound their waits (see [`Config::fallback_poll`]) and re-check.
/// When the connection drops, the hub reconnects with back-off, resubscribes every channel in
/// use and wakes every waiter so each re-checks at once.
///
/// [`Config::fallback_poll`]: crate::Config::fallback_poll
#[derive(Clone, Debug)]
pub struct PubSubHub {
    shared: Arc<HubShared>,
}

#[derive(Debug)]
struct HubShared {
    channels: Mutex<HashMap<String, ChannelState>>,
    commands: mpsc::UnboundedSender<HubCommand>,
    connected: AtomicBool,
    reconnects: AtomicU64,
    messages: AtomicU64,
}

#[derive(Debug)]
struct ChannelState {
    refs: usize,
    notify: Arc<Notify>,
    wake: WakeMode,
    subscribed: bool,
}

#[derive(Debug)]
enum HubCommand {
    Sync(Option<oneshot::Sender<bool>>),
}

impl PubSubHub {
    pub(crate) fn start(
        client: redis::Client,
        connect_timeout: Duration,
    ) -> (PubSubHub, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(HubShared {
            channels: Mutex::new(HashMap::new()),
            commands: tx,
            connected: AtomicBool::new(false),
            reconnects: AtomicU64::new(0),
            messages: AtomicU64::new(0),
        });
        let task = tokio::spawn(run(Arc::downgrade(&shared), client, connect_timeout, rx));
        (PubSubHub { shared }, task)
    }

    /// Subscribes to `channel` (or joins the existing subscription) and returns once the
    /// server has confirmed it, or after `bound` if the hub is reconnecting (the waiter then
    /// relies on its bounded waits until the hub resubscribes).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call releases its reference and the hub unsubscribes when no one
    /// is left.
    pub async fn subscribe(&self, channel: &str, wake: WakeMode, bound: Duration) -> Subscription {
        let (notify, subscribed) = {
            let mut channels = self.shared.channels.lock().expect("hub lock");
            let state = channels
                .entry(channel.to_owned())
                .or_insert_with(|| ChannelState {
                    refs: 0,
                    notify: Arc::new(Notify::new()),
                    wake,
                    subscribed: false,
                });
            state.refs += 1;
            (state.notify.clone(), state.subscribed)
        };
        let subscription = Subscription {
            hub: self.shared.clone(),
            channel: channel.to_owned(),
            notify,
        };
        if !subscribed {
            let (tx, rx) = oneshot::channel();
            if self
                .shared
                .commands
                .send(HubCommand::Sync(Some(tx)))
                .is_ok()
            {
                let _ = tokio::time::timeout(bound, rx).await;
            }
        }
        subscription
    }

    /// Channels in use (subscribed, or being subscribed or unsubscribed).
    pub fn channel_count(&self) -> usize {
        self.shared.channels.lock().expect("hub lock").len()
    }

    /// Local waiters holding a subscription, summed over channels.
    pub fn subscriber_count(&self) -> usize {
        let channels = self.shared.channels.lock().expect("hub lock");
        channels.values().map(|c| c.refs).sum()
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
}

/// A reference to one channel subscription; dropping it releases the reference.
#[derive(Debug)]
pub struct Subscription {
    hub: Arc<HubShared>,
    channel: String,
    notify: Arc<Notify>,
}

impl Subscription {
    /// The channel.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// A future that completes on the next wake-up of this channel. Create and `enable` it
    /// *before* re-checking the condition, so a message between the check and the wait is not
    /// missed.
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut channels = self.hub.channels.lock().expect("hub lock");
        let Some(state) = channels.get_mut(&self.channel) else {
            return;
        };
        state.refs -= 1;
        if state.refs == 0 {
            if state.subscribed {
                let _ = self.hub.commands.send(HubCommand::Sync(None));
            } else {
                channels.remove(&self.channel);
            }
        }
    }
}

/// Brings the server's subscriptions in line with the local reference counts.
async fn reconcile(
    shared: &HubShared,
    sink: &mut redis::aio::PubSubSink,
) -> redis::RedisResult<()> {
    let unsubscribe: Vec<String> = {
        let channels = shared.channels.lock().expect("hub lock");
        channels
            .iter()
            .filter(|(_, s)| s.refs == 0 && s.subscribed)
            .map(|(c, _)| c.clone())
            .collect()
    };
    if !unsubscribe.is_empty() {
        sink.unsubscribe(&unsubscribe).await?;
        let mut channels = shared.channels.lock().expect("hub lock");
        for channel in &unsubscribe {
            if let Some(state) = channels.get_mut(channel) {
                state.subscribed = false;
                if state.refs == 0 {
                    channels.remove(channel);
                }
            }
        }
    }
    // Computed after the unsubscribe, so a channel taken up again meanwhile is resubscribed.
    let subscribe: Vec<String> = {
        let channels = shared.channels.lock().expect("hub lock");
        channels
            .iter()
            .filter(|(_, s)| s.refs > 0 && !s.subscribed)
            .map(|(c, _)| c.clone())
            .collect()
    };
    if !subscribe.is_empty() {
        sink.subscribe(&subscribe).await?;
        let mut channels = shared.channels.lock().expect("hub lock");
        for channel in &subscribe {
            if let Some(state) = channels.get_mut(channel) {
                state.subscribed = true;
            }
        }
    }
    Ok(())
}

fn dispatch(shared: &HubShared, msg: &redis::Msg) {
    shared.messages.fetch_add(1, Ordering::Relaxed);
    let channels = shared.channels.lock().expect("hub lock");
    if let Some(state) = channels.get(msg.get_channel_name()) {
        match state.wake {
            WakeMode::One => state.notify.notify_one(),
            WakeMode::All => state.notify.notify_waiters(),
        }
    }
}

fn wake_everyone(shared: &HubShared) {
    let channels = shared.channels.lock().expect("hub lock");
    for state in channels.values() {
        state.notify.notify_waiters();
    }
}

async fn run(
    shared: std::sync::Weak<HubShared>,
    client: redis::Client,
    connect_timeout: Duration,
    mut commands: mpsc::UnboundedReceiver<HubCommand>,
) {
    let mut backoff = Duration::from_millis(20);
    let mut first = true;
    loop {
        let connection = tokio::time::timeout(connect_timeout, client.get_async_pubsub()).await;
        let Some(hub) = shared.upgrade() else { return };
        let pubsub = match connection {
            Ok(Ok(pubsub)) => pubsub,
            _ => {
                drop(hub);
                // Answer waiting subscribers while down; their waits stay bounded.
                let sleep = tokio::time::sleep(backoff);
                tokio::pin!(sleep);
                loop {
                    tokio::select! {
                        _ = &mut sleep => break,
                        command = commands.recv() => match command {
                            None => return,
                            Some(HubCommand::Sync(ack)) => { if let Some(ack) = ack { let _ = ack.send(false); } }
                        },
                    }
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let (mut sink, mut stream) = pubsub.split();
        if reconcile(&hub, &mut sink).await.is_err() {
            continue;
        }
        backoff = Duration::from_millis(20);
        hub.connected.store(true, Ordering::Relaxed);
        if !first {
            hub.reconnects.fetch_add(1, Ordering::Relaxed);
            wake_everyone(&hub);
        }
        first = false;
        drop(hub);
        loop {
            tokio::select! {
                command = commands.recv() => {
                    let Some(HubCommand::Sync(ack)) = command else { return };
                    let mut acks: Vec<oneshot::Sender<bool>> = ack.into_iter().collect();
                    while let Ok(HubCommand::Sync(ack)) = commands.try_recv() {
                        acks.extend(ack);
                    }
                    let Some(hub) = shared.upgrade() else { return };
                    let ok = reconcile(&hub, &mut sink).await.is_ok();
                    for ack in acks {
                        let _ = ack.send(ok);
                    }
                    if !ok {
                        break;
                    }
                }
                msg = stream.next() => {
                    let Some(msg) = msg else { break };
                    let Some(hub) = shared.upgrade() else { return };
                    dispatch(&hub, &msg);
                }
            }
        }
        let Some(hub) = shared.upgrade() else { return };
        hub.connected.store(false, Ordering::Relaxed);
        {
            let mut channels = hub.channels.lock().expect("hub lock");
            channels.retain(|_, state| state.refs > 0);
            for state in channels.values_mut() {
                state.subscribed = false;
            }
        }
        // Wake everyone: messages may have been lost while the connection was down.
        wake_everyone(&hub);
    }
}
