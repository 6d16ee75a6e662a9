//! The command line: a run's arguments and the subcommands (the cleanup, the check of a
//! written history, and the helpers the harness starts inside its namespaces).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::history::HoldMode;
use crate::nemesis::FaultSet;
use crate::{Topology, Workload, bounds, net, run};

#[derive(Debug, Parser)]
#[command(
    name = "keylatch-chaos",
    about = "Chaos runs for keylatch: network namespaces, a seeded nemesis, a checked history",
    subcommand_negates_reqs = true,
    args_conflicts_with_subcommands = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Seed of the nemesis's schedule and of the workers' hold times.
    #[arg(long, required = true)]
    pub(crate) seed: Option<u64>,
    /// How long the workload runs, in minutes (fractions allowed).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) minutes: f64,
    /// The servers.
    #[arg(long, value_enum, default_value_t = Topology::Single)]
    pub(crate) topology: Topology,
    /// What the workers do.
    #[arg(long, value_enum, default_value_t = Workload::Reentrant)]
    pub(crate) workload: Workload,
    /// The faults: all, none, or a list of partition, loss, pause-server, kill, pause-client,
    /// clock-jump, failover (`all` is every one but clock-jump; failover only on the cluster
    /// topologies, whose `all` adds it; on zk3 each fault hits one server, the leader half
    /// the time).
    #[arg(long, default_value = "all")]
    pub(crate) nemesis: FaultSet,
    /// Worker processes.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(1..=50))]
    pub(crate) workers: u8,
    /// How workers hold: `watchdog` (no fixed lease, renewed until released, as `lock()`
    /// does) or `lease` (a fixed lease of --lease-ms on every acquisition). zk3 has no fixed
    /// lease: watchdog only.
    #[arg(long, value_enum, default_value_t = HoldMode::Watchdog)]
    pub(crate) mode: HoldMode,
    /// The fixed lease of each acquisition (lease mode), or the watchdog timeout (watchdog
    /// mode; on zk3 the session timeout), in milliseconds.
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub(crate) lease_ms: u64,
    /// The semaphore's permits (the `semaphore` workload).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub(crate) permits: u32,
    /// The longest hold, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub(crate) max_hold_ms: u64,
    /// Write a JSON summary here.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Write the whole history here, one JSON event a line.
    #[arg(long)]
    pub(crate) history: Option<PathBuf>,
    /// Which servers the nemesis hits: the ones its schedule drew, or (`lock`, the cluster
    /// topologies) the primary that serves the lock's key at the moment of each fault.
    #[arg(long, value_enum, default_value_t = run::Aim::Scheduled)]
    pub(crate) aim: run::Aim,
    #[command(flatten)]
    pub(crate) bounds: bounds::BoundsArgs,
    /// Panic this many seconds into the workload (tests that a panic cleans up).
    #[arg(long, hide = true)]
    pub(crate) panic_after: Option<f64>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Remove what earlier runs left behind: namespaces named klc-* (and their processes) and
    /// temporary directories named keylatch-chaos-*. Do not use while a run is going on.
    Cleanup {
        /// Only this run's: its hex id, as in `klc-<id>-net` (or `klc-<id>`).
        #[arg(long, value_parser = parse_run_id)]
        run: Option<String>,
    },
    /// Check a history written with --history again (without the register's log, so without
    /// the lost-write check). Exit status as for a run.
    Check {
        /// The history file, one JSON event a line.
        history: PathBuf,
        #[command(flatten)]
        bounds: bounds::BoundsArgs,
    },
    /// One client process (started by the harness inside its namespace).
    #[command(hide = true)]
    Worker {
        /// The run's prefix (names the run's processes).
        #[arg(long)]
        run: String,
        /// The harness's pid: the worker exits at once when its parent is another (the harness
        /// died before the parent-death signal was set).
        #[arg(long)]
        harness_pid: u32,
        #[arg(long)]
        id: usize,
        /// The lock servers' URLs, separated by `;`.
        #[arg(long)]
        server: String,
        #[arg(long)]
        oracle: String,
        #[arg(long, value_enum)]
        workload: Workload,
        #[arg(long)]
        permits: u32,
        /// Replicas every acquisition waits for.
        #[arg(long, default_value_t = 0)]
        replicas: u32,
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        deadline_ns: u64,
        #[arg(long)]
        lease_ms: u64,
        #[arg(long, value_enum)]
        mode: HoldMode,
        #[arg(long)]
        max_hold_ms: u64,
    },
    /// Wait until a redis server answers PING.
    #[command(hide = true)]
    Probe {
        #[arg(long)]
        url: String,
    },
    /// Form a Redis Cluster: the first half of the nodes primaries, the rest their replicas.
    #[command(hide = true)]
    FormCluster {
        /// `ip:port` of every node, separated by `,`.
        #[arg(long)]
        nodes: String,
    },
    /// Print the address of the primary that serves the lock's key, asking the nodes in turn.
    #[command(hide = true)]
    LockPrimary {
        /// `ip:port` of every node, separated by `,`.
        #[arg(long)]
        nodes: String,
    },
    /// `CLUSTER FAILOVER` on the shard of a cluster node.
    #[command(hide = true)]
    ClusterFailover {
        /// `ip:port` of the node.
        #[arg(long)]
        node: String,
    },
    /// Print each ZooKeeper server's mode (`-` when it does not serve), one line each.
    #[command(hide = true)]
    ZkSrvr {
        /// `ip:port` of every server, separated by `,`.
        #[arg(long)]
        addrs: String,
        /// First wait (at most 40 s) until every one serves.
        #[arg(long)]
        wait: bool,
    },
    /// Print a redis server's wall clock (TIME), in Unix milliseconds.
    #[command(hide = true)]
    ServerTime {
        #[arg(long)]
        url: String,
    },
    /// Print the register's log.
    #[command(hide = true)]
    DumpRegister {
        #[arg(long)]
        url: String,
    },
}

fn parse_run_id(text: &str) -> Result<String, String> {
    let id = text.strip_prefix(net::PREFIX).unwrap_or(text);
    if id.is_empty() || id.len() > 8 || !id.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err("expected a run's hex id, as in klc-<id>-net".to_owned());
    }
    Ok(id.to_ascii_lowercase())
}
