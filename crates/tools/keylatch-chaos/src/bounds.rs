//! The checker's command-line side: the liveness checks' bounds, and `check` of a written
//! history.

use std::process::ExitCode;

use crate::checker::{self, Bounds, Coverage};
use crate::{history, say};

/// The liveness checks' bounds (see `checker::liveness`).
#[derive(Debug, Clone, clap::Args)]
pub struct BoundsArgs {
    /// A waiter that sees the lock free for longer than this, outside faults, was not woken
    /// (a violation), in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub wake_bound_ms: u64,
    /// How long after its invoke an acquisition has surely joined the queue (the fair order
    /// check), in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub arrival_margin_ms: u64,
    /// How long a healed fault's effects may last (the liveness checks skip it), in
    /// milliseconds.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub settle_ms: u64,
}

impl BoundsArgs {
    /// The bounds, in nanoseconds.
    pub fn bounds(&self) -> Bounds {
        Bounds {
            wake_ns: self.wake_bound_ms * 1_000_000,
            arrival_ns: self.arrival_margin_ms * 1_000_000,
            settle_ns: self.settle_ms * 1_000_000,
        }
    }
}

/// One line saying what the liveness checks covered.
pub fn coverage_line(c: &Coverage) -> String {
    format!(
        "liveness outside faults: {:.1} s of waiting checked (longest free wait {} ms), {} arrival-order pairs checked",
        c.wait_checked_ms as f64 / 1000.0,
        c.longest_free_wait_ms,
        c.order_pairs_checked
    )
}

/// The run's figures of damage: what the unfenced counter lost, what fencing refused, and
/// what the linearizability check did.
pub fn damage_lines(r: &checker::Report) -> String {
    let counter = r
        .counter
        .map_or_else(|| "not read".to_owned(), |c| c.to_string());
    format!(
        "damage seen: {} lost updates in the unfenced counter ({} updates acknowledged, {} skipped \
         as the hold was over, final value {counter})\n\
         damage prevented by fencing: {} stale writes refused by the register ({} of them after \
         the writer's hold had ended); {} accepted, {} of them after the writer's hold had ended\n\
         linearizability (Wing-Gong-Lowe): {} objects, {} operations, {} not linearizable, {} \
         without a verdict (budget); {} watchdog holds cut where the nemesis stopped the holder",
        r.lost_updates,
        r.updates,
        r.updates_skipped,
        r.writes_refused,
        r.late_writes_refused,
        r.writes_accepted,
        r.late_writes_accepted,
        r.linearizability.objects,
        r.linearizability.operations,
        r.linearizability.not_linearizable,
        r.linearizability.unknown,
        r.holds_cut_at_pause,
    )
}

/// The `check` subcommand: checks the history at `path` again (without the register's log).
pub fn check_file(path: &std::path::Path, bounds: &BoundsArgs) -> ExitCode {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("keylatch-chaos: cannot read {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    let mut events = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        match serde_json::from_str::<history::Event>(line) {
            Ok(e) => events.push(e),
            Err(e) => {
                eprintln!("keylatch-chaos: {} line {}: {e}", path.display(), n + 1);
                return ExitCode::from(2);
            }
        }
    }
    let report = checker::check_with(&events, None, None, bounds.bounds());
    say(damage_lines(&report));
    say(coverage_line(&report.liveness));
    let origin = events.iter().map(|e| e.time).min().unwrap_or(0);
    for (kind, n) in report.counts() {
        say(format!("  {kind}: {n}"));
    }
    if let Some(v) = report.shortest() {
        say(checker::timeline(&events, v, origin).trim_end().to_owned());
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
