//! `keylatch-chaos`: runs keylatch's primitives in client processes, each in its own network
//! namespace, against redis-servers (or a ZooKeeper ensemble) in theirs, while a seeded
//! nemesis partitions, pauses and kills; records every operation and checks the history.
//!
//! Exit status: 0 when the checker found no violation, 1 when it found one (the shortest
//! counterexample is printed), 2 when the harness itself failed or was interrupted. The last
//! line of output is `N violations in M operations`.

mod bounds;
mod checker;
mod cli;
mod clock;
mod clockshift;
mod cluster;
mod history;
mod kinds;
mod locks;
mod nemesis;
mod net;
mod plan;
mod probes;
mod procs;
mod run;
mod servers;
mod shapes;
mod signals;
mod worker;
mod zookeeper;

use std::io::Write as _;
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use serde_json::json;

use crate::cli::{Cli, Command, RunArgs};
use crate::history::HoldMode;
use crate::procs::Cleanup;

/// A failure of the harness itself (exit status 2).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// A program the harness needs is not on PATH.
    #[error(
        "{0} is not installed (scripts/chaos.sh installs iproute2, nftables, a C compiler, ZooKeeper)"
    )]
    Missing(String),
    /// A command failed.
    #[error("command failed: {0}")]
    Command(String),
    /// An I/O or parsing failure.
    #[error("i/o: {0}")]
    Io(String),
    /// SIGINT, SIGTERM or SIGHUP.
    #[error("interrupted by {0}")]
    Interrupted(&'static str),
}

pub use crate::kinds::{Topology, Workload};

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

fn helper(work: impl Future<Output = Result<(), String>>) -> ExitCode {
    match runtime()
        .map_err(|e| e.to_string())
        .and_then(|rt| rt.block_on(work))
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keylatch-chaos: {e}");
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Cleanup { run }) => {
            for what in procs::cleanup_leftovers(run.as_deref()) {
                println!("removed {what}");
            }
            ExitCode::SUCCESS
        }
        Some(Command::Worker {
            run: _,
            harness_pid,
            id,
            server,
            oracle,
            workload,
            permits,
            replicas,
            seed,
            deadline_ns,
            lease_ms,
            mode,
            max_hold_ms,
        }) => {
            if std::os::unix::process::parent_id() != harness_pid {
                eprintln!("keylatch-chaos worker: the harness is gone");
                return ExitCode::from(2);
            }
            helper(worker::worker(worker::WorkerArgs {
                id,
                servers: server.split(';').map(str::to_owned).collect(),
                workload,
                permits,
                replicas,
                oracle,
                seed,
                deadline_ns,
                lease_ms,
                mode,
                max_hold_ms,
            }))
        }
        Some(Command::Probe { url }) => helper(worker::probe(&url, Duration::from_secs(10))),
        Some(Command::DumpRegister { url }) => helper(worker::dump_register(&url)),
        Some(Command::ServerTime { url }) => helper(worker::server_time(&url)),
        Some(Command::FormCluster { nodes }) => helper(async move {
            cluster::form(&nodes.split(',').map(str::to_owned).collect::<Vec<_>>()).await
        }),
        Some(Command::ClusterFailover { node }) => helper(cluster::failover(&node)),
        Some(Command::LockPrimary { nodes }) => helper(async move {
            cluster::lock_primary(&nodes.split(',').map(str::to_owned).collect::<Vec<_>>()).await
        }),
        Some(Command::ZkSrvr { addrs, wait }) => helper(async move {
            let addrs: Vec<String> = addrs.split(',').map(str::to_owned).collect();
            zookeeper::srvr_helper(&addrs, wait).await
        }),
        Some(Command::Check { history, bounds }) => bounds::check_file(&history, &bounds),
        None => harness(cli.run),
    }
}

/// Prints `line` to stdout at once.
pub(crate) fn say(line: String) {
    println!("{line}");
    let _ = std::io::stdout().flush();
}

fn harness(args: RunArgs) -> ExitCode {
    let Some(seed) = args.seed else {
        eprintln!("keylatch-chaos: --seed is required");
        return ExitCode::from(2);
    };
    if !(args.minutes > 0.0 && args.minutes <= 24.0 * 60.0) {
        eprintln!("keylatch-chaos: --minutes must be above 0 and at most 1440");
        return ExitCode::from(2);
    }
    if (args.topology == Topology::Redlock5) != (args.workload == Workload::Redlock) {
        eprintln!(
            "keylatch-chaos: the redlock workload runs on the redlock5 topology, and only it"
        );
        return ExitCode::from(2);
    }
    if args.topology.is_zookeeper() && args.mode == HoldMode::Lease {
        eprintln!(
            "keylatch-chaos: zk3 has no fixed lease (a hold lasts while the session does): \
             --mode watchdog only"
        );
        return ExitCode::from(2);
    }
    let mut nemesis = args.nemesis.clone();
    let failover = nemesis::FaultKind::Failover;
    if args.topology.is_cluster() {
        if nemesis::FaultKind::ALL
            .iter()
            .all(|k| nemesis.0.contains(k))
            && !nemesis.0.contains(&failover)
        {
            nemesis.0.push(failover);
        }
    } else if nemesis.0.contains(&failover) {
        eprintln!("keylatch-chaos: the failover fault is for the cluster topologies only");
        return ExitCode::from(2);
    }
    if args.aim == run::Aim::Lock && !args.topology.is_cluster() {
        eprintln!("keylatch-chaos: --aim lock is for the cluster topologies only");
        return ExitCode::from(2);
    }
    let plan = run::Plan {
        seed,
        duration: Duration::from_secs_f64(args.minutes * 60.0),
        topology: args.topology,
        workload: args.workload,
        nemesis,
        workers: usize::from(args.workers),
        lease_ms: args.lease_ms,
        mode: args.mode,
        max_hold_ms: args.max_hold_ms,
        permits: args.permits,
        panic_after: args.panic_after.map(Duration::from_secs_f64),
        aim: args.aim,
    };
    let schedule = plan.schedule();
    say(format!(
        "keylatch-chaos --seed {seed} --minutes {} --topology {} --workload {} --mode {} \
         --nemesis {} --workers {} --lease-ms {} --max-hold-ms {}: {} faults scheduled",
        args.minutes,
        plan.topology,
        plan.workload,
        plan.mode,
        plan.nemesis,
        plan.workers,
        plan.lease_ms,
        plan.max_hold_ms,
        schedule.len()
    ));

    let cleanup = Cleanup::new();
    let started = std::time::Instant::now();
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let rt = runtime().map_err(|e| HarnessError::Io(e.to_string()))?;
        rt.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            let sig = |k| signal(k).map_err(|e| HarnessError::Io(e.to_string()));
            let (mut int, mut term, mut hup) = (
                sig(SignalKind::interrupt())?,
                sig(SignalKind::terminate())?,
                sig(SignalKind::hangup())?,
            );
            tokio::select! {
                r = run::run(&plan, &cleanup, &say) => r,
                _ = int.recv() => Err(HarnessError::Interrupted("SIGINT")),
                _ = term.recv() => Err(HarnessError::Interrupted("SIGTERM")),
                _ = hup.recv() => Err(HarnessError::Interrupted("SIGHUP")),
            }
        })
    }));
    cleanup.run();
    let collected = match outcome {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            eprintln!("keylatch-chaos: {e}; everything the run created was removed");
            return ExitCode::from(2);
        }
        Err(_) => {
            eprintln!(
                "keylatch-chaos: the harness panicked; everything the run created was removed"
            );
            return ExitCode::from(2);
        }
    };

    let report = checker::check_with(
        &collected.history,
        Some(&collected.register_log),
        Some(collected.counter),
        args.bounds.bounds(),
    );
    if let Some(path) = &args.history {
        let mut text = String::new();
        for e in &collected.history {
            if let Ok(line) = serde_json::to_string(e) {
                text.push_str(&line);
                text.push('\n');
            }
        }
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("keylatch-chaos: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if report.acquisitions == 0 {
        eprintln!("keylatch-chaos: no acquisition succeeded: the run shows nothing");
        return ExitCode::from(2);
    }
    let counterexample = report
        .shortest()
        .map(|v| checker::timeline(&collected.history, v, collected.origin));
    let faults = collected
        .history
        .iter()
        .filter(|e| e.process == history::NEMESIS && e.kind == history::Kind::Invoke)
        .count();
    say(format!(
        "{} acquisitions acknowledged, {} of unknown outcome (taken as possibly held); {} faults injected",
        report.acquisitions, report.possibly_held, faults
    ));
    say(bounds::damage_lines(&report));
    say(bounds::coverage_line(&report.liveness));
    for (kind, n) in report.counts() {
        say(format!("  {kind}: {n}"));
    }
    if let Some(text) = &counterexample {
        say(text.trim_end().to_owned());
    }
    if let Some(path) = &args.out {
        let summary = json!({
            "seed": seed,
            "minutes": args.minutes,
            "topology": plan.topology.to_string(),
            "workload": plan.workload.to_string(),
            "nemesis": plan.nemesis.to_string(),
            "workers": plan.workers,
            "mode": plan.mode.to_string(),
            "lease_ms": plan.lease_ms,
            "max_hold_ms": plan.max_hold_ms,
            "elapsed_s": started.elapsed().as_secs_f64(),
            "operations": report.operations,
            "acquisitions": report.acquisitions,
            "writes_accepted": report.writes_accepted,
            "writes_refused": report.writes_refused,
            "late_writes_accepted": report.late_writes_accepted,
            "late_writes_refused": report.late_writes_refused,
            "register_log_entries": collected.register_log.len(),
            "faults": faults,
            "faults_injected": faults,
            "possibly_held": report.possibly_held,
            "updates": report.updates,
            "updates_skipped": report.updates_skipped,
            "counter": collected.counter,
            "lost_updates": report.lost_updates,
            "damage_seen": report.lost_updates,
            "damage_prevented_by_fencing": report.writes_refused,
            "holds_cut_at_pause": report.holds_cut_at_pause,
            "linearizability": report.linearizability,
            "violations": report.violations.len(),
            "violations_by_kind": report.counts(),
            "liveness": report.liveness,
            "counterexample": counterexample,
            "schedule": schedule,
        });
        let text = serde_json::to_string_pretty(&summary).unwrap_or_default();
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("keylatch-chaos: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    say(format!(
        "{} violations in {} operations",
        report.violations.len(),
        report.operations
    ));
    if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
