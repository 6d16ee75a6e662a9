//! A waiter's subscription to its own wake-up channel.
//!
//! Each fair waiter has a channel of its own, so a subscription is made and dropped with every
//! wait. Two things follow:
//!
//! - **Parking.** A dropped subscription is parked for [`LINGER`]: an owner that waits again
//!   soon (a worker taking job after job) takes it back, already confirmed, instead of paying
//!   a `SUBSCRIBE` and an `UNSUBSCRIBE` per wait — round trips on the hub's one connection that
//!   hold up every other waiter's wake-up message behind them — and, subscribed before its
//!   first attempt, needs no second attempt.
//! - **Drops in flight.** This wrapper never drops a subscription whose `SUBSCRIBE` is in
//!   flight: the subscribe runs in a background task that always sees it confirmed, and the
//!   final drop first takes a second reference (which waits for a `SUBSCRIBE` in flight to be
//!   confirmed) before letting both go. It was written against a hub that forgot such a
//!   channel locally while the server kept it; the hub now keeps every channel until its own
//!   task has settled it, so this part is a second line of defence and could be simplified.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use keylatch_core::{Client, Subscription, WakeMode};
use tokio::sync::futures::Notified;
use tokio::sync::oneshot;

/// How long a dropped subscription stays parked in case its owner waits again.
pub(crate) const LINGER: Duration = Duration::from_millis(250);

/// A client's UUID, as a number.
type ClientId = u128;

/// Parked subscriptions by channel (a channel names its client's UUID, so it is unique), and
/// per client the one task that lets them go when their time is up.
static PARKED: LazyLock<Mutex<Parking>> = LazyLock::new(Mutex::default);

#[derive(Debug, Default)]
struct Parking {
    entries: HashMap<String, Parked>,
    /// One per client with parked entries, on the runtime of the drop that started it (a
    /// client's runtime: its hub runs there).
    reapers: HashMap<ClientId, tokio::task::JoinHandle<()>>,
}

#[derive(Debug)]
struct Parked {
    subscription: WaiterSubscription,
    since: Instant,
}

impl Parking {
    /// Takes out `client`'s entries parked for `LINGER` or longer.
    fn expired(&mut self, client: ClientId, now: Instant) -> Vec<WaiterSubscription> {
        let due: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, p)| {
                p.subscription.client.id().as_u128() == client
                    && now.duration_since(p.since) >= LINGER
            })
            .map(|(channel, _)| channel.clone())
            .collect();
        due.iter()
            .filter_map(|channel| self.entries.remove(channel))
            .map(|p| p.subscription)
            .collect()
    }
}

/// Lets `client`'s parked subscriptions go once their time is up; ends when none is left.
async fn reap(client: ClientId) {
    loop {
        tokio::time::sleep(LINGER / 2).await;
        let (expired, done) = {
            let mut parking = PARKED.lock().expect("parked lock");
            let expired = parking.expired(client, Instant::now());
            let done = !parking
                .entries
                .values()
                .any(|p| p.subscription.client.id().as_u128() == client);
            if done {
                parking.reapers.remove(&client);
            }
            (expired, done)
        };
        for subscription in expired {
            subscription.release();
        }
        if done {
            return;
        }
    }
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct WaiterSubscription {
    inner: Option<Subscription>,
    client: Client,
    poll: Duration,
}

impl WaiterSubscription {
    /// Subscribes to `channel` (`WakeMode::All`: two waits of one owner share the channel, as
    /// they share the place in the queue) and returns once the server confirmed it, or after
    /// `poll` if the hub is reconnecting.
    pub(crate) async fn subscribe(client: &Client, channel: &str, poll: Duration) -> Self {
        let (tx, rx) = oneshot::channel();
        let task_client = client.clone();
        let owned = channel.to_owned();
        client.spawn_background(async move {
            let inner = task_client
                .hub()
                .subscribe(&owned, WakeMode::All, poll)
                .await;
            // If the waiter is gone, this drops the confirmed subscription: parked.
            let _ = tx.send(WaiterSubscription {
                inner: Some(inner),
                client: task_client,
                poll,
            });
            Ok(())
        });
        match rx.await {
            Ok(subscription) => subscription,
            // No runtime to run the task on: subscribe here.
            Err(_) => WaiterSubscription {
                inner: Some(client.hub().subscribe(channel, WakeMode::All, poll).await),
                client: client.clone(),
                poll,
            },
        }
    }

    /// The subscription to `channel` an earlier wait parked, if it is still there.
    pub(crate) fn parked(channel: &str) -> Option<Self> {
        let parked = PARKED
            .lock()
            .expect("parked lock")
            .entries
            .remove(channel)?;
        Some(parked.subscription)
    }

    /// A future that completes on the next wake-up; create and enable it before re-checking.
    pub(crate) fn notified(&self) -> Notified<'_> {
        self.inner
            .as_ref()
            .expect("present until dropped")
            .notified()
    }

    /// Lets go of the subscription for good; see the module docs for the second reference.
    fn release(mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let client = self.client.clone();
        let poll = self.poll;
        runtime.spawn(async move {
            let again = client
                .hub()
                .subscribe(inner.channel(), WakeMode::All, poll)
                .await;
            drop(inner);
            drop(again);
        });
    }
}

impl Drop for WaiterSubscription {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let client = self.client.id().as_u128();
        let channel = inner.channel().to_owned();
        let parked = Parked {
            subscription: WaiterSubscription {
                inner: Some(inner),
                client: self.client.clone(),
                poll: self.poll,
            },
            since: Instant::now(),
        };
        let mut stale = Vec::new();
        {
            let mut parking = PARKED.lock().expect("parked lock");
            if let Some(previous) = parking.entries.insert(channel, parked) {
                stale.push(previous.subscription);
            }
            let running = parking
                .reapers
                .get(&client)
                .is_some_and(|r| !r.is_finished());
            if !running {
                parking.reapers.insert(client, runtime.spawn(reap(client)));
            }
        }
        for subscription in stale {
            subscription.release();
        }
    }
}
