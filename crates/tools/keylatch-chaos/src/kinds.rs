//! What a run runs: its topology (the servers) and its workload (what the workers do).
//! Imports clap's `ValueEnum` only.

use std::fmt;

use clap::ValueEnum;

/// The servers of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Topology {
    /// One redis-server without persistence: a restart loses every lock.
    Single,
    /// One redis-server with `appendonly yes`, `appendfsync always`.
    SingleAof,
    /// One redis-server with `appendonly yes`, `appendfsync everysec`.
    SingleAofEverysec,
    /// Five independent redis-servers with `appendfsync always`, for the `redlock` workload.
    Redlock5,
    /// A primary, two replicas (no persistence) and three sentinels; the client does not wait
    /// for replicas.
    Sentinel,
    /// As `sentinel`, and every acquisition waits for one replica's acknowledgement.
    SentinelAck,
    /// A Redis Cluster of three primaries and three replicas (no persistence); the client does
    /// not wait for replicas.
    Cluster,
    /// As `cluster`, and every acquisition waits for one replica's acknowledgement.
    ClusterAck,
    /// A three-node ZooKeeper ensemble (`s1`…`s3`, log on disk); the workers connect with a
    /// `zk://` URL naming the three, with a session timeout of `--lease-ms`.
    Zk3,
}

impl Topology {
    /// How many lock servers.
    pub fn servers(self) -> usize {
        match self {
            Topology::Redlock5 => 5,
            Topology::Sentinel | Topology::SentinelAck | Topology::Zk3 => 3,
            Topology::Cluster | Topology::ClusterAck => 6,
            _ => 1,
        }
    }

    /// A Redis Cluster.
    pub fn is_cluster(self) -> bool {
        matches!(self, Topology::Cluster | Topology::ClusterAck)
    }

    /// A ZooKeeper ensemble.
    pub fn is_zookeeper(self) -> bool {
        self == Topology::Zk3
    }

    /// Replicas every acquisition waits for.
    pub fn replicas(self) -> u32 {
        u32::from(matches!(self, Topology::SentinelAck | Topology::ClusterAck))
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Topology::Single => "single",
            Topology::SingleAof => "single-aof",
            Topology::SingleAofEverysec => "single-aof-everysec",
            Topology::Redlock5 => "redlock5",
            Topology::Sentinel => "sentinel",
            Topology::SentinelAck => "sentinel-ack",
            Topology::Cluster => "cluster",
            Topology::ClusterAck => "cluster-ack",
            Topology::Zk3 => "zk3",
        })
    }
}

/// What the workers do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Reentrant lock with a fixed lease and fencing; one fenced write per hold.
    Reentrant,
    /// The fair lock, otherwise as `reentrant`: exclusion, tokens and the register are
    /// checked, and arrival order outside faults (an acquisition invoked well before another
    /// that waited beside it must get the lock first).
    Fair,
    /// A RedLock over every server of the topology (`redlock5`), with a fixed lease; no
    /// fencing token, so no register writes.
    Redlock,
    /// A semaphore of `--permits` permits (set up again with them when lost), each taken
    /// with the fixed lease; no register writes.
    Semaphore,
    /// A read-write lock: readers (two in three acquisitions) and writers, with the fixed
    /// lease; fencing on the write side, one fenced write per write hold.
    Rwlock,
    /// A multi-lock over two or three of four reentrant locks (overlapping sets), with the
    /// fixed lease; exclusion is checked per name; no fencing, so no register writes.
    Multilock,
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Workload::Reentrant => "reentrant",
            Workload::Fair => "fair",
            Workload::Redlock => "redlock",
            Workload::Semaphore => "semaphore",
            Workload::Rwlock => "rwlock",
            Workload::Multilock => "multilock",
        })
    }
}
