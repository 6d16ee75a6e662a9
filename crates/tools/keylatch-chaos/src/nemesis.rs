//! The nemesis's schedule, drawn from the seed alone, so a seed replays the same faults.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// The faults this slice knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// nftables drops between some workers and the server.
    Partition,
    /// nftables drops a share of the packets between some workers and the server.
    Loss,
    /// SIGSTOP the server, SIGCONT after.
    PauseServer,
    /// SIGKILL the server, start it again after (its data survives only with persistence).
    Kill,
    /// SIGSTOP one worker for longer than the lease, SIGCONT after: the worker holding the
    /// lock at that moment, else the scheduled one.
    PauseClient,
    /// Step one process's wall clock (the lock server's, or a worker's) forward or back, and
    /// back to the host's after. Not part of `all`: asked for by name.
    ClockJump,
    /// `CLUSTER FAILOVER` on a replica of each chosen node's shard (the cluster topologies;
    /// their `all` adds it), then a pause of 1–3 s.
    Failover,
}

impl FaultKind {
    /// Every kind `all` names (clock jumps are asked for by name: they break the single
    /// server's guarantees, so `all` keeps the safe configurations safe).
    pub const ALL: [FaultKind; 5] = [
        FaultKind::Partition,
        FaultKind::Loss,
        FaultKind::PauseServer,
        FaultKind::Kill,
        FaultKind::PauseClient,
    ];

    fn name(self) -> &'static str {
        match self {
            FaultKind::Partition => "partition",
            FaultKind::Loss => "loss",
            FaultKind::PauseServer => "pause-server",
            FaultKind::Kill => "kill",
            FaultKind::PauseClient => "pause-client",
            FaultKind::ClockJump => "clock-jump",
            FaultKind::Failover => "failover",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A comma-separated list of fault kinds (`all` among them adds every kind but clock-jump and
/// failover), or `none`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultSet(pub Vec<FaultKind>);

impl FromStr for FaultSet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "all" => return Ok(FaultSet(FaultKind::ALL.to_vec())),
            "none" => return Ok(FaultSet(Vec::new())),
            _ => {}
        }
        let mut kinds = Vec::new();
        for part in s.split(',').map(str::trim) {
            if part == "all" {
                for k in FaultKind::ALL {
                    if !kinds.contains(&k) {
                        kinds.push(k);
                    }
                }
                continue;
            }
            let kind = FaultKind::ALL
                .into_iter()
                .chain([FaultKind::ClockJump, FaultKind::Failover])
                .find(|k| k.name() == part)
                .ok_or_else(|| {
                    format!(
                        "unknown fault {part:?}: expected all, none or a list of partition, loss, pause-server, kill, pause-client, clock-jump, failover"
                    )
                })?;
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        Ok(FaultSet(kinds))
    }
}

impl fmt::Display for FaultSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.0.iter().map(|k| k.name()).collect();
        f.write_str(&names.join(","))
    }
}

/// What a partition cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// The topology's own partition (a split brain, or workers cut from servers).
    #[default]
    Split,
    /// Sentinel `n` (1-based) cut from every other node: a minority of the three.
    Sentinel(usize),
    /// The step's two servers cut from each other (each with the sentinel of the same number
    /// on `sentinel`); the third data node (and sentinel) sees both sides.
    Bridge,
}

/// One fault of the schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// When it starts, from the start of the workload (ms).
    pub at_ms: u64,
    /// What.
    pub kind: FaultKind,
    /// How long until it is healed (for a kill: how long the server stays down).
    pub duration_ms: u64,
    /// The workers it targets (1-based; partition, loss, pause-client, clock-jump: none for a
    /// clock jump means the lock server's clock).
    pub workers: Vec<usize>,
    /// The share of packets dropped (loss), in percent.
    pub loss_percent: u8,
    /// How far the clock steps (clock-jump), in milliseconds: forward when positive.
    pub clock_ms: i64,
    /// The servers it targets (1-based), with more than one server: partition and loss cut
    /// the workers from these, pause-server, kill and a server's clock-jump hit these. Empty
    /// with one server (s1).
    pub servers: Vec<usize>,
    /// Aimed at whichever server leads when it starts (`zk3`), `servers` naming the one hit
    /// when none does.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub leader: bool,
    /// A partition's shape (sentinel and zk3 topologies; drawn in `shapes.rs`).
    #[serde(skip_serializing_if = "is_split")]
    pub shape: Shape,
}

fn is_split(shape: &Shape) -> bool {
    *shape == Shape::Split
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} for {} ms", self.kind, self.duration_ms)?;
        if self.kind == FaultKind::ClockJump {
            write!(f, " by {:+} ms", self.clock_ms)?;
            if self.workers.is_empty() && self.servers.is_empty() {
                write!(f, " on s1")?;
            }
        }
        if !self.workers.is_empty() {
            let ws: Vec<String> = self.workers.iter().map(|w| format!("c{w}")).collect();
            write!(f, " on {}", ws.join(","))?;
        }
        if !self.servers.is_empty() {
            let ss: Vec<String> = self.servers.iter().map(|s| format!("s{s}")).collect();
            let word = if self.workers.is_empty() {
                "on"
            } else {
                "from"
            };
            if self.leader {
                write!(f, " {word} the leader (else {})", ss.join(","))?;
            } else {
                write!(f, " {word} {}", ss.join(","))?;
            }
        }
        if self.kind == FaultKind::Loss {
            write!(f, " dropping {}%", self.loss_percent)?;
        }
        match self.shape {
            Shape::Split => {}
            Shape::Sentinel(n) => write!(f, " of sen{n} (a minority of the sentinels)")?,
            Shape::Bridge => write!(f, " between them (a bridge: the third sees both)")?,
        }
        Ok(())
    }
}

/// The schedule for `total_ms` of workload with `workers` workers, `servers` servers and
/// leases of `lease_ms`: faults one at a time, 1–4 s apart, none in the first 2 s or the last
/// 3 s; with more than one server, each fault hits one or two of them (a minority of five).
pub fn schedule(
    seed: u64,
    total_ms: u64,
    workers: usize,
    servers: usize,
    lease_ms: u64,
    kinds: &FaultSet,
) -> Vec<Step> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut steps = Vec::new();
    if kinds.0.is_empty() || workers == 0 {
        return steps;
    }
    let mut t = 2_000;
    loop {
        let kind = kinds.0[rng.usize(..kinds.0.len())];
        let (duration_ms, targets) = match kind {
            FaultKind::Partition | FaultKind::Loss => {
                let n = rng.usize(1..=workers);
                let mut all: Vec<usize> = (1..=workers).collect();
                rng.shuffle(&mut all);
                let mut some = all[..n].to_vec();
                some.sort_unstable();
                (rng.u64(1_000..=5_000), some)
            }
            FaultKind::PauseServer => (rng.u64(500..=3_000), Vec::new()),
            FaultKind::Kill => (rng.u64(100..=1_000), Vec::new()),
            FaultKind::Failover => (rng.u64(1_000..=3_000), Vec::new()),
            FaultKind::PauseClient => (
                lease_ms + rng.u64(500..=2_500),
                vec![rng.usize(1..=workers)],
            ),
            // The server (0) or one worker; at least the lease, so a forward step on the
            // server ends every lease it holds.
            FaultKind::ClockJump => match rng.usize(0..=workers) {
                0 => (rng.u64(1_000..=4_000), Vec::new()),
                w => (rng.u64(1_000..=4_000), vec![w]),
            },
        };
        let clock_ms = if kind == FaultKind::ClockJump {
            let by = rng.i64(lease_ms as i64..=2 * lease_ms as i64);
            if rng.bool() { by } else { -by }
        } else {
            0
        };
        let loss_percent = if kind == FaultKind::Loss {
            rng.u8(20..=60)
        } else {
            0
        };
        // Drawn only with several servers, so one server's schedules stay as they were.
        let on_servers = if servers > 1 && (kind != FaultKind::ClockJump || targets.is_empty()) {
            let mut all: Vec<usize> = (1..=servers).collect();
            rng.shuffle(&mut all);
            // A clock step on several servers hits a majority: one or two RedLock servers whose
            // keys end early cannot give a second client a quorum, three can (what makes
            // RedLock unsafe under clock steps). Every other fault hits a minority.
            let n = if kind == FaultKind::ClockJump {
                servers / 2 + 1
            } else {
                rng.usize(1..=2.min(servers - 1))
            };
            let mut some = all[..n].to_vec();
            some.sort_unstable();
            some
        } else {
            Vec::new()
        };
        if t + duration_ms + 3_000 > total_ms {
            break;
        }
        steps.push(Step {
            at_ms: t,
            kind,
            duration_ms,
            workers: targets,
            loss_percent,
            clock_ms,
            servers: on_servers,
            leader: false,
            shape: Shape::Split,
        });
        t += duration_ms + rng.u64(1_000..=4_000);
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_schedule_and_another_seed_another() {
        let all: FaultSet = "all".parse().unwrap();
        let a = schedule(7, 120_000, 5, 1, 3_000, &all);
        assert_eq!(a, schedule(7, 120_000, 5, 1, 3_000, &all));
        assert_ne!(a, schedule(8, 120_000, 5, 1, 3_000, &all));
        assert!(a.len() > 10);
        // In bounds, one at a time.
        for w in a.windows(2) {
            assert!(w[0].at_ms + w[0].duration_ms < w[1].at_ms);
        }
        let last = a.last().unwrap();
        assert!(last.at_ms + last.duration_ms + 3_000 <= 120_000);
    }

    #[test]
    fn fault_sets_parse() {
        let s: FaultSet = "kill,partition,kill".parse().unwrap();
        assert_eq!(s.0, [FaultKind::Kill, FaultKind::Partition]);
        assert_eq!(s.to_string(), "kill,partition");
        assert!("none".parse::<FaultSet>().unwrap().0.is_empty());
        assert!("kill,clock".parse::<FaultSet>().is_err());
        let all: FaultSet = "all".parse().unwrap();
        assert!(!all.0.contains(&FaultKind::ClockJump));
        assert!(!all.0.contains(&FaultKind::Failover));
        let failovers: FaultSet = "all,failover".parse().unwrap();
        assert_eq!(
            failovers.to_string(),
            "partition,loss,pause-server,kill,pause-client,failover"
        );
        let jumps = schedule(3, 60_000, 3, 1, 3_000, &"clock-jump".parse().unwrap());
        assert!(!jumps.is_empty());
        for s in &jumps {
            assert_eq!(s.kind, FaultKind::ClockJump);
            assert!((3_000..=6_000).contains(&s.clock_ms.unsigned_abs()));
            assert!(s.workers.len() <= 1);
        }
        // Five servers: every fault hits one or two of them; a clock jump one worker, or a
        // majority of the servers (three).
        for s in schedule(9, 120_000, 3, 5, 3_000, &"all,clock-jump".parse().unwrap()) {
            if s.kind == FaultKind::ClockJump && !s.workers.is_empty() {
                assert!(s.servers.is_empty());
            } else if s.kind == FaultKind::ClockJump {
                assert_eq!(s.servers.len(), 3, "{s}");
            } else {
                assert!((1..=2).contains(&s.servers.len()), "{s}");
                assert!(s.servers.iter().all(|&n| (1..=5).contains(&n)));
            }
        }
        let only_kills = schedule(1, 60_000, 3, 1, 3_000, &"kill".parse().unwrap());
        assert!(only_kills.iter().all(|s| s.kind == FaultKind::Kill));
    }
}
