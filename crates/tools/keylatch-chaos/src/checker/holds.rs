//! Holders' intervals, and which of them exclude each other.

use super::{Mode, Op, Operation, Violation, ViolationKind, fmt_token};

/// A holder's interval.
#[derive(Debug, Clone)]
pub(super) struct Hold {
    pub(super) process: String,
    pub(super) token: Option<u64>,
    pub(super) acquire_invoke: u64,
    pub(super) start: u64,
    pub(super) end: u64,
    /// A read hold (shared with other reads).
    pub(super) shared: bool,
    /// The side of a read-write lock.
    pub(super) mode: Option<Mode>,
    /// The names held; empty: the one lock.
    pub(super) names: Vec<String>,
}

impl Hold {
    /// The names both hold, if they exclude each other (not both reads).
    pub(super) fn conflict(&self, other: &Hold) -> Option<String> {
        if self.shared && other.shared {
            return None;
        }
        if self.names.is_empty() && other.names.is_empty() {
            return Some(String::new());
        }
        let common: Vec<&str> = self
            .names
            .iter()
            .filter(|n| other.names.contains(n))
            .map(String::as_str)
            .collect();
        (!common.is_empty()).then(|| common.join(","))
    }

    pub(super) fn describe(&self) -> String {
        if !self.names.is_empty() {
            return format!("{} (of {})", self.process, self.names.join(","));
        }
        let token = format!("token {}", fmt_token(self.token));
        match self.mode {
            Some(m) if self.token.is_some() => format!("{} ({m}, {token})", self.process),
            Some(m) => format!("{} ({m})", self.process),
            None => format!("{} ({token})", self.process),
        }
    }
}

pub(super) fn holds(ops: &[Operation], end_of_run: u64) -> Vec<Hold> {
    let mut holds = Vec::new();
    for (i, o) in ops.iter().enumerate() {
        if o.op != Op::Acquire || !o.is_ok() {
            continue;
        }
        let start = o.done_at().unwrap_or(o.invoke);
        let lease_end = o.lease_end();
        // The process's next release, before its next acquire.
        let release = ops[i + 1..]
            .iter()
            .filter(|n| n.process == o.process)
            .take_while(|n| n.op != Op::Acquire)
            .find(|n| n.op == Op::Release);
        let end = match release {
            Some(r) => r.invoke.min(lease_end),
            None => end_of_run.min(lease_end),
        };
        holds.push(Hold {
            process: o.process.clone(),
            token: o.token,
            acquire_invoke: o.invoke,
            start,
            end: end.max(start),
            shared: o.mode == Some(Mode::Read),
            mode: o.mode,
            names: o.names.clone().unwrap_or_default(),
        });
    }
    holds
}

/// Holds (sorted by start) of more than `permits` holders at once: at each hold's start, the
/// holds that began before and have not ended.
pub(super) fn occupancy(hs: &[Hold], permits: usize) -> Vec<Violation> {
    let mut found = Vec::new();
    for (i, b) in hs.iter().enumerate() {
        if b.start >= b.end {
            continue;
        }
        let at_once: Vec<&Hold> = hs[..=i]
            .iter()
            .filter(|a| a.start <= b.start && b.start < a.end)
            .collect();
        if at_once.len() > permits {
            found.push(Violation {
                kind: ViolationKind::Occupancy,
                description: format!(
                    "{} holders at once with {permits} permits: {}",
                    at_once.len(),
                    at_once
                        .iter()
                        .map(|h| h.process.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                from: at_once
                    .iter()
                    .map(|h| h.acquire_invoke)
                    .min()
                    .unwrap_or(b.start),
                to: at_once.iter().map(|h| h.end).min().unwrap_or(b.end),
                processes: at_once.iter().map(|h| h.process.clone()).collect(),
            });
        }
    }
    found
}
