//! The `check` subcommand: checks a history file written with `--history` again.

use std::process::ExitCode;

use crate::{checker, history, say};

/// Checks the history in `path` (without the register's log, so without the lost-write
/// check); exit status as for a run.
pub fn check_file(path: &std::path::Path) -> ExitCode {
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
    let report = checker::check(&events, None);
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
