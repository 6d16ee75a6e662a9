//! A client's counters, for tests and monitoring.

use super::*;

/// A client's counters, for tests and monitoring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientStats {
    /// The watchdog's counters (live holds, renewals).
    pub watchdog: WatchdogStats,
    /// Pub/sub channels in use.
    pub channels: usize,
    /// Local waiters subscribed, summed over channels.
    pub subscribers: usize,
    /// Times the pub/sub connection was re-established.
    pub hub_reconnects: u64,
    /// Whether the pub/sub connection is up (on a cluster: the connection to every node).
    pub hub_connected: bool,
    /// Messages the pub/sub connection delivered to this client's waiters, in all.
    pub hub_messages: u64,
    /// Whether the server accepts pattern subscriptions (`PSUBSCRIBE`) from this client: an
    /// ACL user without them gets one channel per waiting name instead.
    pub hub_patterns: bool,
    /// Letters this client's waiters acted on ([`PubSubHub::letters`]): for the fair lock,
    /// locks handed to them on release and taken from the message, with no request of their
    /// own (a grant whose letter a wait cannot trust is taken by its next attempt instead).
    pub letters: u64,
    /// Background releases and undos not finished yet.
    pub background_pending: usize,
    /// Times a script had to be reloaded after `NOSCRIPT`.
    pub script_reloads: u64,
    /// On a Redis Cluster: redirections followed (`MOVED`, `ASK`) and back-offs while a slot
    /// had no reachable owner.
    pub cluster_redirections: u64,
    /// On a Redis Cluster: the primaries in the slot map last read (0 elsewhere, or before
    /// the first renewal read it).
    pub cluster_primaries: usize,
    /// On a Redis Cluster: whether wake-ups go by sharded pub/sub.
    pub sharded_pubsub: bool,
    /// Pipelined round trips sent for batches of script calls (the watchdog's renewals): one
    /// per batch on one server, one per node per batch on a cluster.
    pub batch_round_trips: u64,
    /// Times the primary moved or may have (Sentinel's `+switch-master`, a `READONLY` reply):
    /// each time, the client reconnected and re-checked every hold.
    pub primary_moves: u64,
    /// Times the primary was looked up through the sentinels (zero without Sentinel).
    pub primary_lookups: u64,
    /// Coalesced script calls sent ([`Config::coalesce`]): each carried several callers'
    /// acquisitions or releases.
    pub coalesced_calls: u64,
    /// The acquisitions and releases those coalesced calls carried.
    pub coalesced_requests: u64,
}

impl Client {
    /// The client's counters.
    pub fn stats(&self) -> ClientStats {
        let (coalesced_calls, coalesced_requests) = self.inner.commands.coalesced();
        ClientStats {
            watchdog: self.watchdog().stats(),
            channels: self.inner.hub.channel_count(),
            subscribers: self.inner.hub.subscriber_count(),
            hub_reconnects: self.inner.hub.reconnects(),
            hub_connected: self.inner.hub.is_connected(),
            hub_messages: self.inner.hub.messages(),
            hub_patterns: self.inner.hub.supports_patterns(),
            letters: self.inner.hub.letters(),
            background_pending: self.inner.background.pending(),
            script_reloads: self.inner.commands.script_reloads(),
            cluster_redirections: self.inner.commands.redirections(),
            cluster_primaries: self.inner.commands.cluster_nodes(),
            sharded_pubsub: self.inner.commands.is_sharded(),
            batch_round_trips: self.inner.commands.batch_pipelines(),
            primary_moves: self.inner.topology.moves(),
            primary_lookups: self.inner.topology.lookups(),
            coalesced_calls,
            coalesced_requests,
        }
    }
}
