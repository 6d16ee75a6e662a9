//! Connections: where Redis is and how to reach it, and the command path on top.
//!
//! - `config.rs`, `tls.rs`: the client's configuration and its TLS settings;
//! - `endpoint.rs`: what a URL names (single server, Sentinel, Cluster), credentials decoded;
//! - `transport.rs`: those endpoints into redis-rs clients, with credentials and TLS;
//! - `slots.rs`: a cluster's slot map (which primary serves which slots, a key's slot);
//! - `changes.rs`: restarts and failovers seen behind the connections, with their instants
//!   (the watchdog's loss reasons);
//! - `topology.rs`, `cluster.rs`: where commands go (one server, the primary behind Sentinel,
//!   an application's pool, the node owning a slot) and following a cluster's answers;
//! - `commands.rs` (with `commands/coalesce.rs`, `commands/ack.rs`, `commands/on_cluster.rs`,
//!   `commands/server_changes.rs`):
//!   the few multiplexed connections kept out of the pool, script calls on them with reloading,
//!   coalescing of concurrent calls, replica acknowledgement, the cluster path;
//! - `script.rs`: static Lua scripts run by EVALSHA;
//! - `app.rs`: a connection for an application's own commands.
//!
//! May import: `keylatch-core`; inside, each file only those listed before it (`commands`
//! uses `topology`, `cluster` and `script`; `changes` uses `slots`; `transport` uses `config`, `tls` and `endpoint`).

pub(crate) mod app;
pub(crate) mod changes;
pub(crate) mod cluster;
pub(crate) mod commands;
pub(crate) mod config;
pub(crate) mod endpoint;
pub(crate) mod script;
pub(crate) mod slots;
pub(crate) mod tls;
pub(crate) mod topology;
pub(crate) mod transport;
