//! What a run is asked to do, and what it collected.

use std::time::Duration;

use crate::cluster::Aim;
use crate::history::Event;
use crate::nemesis::{self, FaultSet, Step};
use crate::{Topology, Workload, shapes, zookeeper};

/// What a run is asked to do.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The seed of the schedule and of the workers' hold times.
    pub seed: u64,
    /// How long the workload runs.
    pub duration: Duration,
    /// The servers.
    pub topology: Topology,
    /// What the workers do.
    pub workload: Workload,
    /// The faults the nemesis may inject.
    pub nemesis: FaultSet,
    /// How many worker processes.
    pub workers: usize,
    /// The fixed lease of each acquisition, or the watchdog timeout.
    pub lease_ms: u64,
    /// A fixed lease, or the watchdog.
    pub mode: crate::history::HoldMode,
    /// The longest hold.
    pub max_hold_ms: u64,
    /// The semaphore's permits (the `semaphore` workload).
    pub permits: u32,
    /// Panic this long into the workload (tests the cleanup).
    pub panic_after: Option<Duration>,
    /// Which servers the nemesis hits.
    pub aim: Aim,
}

impl Plan {
    /// The nemesis's schedule for this plan.
    pub fn schedule(&self) -> Vec<Step> {
        let steps = nemesis::schedule(
            self.seed,
            self.duration.as_millis() as u64,
            self.workers,
            self.topology.servers(),
            self.lease_ms,
            &self.nemesis,
        );
        let sentinel = matches!(self.topology, Topology::Sentinel | Topology::SentinelAck);
        match self.topology {
            Topology::Zk3 => {
                let aimed = zookeeper::aim(steps, self.seed, self.topology.servers());
                shapes::shape(aimed, self.seed, false)
            }
            _ if sentinel => shapes::shape(steps, self.seed, true),
            _ => steps,
        }
    }
}

/// What a run collected.
#[derive(Debug)]
pub struct Collected {
    /// Every event, workers' and nemesis's.
    pub history: Vec<Event>,
    /// The register's accepted writes, in order.
    pub register_log: Vec<(u64, String)>,
    /// The unfenced counter's final value.
    pub counter: u64,
    /// When the workload started (history time).
    pub origin: u64,
}
