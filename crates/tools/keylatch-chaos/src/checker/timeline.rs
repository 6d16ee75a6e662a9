//! A violation as a timeline of the events around it, for the run's report.

use std::fmt::Write as _;

use super::Violation;
use crate::history::{Event, NEMESIS};

/// The violation as a timeline: every event of its processes and of the nemesis from the
/// window's start to its end, times relative to `origin`.
pub fn timeline(history: &[Event], v: &Violation, origin: u64) -> String {
    let mut events: Vec<&Event> = history
        .iter()
        .filter(|e| e.time >= v.from && e.time <= v.to)
        .filter(|e| e.process == NEMESIS || v.processes.contains(&e.process))
        .collect();
    events.sort_by_key(|e| e.time);
    let mut out = format!("counterexample ({:?}): {}\n", v.kind, v.description);
    for e in events {
        let secs = e.time.saturating_sub(origin) as f64 / 1e9;
        let what = format!("{:?}", e.op).to_lowercase();
        let kind = format!("{:?}", e.kind).to_lowercase();
        let mut line = format!("  {secs:>10.3}s  {:<8} {:<6} {:<8}", e.process, kind, what);
        if let Some(t) = e.token {
            let _ = write!(line, " token={t}");
        }
        if let Some(l) = e.lease_ms {
            let _ = write!(line, " lease={l}ms");
        }
        if let Some(l) = e.watchdog_ms {
            let _ = write!(line, " watchdog={l}ms");
        }
        if let Some(v) = e.value {
            let _ = write!(line, " value={v}");
        }
        if let Some(m) = e.mode {
            let _ = write!(line, " {m}");
        }
        if let Some(names) = &e.names {
            let _ = write!(line, " names={}", names.join(","));
        }
        if let Some(id) = &e.write_id {
            let _ = write!(line, " id={id}");
        }
        if let Some(d) = &e.detail {
            let _ = write!(line, " ({d})");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
