//! The checker: reads a history (and the register's log) and knows nothing of keylatch.
//!
//! The checker owns its judgement: a hold's end comes from what the worker asked and saw, never
//! from the library's own idea of its validity.
//!
//! - **Hold ends**: a holder's interval runs from the `ok` of its acquire to the first of: the
//!   `invoke` of its release; for a fixed lease, the acquire's `invoke` + the requested lease
//!   less the drift the docs state (1 % + 2 ms; the server started the lease after the
//!   invoke); for a watchdog hold, the moment the worker recorded that it saw the hold lost
//!   (`lost`). A watchdog holder the nemesis stopped (SIGSTOP) and that, once running again,
//!   saw the loss before any unfenced update, held until it was stopped: a stopped process
//!   does nothing. A holder that never invoked a release holds to that end or the end of the
//!   run. An acquisition of unknown outcome (`info`: a timeout, a reset) may hold from its
//!   invoke to its lease's end: it is never taken as a holder (nothing observed it), but it
//!   keeps the lock busy for the liveness checks, and the linearizability check may or may
//!   not place it.
//! - **Mutual exclusion**: two intervals of different acquisitions that intersect are a
//!   violation, unless both are reads (acquires that record `mode` read) or they share no name
//!   (acquires that record `names` take each of them; without, the one lock).
//! - **Occupancy** (a semaphore: acquires that record `permits` N above 1): instead of the
//!   above, more than N intervals at once are a violation.
//! - **Fencing tokens**: an acquisition that began after another one was acknowledged must get a
//!   greater token.
//! - **Fenced register**: a write accepted after another accepted write was acknowledged must
//!   carry a greater token (a stale write accepted); every acknowledged write must be in the
//!   register's final log (a lost write); the log's tokens strictly increase.
//! - **Unfenced counter** (damage): each exclusive hold reads a plain counter, waits, and
//!   writes back what it read plus one. Two updates that wrote the same value, or a final
//!   value below the number of acknowledged updates, are lost updates: the damage a double
//!   holder does to data no token guards.
//! - **Linearizability** of each lock's acquires and releases against a mutex (or a
//!   semaphore, or a read-write lock) model, by Wing–Gong–Lowe search ([`wgl`]).
//! - **Liveness outside faults**: no lost wake-up, and arrival order for a fifo lock (see
//!   [`liveness`]).

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use crate::history::{Event, Kind, Mode, NEMESIS, Op};

mod holds;
mod timeline;
pub use timeline::timeline;
pub mod liveness;
pub mod wgl;
use holds::{holds, occupancy};
pub use liveness::{Bounds, Coverage};

/// The kinds of violation the checker finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ViolationKind {
    /// Two holders at once.
    MutualExclusion,
    /// More holders at once than the semaphore's permits.
    Occupancy,
    /// A later acquisition got a token not greater than an earlier acknowledged one.
    TokenOrder,
    /// The register accepted a write whose token was not greater than an accepted one.
    StaleWrite,
    /// An acknowledged write is missing from the register.
    LostWrite,
    /// An unfenced update was overwritten by another holder's (the damage of two holders).
    LostUpdate,
    /// No order of the acquires and releases within their windows fits the lock's model.
    NotLinearizable,
    /// A waiter saw the lock free, outside faults, for longer than the wake bound.
    LostWakeup,
    /// A fifo lock went to a later arrival first.
    FairOrder,
}

/// One violation, with the window of the history that shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    /// What was violated.
    pub kind: ViolationKind,
    /// One line saying how.
    pub description: String,
    /// The window's start (history time, ns).
    pub from: u64,
    /// The window's end.
    pub to: u64,
    /// The processes involved.
    pub processes: Vec<String>,
}

/// What the checker found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Operations invoked by workers.
    pub operations: usize,
    /// Acquisitions acknowledged.
    pub acquisitions: usize,
    /// Writes the register acknowledged as accepted.
    pub writes_accepted: usize,
    /// Writes the register refused.
    pub writes_refused: usize,
    /// Writes invoked after the writer's hold had ended that the register still accepted: no
    /// violation, as no newer token had reached it (the limit of fencing), but worth seeing.
    pub late_writes_accepted: usize,
    /// Writes invoked after the writer's hold had ended that the register refused: damage
    /// fencing prevented.
    pub late_writes_refused: usize,
    /// Unfenced updates acknowledged.
    pub updates: usize,
    /// Updates skipped because the worker saw its hold over before the write-back.
    pub updates_skipped: usize,
    /// The counter's final value, if read.
    pub counter: Option<u64>,
    /// Lost updates: the damage seen in the unfenced counter.
    pub lost_updates: usize,
    /// Acquisitions of unknown outcome (possibly held).
    pub possibly_held: usize,
    /// Watchdog holds cut where the nemesis stopped the holder (see the module's docs).
    pub holds_cut_at_pause: usize,
    /// What the linearizability check did.
    pub linearizability: wgl::Summary,
    /// What the liveness checks covered.
    pub liveness: Coverage,
    /// Every violation.
    pub violations: Vec<Violation>,
}

impl Report {
    /// The violation with the shortest window, if any; one of the linearizability search's
    /// only when nothing else shows (its window says less: where the search got stuck).
    pub fn shortest(&self) -> Option<&Violation> {
        self.violations
            .iter()
            .min_by_key(|v| (v.kind == ViolationKind::NotLinearizable, v.to - v.from))
    }

    /// Violations counted by kind.
    pub fn counts(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for v in &self.violations {
            let name = serde_json::to_value(v.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            *counts.entry(name).or_insert(0) += 1;
        }
        counts
    }
}

/// An operation: an invoke and its completion, if one was recorded.
#[derive(Debug, Clone)]
struct Operation {
    process: String,
    op: Op,
    invoke: u64,
    done: Option<(Kind, u64)>,
    token: Option<u64>,
    lease_ms: Option<u64>,
    watchdog_ms: Option<u64>,
    value: Option<u64>,
    permits: Option<u32>,
    write_id: Option<String>,
    mode: Option<Mode>,
    names: Option<Vec<String>>,
    fifo: bool,
}

impl Operation {
    /// A fixed-lease acquisition's end: its invoke + the lease less the drift the docs state
    /// (`u64::MAX` for a watchdog hold, which ends at a release or a seen loss).
    fn lease_end(&self) -> u64 {
        let Some(ms) = self.lease_ms else {
            return u64::MAX;
        };
        let lease = ms * 1_000_000;
        let drift = lease / 100 + 2_000_000;
        self.invoke.saturating_add(lease - drift.min(lease))
    }

    fn is_ok(&self) -> bool {
        matches!(self.done, Some((Kind::Ok, _)))
    }
    fn done_at(&self) -> Option<u64> {
        self.done.map(|(_, t)| t)
    }
}

/// Pairs each process's invokes with their completions (a process runs one operation of a
/// kind at a time; an update spans the fenced write of its hold). An invoke followed by
/// another invoke of the same process and kind stays incomplete.
fn operations(history: &[Event]) -> Vec<Operation> {
    let mut ops: Vec<Operation> = Vec::new();
    let mut open: BTreeMap<(&str, u8), usize> = BTreeMap::new();
    for e in history
        .iter()
        .filter(|e| e.process != NEMESIS && e.op != Op::Lost)
    {
        match e.kind {
            Kind::Invoke => {
                open.insert((&e.process, e.op as u8), ops.len());
                ops.push(Operation {
                    process: e.process.clone(),
                    op: e.op,
                    invoke: e.time,
                    done: None,
                    token: e.token,
                    lease_ms: e.lease_ms,
                    watchdog_ms: e.watchdog_ms,
                    value: None,
                    permits: e.permits,
                    write_id: e.write_id.clone(),
                    mode: e.mode,
                    names: e.names.clone(),
                    fifo: e.fifo == Some(true),
                });
            }
            kind => {
                if let Some(i) = open.remove(&(e.process.as_str(), e.op as u8)) {
                    let o = &mut ops[i];
                    if o.op == e.op {
                        o.done = Some((kind, e.time));
                        if o.token.is_none() {
                            o.token = e.token;
                        }
                        o.value = e.value;
                    }
                }
            }
        }
    }
    ops
}

/// When the acquisition `w` was made under was invoked (the process's last acquire before it).
fn acquired_before(ops: &[Operation], w: &Operation) -> Option<u64> {
    ops.iter()
        .filter(|o| o.process == w.process && o.op == Op::Acquire && o.invoke < w.invoke)
        .map(|o| o.invoke)
        .max()
}

fn fmt_token(t: Option<u64>) -> String {
    t.map_or_else(|| "?".to_owned(), |t| t.to_string())
}

/// Checks `history` with the default liveness [`Bounds`] (see [`check_with`]).
#[cfg(test)]
pub fn check(history: &[Event], register_log: Option<&[(u64, String)]>) -> Report {
    check_with(history, register_log, None, Bounds::default())
}

/// Checks `history`; `register_log` is the register's accepted writes in order (token, write
/// id), `None` when it could not be read (the lost-write check is then skipped); `counter` the
/// unfenced counter's final value (`None`: only duplicates show lost updates).
pub fn check_with(
    history: &[Event],
    register_log: Option<&[(u64, String)]>,
    counter: Option<u64>,
    bounds: Bounds,
) -> Report {
    let mut history = history.to_vec();
    history.sort_by_key(|e| e.time);
    let end_of_run = history.last().map_or(0, |e| e.time);
    let ops = operations(&history);
    let mut violations = Vec::new();

    // Mutual exclusion, or occupancy with more than one permit.
    let seen = holds::Seen::from_history(&history);
    let mut hs = holds(&ops, &seen, end_of_run);
    let holds_cut_at_pause = hs.iter().filter(|h| h.cut_at_pause).count();
    hs.sort_by_key(|h| h.start);
    let permits = ops
        .iter()
        .filter_map(|o| o.permits)
        .max()
        .map_or(1, |p| p as usize);
    if permits > 1 {
        violations.extend(occupancy(&hs, permits));
    }
    for (i, a) in hs.iter().enumerate().filter(|_| permits == 1) {
        for b in hs[i + 1..].iter().take_while(|b| b.start < a.end) {
            let Some(common) = a.conflict(b) else {
                continue;
            };
            if b.start < b.end {
                let what = if common.is_empty() {
                    "the lock".to_owned()
                } else {
                    common
                };
                violations.push(Violation {
                    kind: ViolationKind::MutualExclusion,
                    description: format!("{} and {} both held {what}", a.describe(), b.describe()),
                    from: a.acquire_invoke,
                    to: a.end.min(b.end),
                    processes: vec![a.process.clone(), b.process.clone()],
                });
            }
        }
    }

    // Token order among acknowledged acquisitions.
    let acquired: Vec<&Operation> = ops
        .iter()
        .filter(|o| o.op == Op::Acquire && o.is_ok() && o.token.is_some())
        .collect();
    for b in &acquired {
        // The latest-acknowledged earlier acquisition with a token >= b's.
        let witness = acquired
            .iter()
            .filter(|a| a.done_at().is_some_and(|t| t < b.invoke) && a.token >= b.token)
            .max_by_key(|a| a.done_at());
        if let Some(a) = witness {
            violations.push(Violation {
                kind: ViolationKind::TokenOrder,
                description: format!(
                    "{} got token {} after {} had been acknowledged token {}",
                    b.process,
                    fmt_token(b.token),
                    a.process,
                    fmt_token(a.token)
                ),
                from: a.invoke,
                to: b.done_at().unwrap_or(b.invoke),
                processes: vec![a.process.clone(), b.process.clone()],
            });
        }
    }

    // The fenced register, from the clients' side.
    let accepted: Vec<&Operation> = ops
        .iter()
        .filter(|o| o.op == Op::Write && o.is_ok())
        .collect();
    for y in &accepted {
        let witness = accepted
            .iter()
            .filter(|x| x.done_at().is_some_and(|t| t < y.invoke) && x.token >= y.token)
            .max_by_key(|x| x.done_at());
        if let Some(x) = witness {
            violations.push(Violation {
                kind: ViolationKind::StaleWrite,
                description: format!(
                    "the register accepted {}'s write with token {} after accepting {}'s with token {}",
                    y.process,
                    fmt_token(y.token),
                    x.process,
                    fmt_token(x.token)
                ),
                // From the stale writer's acquisition, to show how its token got old.
                from: x.invoke.min(acquired_before(&ops, y).unwrap_or(y.invoke)),
                to: y.done_at().unwrap_or(y.invoke),
                processes: vec![x.process.clone(), y.process.clone()],
            });
        }
    }

    // The fenced register, from its own log.
    if let Some(log) = register_log {
        for pair in log.windows(2) {
            if pair[1].0 <= pair[0].0 {
                let (x, y) = (&pair[0], &pair[1]);
                let find = |id: &str| ops.iter().find(|o| o.write_id.as_deref() == Some(id));
                let (ox, oy) = (find(&x.1), find(&y.1));
                violations.push(Violation {
                    kind: ViolationKind::StaleWrite,
                    description: format!(
                        "the register's log has token {} ({}) after token {} ({})",
                        y.0, y.1, x.0, x.1
                    ),
                    from: ox.map_or(0, |o| o.invoke),
                    to: oy.and_then(Operation::done_at).unwrap_or(end_of_run),
                    processes: [ox, oy]
                        .iter()
                        .flatten()
                        .map(|o| o.process.clone())
                        .collect(),
                });
            }
        }
        let logged: HashSet<&str> = log.iter().map(|(_, id)| id.as_str()).collect();
        for w in &accepted {
            let id = w.write_id.as_deref().unwrap_or("");
            if !logged.contains(id) {
                violations.push(Violation {
                    kind: ViolationKind::LostWrite,
                    description: format!(
                        "{}'s write {id} with token {} was acknowledged but is not in the register",
                        w.process,
                        fmt_token(w.token)
                    ),
                    from: w.invoke,
                    to: w.done_at().unwrap_or(w.invoke),
                    processes: vec![w.process.clone()],
                });
            }
        }
    }

    // The unfenced counter: the damage.
    let updates: Vec<&Operation> = ops
        .iter()
        .filter(|o| o.op == Op::Update && o.is_ok())
        .collect();
    let mut by_value: BTreeMap<u64, Vec<&Operation>> = BTreeMap::new();
    for u in &updates {
        by_value.entry(u.value.unwrap_or(0)).or_default().push(u);
    }
    let mut duplicates = 0;
    for (value, us) in by_value.iter().filter(|(_, us)| us.len() > 1) {
        duplicates += us.len() - 1;
        violations.push(Violation {
            kind: ViolationKind::LostUpdate,
            description: format!(
                "{} updates wrote the counter's value {value}: each read {}, so {} of them were lost ({})",
                us.len(),
                value - 1,
                us.len() - 1,
                us.iter()
                    .map(|u| u.process.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            from: us.iter().map(|u| u.invoke).min().unwrap_or(0),
            to: us.iter().filter_map(|u| u.done_at()).max().unwrap_or(end_of_run),
            processes: us.iter().map(|u| u.process.clone()).collect(),
        });
    }
    let short = counter.map_or(0, |c| updates.len().saturating_sub(c as usize));
    if short > duplicates {
        violations.push(Violation {
            kind: ViolationKind::LostUpdate,
            description: format!(
                "the counter ends at {} after {} acknowledged updates: {} lost",
                counter.unwrap_or(0),
                updates.len(),
                short
            ),
            from: 0,
            to: end_of_run,
            processes: Vec::new(),
        });
    }
    let lost_updates = duplicates.max(short);

    let linearizability = wgl::check_holds(&ops, &hs, permits, &mut violations);

    let liveness = liveness::check(&history, &ops, end_of_run, bounds, &mut violations);

    // Writes made after the writer's hold ended (a paused holder, a lost hold).
    let (mut late_writes_accepted, mut late_writes_refused) = (0, 0);
    for w in ops.iter().filter(|o| o.op == Op::Write) {
        let hold = hs
            .iter()
            .filter(|h| h.process == w.process && h.acquire_invoke < w.invoke)
            .max_by_key(|h| h.acquire_invoke);
        if hold.is_some_and(|h| w.invoke > h.end) {
            match w.done {
                Some((Kind::Ok, _)) => late_writes_accepted += 1,
                Some((Kind::Fail, _)) => late_writes_refused += 1,
                _ => {}
            }
        }
    }

    Report {
        liveness,
        updates: updates.len(),
        updates_skipped: ops
            .iter()
            .filter(|o| o.op == Op::Update && matches!(o.done, Some((Kind::Fail, _))))
            .count(),
        counter,
        lost_updates,
        possibly_held: ops
            .iter()
            .filter(|o| o.op == Op::Acquire && matches!(o.done, Some((Kind::Info, _)) | None))
            .count(),
        holds_cut_at_pause,
        linearizability,
        late_writes_accepted,
        late_writes_refused,
        operations: ops.len(),
        // Every acknowledged acquisition, with a token or without (a RedLock has none).
        acquisitions: ops
            .iter()
            .filter(|o| o.op == Op::Acquire && o.is_ok())
            .count(),
        writes_accepted: accepted.len(),
        writes_refused: ops
            .iter()
            .filter(|o| o.op == Op::Write && matches!(o.done, Some((Kind::Fail, _))))
            .count(),
        violations,
    }
}

#[cfg(test)]
mod tests;
