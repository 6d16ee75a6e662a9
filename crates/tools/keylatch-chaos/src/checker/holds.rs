//! Holders' intervals, and which of them exclude each other.

use std::collections::BTreeMap;

use super::{Event, Kind, Mode, NEMESIS, Op, Operation, Violation, ViolationKind, fmt_token};

/// A holder's interval.
#[derive(Debug, Clone)]
pub(super) struct Hold {
    pub(super) process: String,
    pub(super) token: Option<u64>,
    pub(super) acquire_invoke: u64,
    pub(super) start: u64,
    pub(super) end: u64,
    /// The end before it is raised to the start (a fixed lease that ran out before the `ok`):
    /// where the release may take effect from.
    pub(super) end_raw: u64,
    /// A read hold (shared with other reads).
    pub(super) shared: bool,
    /// The side of a read-write lock.
    pub(super) mode: Option<Mode>,
    /// The names held; empty: the one lock.
    pub(super) names: Vec<String>,
    /// A watchdog hold that ends where the nemesis stopped its process.
    pub(super) cut_at_pause: bool,
    /// The release's completion, when it succeeded (the lock is free by then).
    pub(super) released: Option<u64>,
}

/// What the history shows besides operations: where workers saw their holds lost, when the
/// nemesis stopped which worker, when workers wrote the unfenced counter.
#[derive(Debug, Default)]
pub(super) struct Seen {
    /// Per process, the times it recorded a lost hold.
    lost: BTreeMap<String, Vec<u64>>,
    /// Per process, the windows (stop, continue) the nemesis paused it.
    paused: BTreeMap<String, Vec<(u64, u64)>>,
    /// Per process, when its unfenced write-backs completed (or timed out).
    updates: BTreeMap<String, Vec<u64>>,
}

impl Seen {
    /// Reads them from `history` (sorted by time).
    pub(super) fn from_history(history: &[Event]) -> Seen {
        let mut seen = Seen::default();
        let mut pausing: Vec<(String, u64)> = Vec::new();
        for e in history {
            if e.process == NEMESIS {
                let detail = e.detail.as_deref().unwrap_or("");
                if e.kind == Kind::Info
                    && let Some(list) = detail.strip_prefix("pausing ")
                {
                    pausing = list.split(',').map(|p| (p.to_owned(), e.time)).collect();
                } else if e.kind == Kind::Ok {
                    for (p, from) in pausing.drain(..) {
                        seen.paused.entry(p).or_default().push((from, e.time));
                    }
                }
            } else if e.op == Op::Lost {
                seen.lost.entry(e.process.clone()).or_default().push(e.time);
            } else if e.op == Op::Update && matches!(e.kind, Kind::Ok | Kind::Info) {
                seen.updates
                    .entry(e.process.clone())
                    .or_default()
                    .push(e.time);
            }
        }
        seen
    }

    /// The first loss `process` saw in `(from, to]`.
    fn lost_between(&self, process: &str, from: u64, to: u64) -> Option<u64> {
        self.lost
            .get(process)?
            .iter()
            .copied()
            .find(|&t| t > from && t <= to)
    }

    /// Where a watchdog hold of `process` from `start` that saw its loss at `lost` ends, if
    /// the nemesis stopped the process in between for at least the watchdog timeout
    /// (`timeout`) and it wrote no unfenced update from the stop to the loss: the stop. (The
    /// loss may be recorded before the nemesis records its heal: the worker runs again as soon
    /// as it is continued.)
    fn stopped_before(&self, process: &str, start: u64, lost: u64, timeout: u64) -> Option<u64> {
        let (stop, _) = self
            .paused
            .get(process)?
            .iter()
            .copied()
            .find(|&(stop, cont)| stop >= start && stop < lost && cont - stop >= timeout)?;
        let wrote = self
            .updates
            .get(process)
            .is_some_and(|us| us.iter().any(|&t| t > stop && t < lost));
        (!wrote).then_some(stop)
    }
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

pub(super) fn holds(ops: &[Operation], seen: &Seen, end_of_run: u64) -> Vec<Hold> {
    let mut holds = Vec::new();
    for (i, o) in ops.iter().enumerate() {
        if o.op != Op::Acquire || !o.is_ok() {
            continue;
        }
        let start = o.done_at().unwrap_or(o.invoke);
        // The process's next release, before its next acquire.
        let release = ops[i + 1..]
            .iter()
            .filter(|n| n.process == o.process)
            .take_while(|n| n.op != Op::Acquire)
            .find(|n| n.op == Op::Release);
        let mut end = release.map_or(end_of_run, |r| r.invoke).min(o.lease_end());
        let mut cut_at_pause = false;
        if o.lease_ms.is_none()
            && let Some(lost) = seen.lost_between(&o.process, start, end)
        {
            end = lost;
            let timeout = o.watchdog_ms.unwrap_or(0) * 1_000_000;
            if let Some(stop) = seen.stopped_before(&o.process, start, lost, timeout) {
                end = stop;
                cut_at_pause = true;
            }
        }
        holds.push(Hold {
            process: o.process.clone(),
            token: o.token,
            acquire_invoke: o.invoke,
            start,
            end: end.max(start),
            end_raw: end,
            shared: o.mode == Some(Mode::Read),
            mode: o.mode,
            names: o.names.clone().unwrap_or_default(),
            cut_at_pause,
            released: release.and_then(|r| match r.done {
                Some((Kind::Ok, t)) => Some(t),
                _ => None,
            }),
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
