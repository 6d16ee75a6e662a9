//! Release markers whose reply has been seen: queued per client and semaphore name, deleted
//! by the next call that changes the count or by a background `DEL` (see `request.rs`).
//!
//! May import: the Redis layer's client.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keylatch_redis::Client;

/// How many settled markers one call deletes at most (with one `DEL`).
pub(crate) const SETTLED_BATCH: usize = 16;
/// How many settled markers gather before a call deletes them, so that most calls send none.
pub(crate) const SETTLED_MIN: usize = 8;
/// How many settled markers a semaphore name's queue remembers; older ones are left to expire.
pub(crate) const SETTLED_CAP: usize = 4096;
/// How many semaphore names' queues of settled markers a process keeps; past it the least
/// recently made is dropped (its markers expire).
const SETTLED_NAMES: usize = 10_000;
/// How long a release's marker lives once the server applied the release (at least the
/// request window): a release whose reply was lost is retried until the server answers, and
/// a retry that arrives within this finds the marker and applies nothing.
pub(crate) const RELEASE_MARKER_LIFE: Duration = Duration::from_secs(3600);

/// How long after a release's reply its marker waits for a call to take it along before a
/// background `DEL` removes it (with the others gathered meanwhile).
const FLUSH_DELAY: Duration = Duration::from_millis(100);

/// Settled markers of one semaphore name on one client, shared by its handles.
#[derive(Debug, Default)]
pub(crate) struct SettledQueue {
    pub(crate) markers: Mutex<VecDeque<String>>,
    /// A background flush is scheduled.
    pub(crate) flushing: std::sync::atomic::AtomicBool,
}

pub(crate) type Settled = Arc<SettledQueue>;
type Queues = HashMap<(uuid::Uuid, Arc<str>), (u64, Settled)>;

/// The settled-marker queue of `name` on the client `client`, made on first use.
pub(crate) fn settled_queue(client: &Client, name: &Arc<str>) -> Settled {
    static QUEUES: Mutex<Option<Queues>> = Mutex::new(None);
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut queues = QUEUES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let queues = queues.get_or_insert_with(HashMap::new);
    if let Some((_, queue)) = queues.get(&(client.id(), name.clone())) {
        return queue.clone();
    }
    if queues.len() >= SETTLED_NAMES
        && let Some(oldest) = queues
            .iter()
            .min_by_key(|(_, (made, _))| *made)
            .map(|(key, _)| key.clone())
    {
        queues.remove(&oldest);
    }
    let queue = Settled::default();
    let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    queues.insert((client.id(), name.clone()), (made, queue.clone()));
    queue
}

/// A release's marker, to settle once the release's reply is seen.
#[derive(Debug)]
pub(crate) struct ReleaseDone {
    pub(crate) client: Client,
    pub(crate) queue: Settled,
    pub(crate) marker: String,
}

impl ReleaseDone {
    /// Queues the marker for deletion, and schedules a background `DEL` unless one is.
    pub(crate) fn settle(self) {
        let ReleaseDone {
            client,
            queue,
            marker,
        } = self;
        {
            let mut markers = queue.markers.lock().expect("settled lock");
            if markers.len() >= SETTLED_CAP {
                markers.pop_front();
            }
            markers.push_back(marker);
        }
        schedule_flush(&client, queue);
    }
}

/// Schedules a background `DEL` of `queue`'s settled markers unless one is scheduled: a
/// moment later it deletes them in batches (those a call takes along meanwhile are gone
/// from the queue by then).
pub(crate) fn schedule_flush(client: &Client, queue: Settled) {
    if queue
        .flushing
        .swap(true, std::sync::atomic::Ordering::AcqRel)
    {
        return;
    }
    let client = client.clone();
    let background = client.clone();
    background.spawn_background(async move {
        tokio::time::sleep(FLUSH_DELAY).await;
        // Settled from now on, a marker schedules a flush of its own.
        queue
            .flushing
            .store(false, std::sync::atomic::Ordering::Release);
        loop {
            let batch: Vec<String> = {
                let mut markers = queue.markers.lock().expect("settled lock");
                let n = markers.len().min(SETTLED_BATCH);
                markers.drain(..n).collect()
            };
            let Some(first) = batch.first() else {
                return Ok(());
            };
            let mut del = keylatch_redis::redis::cmd("DEL");
            for marker in &batch {
                del.arg(marker.as_str());
            }
            // A marker not deleted (the server could not be reached) expires.
            if client.query::<i64>(&del, first).await.is_err() {
                return Ok(());
            }
        }
    });
}

/// Settled markers a call takes along, to delete in its script. The call reports what became
/// of them: [`deleted`](Taken::deleted) (its script ran and deleted them) or
/// [`give_back`](Taken::give_back) (it was refused: the next call takes them along). Dropped
/// without either (an error, or the call's future dropped mid-way), they go back to the queue
/// and a background `DEL` is scheduled: a release's marker would otherwise live an hour.
#[derive(Debug)]
pub(crate) struct Taken {
    /// The queue they came from and its client; `None` when none were taken (most calls), so
    /// that such a call clones nothing.
    pub(crate) from: Option<(Client, Settled)>,
    pub(crate) markers: Vec<String>,
}

impl Taken {
    /// The markers, as keys for the call.
    pub(crate) fn keys(&self) -> &[String] {
        &self.markers
    }

    /// The call's script deleted them.
    pub(crate) fn deleted(mut self) {
        self.markers.clear();
    }

    /// The call was refused and deleted nothing: back to the queue, for the next call.
    pub(crate) fn give_back(mut self) {
        self.requeue();
    }

    fn requeue(&mut self) {
        let Some((_, queue)) = &self.from else { return };
        let mut settled = queue.markers.lock().expect("settled lock");
        for marker in self.markers.drain(..).rev() {
            if settled.len() < SETTLED_CAP {
                settled.push_front(marker);
            }
        }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        if self.markers.is_empty() {
            return;
        }
        self.requeue();
        if let Some((client, queue)) = &self.from {
            schedule_flush(client, queue.clone());
        }
    }
}
