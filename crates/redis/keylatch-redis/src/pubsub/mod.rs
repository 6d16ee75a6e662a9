//! The pub/sub hub: one dedicated pub/sub connection per client (per node on a cluster),
//! shared by every waiter, with reference-counted subscriptions.
//!
//! - `hub.rs`: [`PubSubHub`] and [`Subscription`], what waiters use;
//! - `state.rs`: the channels, their waiters and inboxes, and how a message wakes them;
//! - `reconcile.rs`: what the server should be subscribed to, and the commands that get it there;
//! - `sink.rs`: subscribing and unsubscribing on one server or every node of a cluster;
//! - `read.rs`: the read loops that own the connection and reconnect.
//!
//! May import: `crate::connection` (topology, cluster) and `keylatch-core`; inside, `hub` uses
//! the others, `read` uses `reconcile`, `sink` and `state`, `reconcile` uses `sink` and
//! `state`, `state` uses `sink`.

mod hub;
mod read;
mod reconcile;
mod sink;
mod state;

pub use hub::{PubSubHub, Subscription};
pub use state::{LETTER_MARK, WakeMode};
