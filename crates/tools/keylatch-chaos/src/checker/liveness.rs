//! The checks over waiting, outside faults: no lost wake-up, and arrival order for a lock that
//! promises it.
//!
//! Both only look at stretches of the run that no fault touched: a fault's window runs from its
//! `invoke` to its heal (`ok`, or the end of the run) plus a settle time in which clients
//! reconnect and retransmit. Under a fault a waiter may rightly wait (it cannot reach the
//! server; its place in a queue may rightly lapse), so only the quiet stretches can show a
//! waiter that was never woken or a queue that was not kept.
//!
//! - **Lost wake-up** (a history whose acquisitions are all of one exclusive lock): the lock is
//!   *busy* from an acquisition's `ok` to its release's completion (to `ok` + lease when the
//!   release never completed), and from an acquisition of unknown outcome's `invoke` to its end
//!   plus its lease (it may hold). A waiter (an acquisition from its `invoke` to its completion) that
//!   spends longer than the wake bound in one stretch where the lock is not busy and no fault
//!   is settling was not woken: a violation.
//! - **Arrival order** (acquisitions that record `fifo`): when A was invoked more than the
//!   arrival margin before B, B was invoked while A still waited, both got the lock, and no fault
//!   touched A's wait, A must have got it first. The margin covers the time from A's invoke to
//!   its joining the queue (its first request); B's `ok` before A's `ok` means the lock went to B
//!   first, since A could only have got it after B released.

use super::{Kind, Mode, NEMESIS, Op, Operation, Violation, ViolationKind};
use crate::history::Event;

/// The bounds of the liveness checks.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// How long a waiter may see the lock free outside faults before it counts as a lost
    /// wake-up.
    pub wake_ns: u64,
    /// How long after its invoke an acquisition has surely joined a queue.
    pub arrival_ns: u64,
    /// How long after a fault is healed its effects may last (reconnection, retransmission).
    pub settle_ns: u64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            wake_ns: 1_000_000_000,
            arrival_ns: 1_000_000_000,
            settle_ns: 2_000_000_000,
        }
    }
}

/// What the liveness checks looked at, to show they were not vacuous.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Coverage {
    /// Milliseconds in which someone waited outside any fault's window (0: the wake-up check
    /// did not apply to this history).
    pub wait_checked_ms: u64,
    /// The longest stretch a waiter saw the lock free outside faults, in milliseconds.
    pub longest_free_wait_ms: u64,
    /// Pairs of waiters whose arrival order was checked.
    pub order_pairs_checked: usize,
}

/// Sorted, merged intervals.
fn merge(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.retain(|(a, b)| a < b);
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// The pieces of `[from, to)` that none of `blocked` (merged) covers.
fn gaps(from: u64, to: u64, blocked: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut at = from;
    let first = blocked.partition_point(|&(_, b)| b <= from);
    for &(a, b) in &blocked[first..] {
        if a >= to {
            break;
        }
        if a > at {
            out.push((at, a));
        }
        at = at.max(b);
    }
    if at < to {
        out.push((at, to));
    }
    out
}

/// Every fault's window, healed plus `settle`, merged.
fn fault_windows(history: &[Event], end_of_run: u64, settle: u64) -> Vec<(u64, u64)> {
    let mut windows = Vec::new();
    let mut open: Option<u64> = None;
    for e in history.iter().filter(|e| e.process == NEMESIS) {
        match e.kind {
            Kind::Invoke => {
                if let Some(start) = open.replace(e.time) {
                    windows.push((start, e.time.saturating_add(settle)));
                }
            }
            // The heal (or a fault that could not be applied) closes it; `info` only says
            // more about the fault (which node led, which took over).
            Kind::Ok | Kind::Fail => {
                if let Some(start) = open.take() {
                    windows.push((start, e.time.saturating_add(settle)));
                }
            }
            Kind::Info => {}
        }
    }
    if let Some(start) = open {
        windows.push((start, end_of_run));
    }
    merge(windows)
}

/// The end of acquisition `i`'s busy time: its release's completion, else `ok` + lease.
fn busy_end(ops: &[Operation], i: usize, ok: u64, end_of_run: u64) -> u64 {
    let o = &ops[i];
    let lease_end = o
        .lease_ms
        .or(o.watchdog_ms)
        .map_or(end_of_run, |ms| ok.saturating_add(ms * 1_000_000));
    let release = ops[i + 1..]
        .iter()
        .filter(|n| n.process == o.process)
        .take_while(|n| n.op != Op::Acquire)
        .find(|n| n.op == Op::Release);
    match release.and_then(|r| r.done) {
        Some((Kind::Ok | Kind::Fail, t)) => t,
        _ => lease_end,
    }
}

/// Whether the wake-up check applies: every acquisition takes the one exclusive lock.
fn one_exclusive_lock(ops: &[Operation]) -> bool {
    ops.iter().filter(|o| o.op == Op::Acquire).all(|o| {
        o.names.is_none() && o.permits.is_none_or(|p| p <= 1) && o.mode != Some(Mode::Read)
    }) && ops.iter().all(|o| o.mode.is_none())
}

/// Both checks; appends their violations and says what they covered.
pub(super) fn check(
    history: &[Event],
    ops: &[Operation],
    end_of_run: u64,
    bounds: Bounds,
    violations: &mut Vec<Violation>,
) -> Coverage {
    let faults = fault_windows(history, end_of_run, bounds.settle_ns);
    let mut coverage = Coverage::default();
    if one_exclusive_lock(ops) {
        lost_wakeups(ops, end_of_run, bounds, &faults, violations, &mut coverage);
    }
    arrival_order(ops, bounds, &faults, violations, &mut coverage);
    coverage
}

fn lost_wakeups(
    ops: &[Operation],
    end_of_run: u64,
    bounds: Bounds,
    faults: &[(u64, u64)],
    violations: &mut Vec<Violation>,
    coverage: &mut Coverage,
) {
    // Busy intervals, each with the acquisition it belongs to.
    let mut busy: Vec<(u64, u64, usize)> = Vec::new();
    for (i, o) in ops.iter().enumerate().filter(|(_, o)| o.op == Op::Acquire) {
        // A watchdog hold nobody renews lapses within the watchdog timeout.
        let lease = o
            .lease_ms
            .or(o.watchdog_ms)
            .map_or(end_of_run, |ms| ms * 1_000_000);
        match o.done {
            Some((Kind::Ok, ok)) => busy.push((ok, busy_end(ops, i, ok, end_of_run), i)),
            Some((Kind::Info, t)) => busy.push((o.invoke, t.saturating_add(lease), i)),
            Some((Kind::Fail | Kind::Invoke, _)) => {}
            None => busy.push((o.invoke, end_of_run, i)),
        }
    }
    busy.sort_unstable();
    let longest = busy.iter().map(|(a, b, _)| b.saturating_sub(*a)).max();
    let longest = longest.unwrap_or(0);

    let mut waits = Vec::new();
    for (i, w) in ops.iter().enumerate().filter(|(_, o)| o.op == Op::Acquire) {
        let end = w.done_at().unwrap_or(end_of_run);
        waits.push((w.invoke, end));
        // What blocks this waiter: others' busy time, and the faults.
        let first = busy.partition_point(|&(a, _, _)| a.saturating_add(longest) < w.invoke);
        let mut blocked: Vec<(u64, u64)> = busy[first..]
            .iter()
            .take_while(|&&(a, _, _)| a < end)
            .filter(|&&(_, b, j)| j != i && b > w.invoke)
            .map(|&(a, b, _)| (a, b))
            .collect();
        let lo = faults.partition_point(|&(_, b)| b <= w.invoke);
        blocked.extend(faults[lo..].iter().take_while(|&&(a, _)| a < end));
        let blocked = merge(blocked);
        for (a, b) in gaps(w.invoke, end, &blocked) {
            let free_ms = (b - a) / 1_000_000;
            coverage.longest_free_wait_ms = coverage.longest_free_wait_ms.max(free_ms);
            if b - a > bounds.wake_ns {
                violations.push(Violation {
                    kind: ViolationKind::LostWakeup,
                    description: format!(
                        "{} waited while the lock was free for {free_ms} ms, outside any fault \
                         (bound {} ms)",
                        w.process,
                        bounds.wake_ns / 1_000_000
                    ),
                    from: w.invoke,
                    to: b,
                    processes: vec![w.process.clone()],
                });
            }
        }
    }
    let waited = merge(waits);
    coverage.wait_checked_ms = waited
        .iter()
        .flat_map(|&(a, b)| gaps(a, b, faults))
        .map(|(a, b)| (b - a) / 1_000_000)
        .sum();
}

fn arrival_order(
    ops: &[Operation],
    bounds: Bounds,
    faults: &[(u64, u64)],
    violations: &mut Vec<Violation>,
    coverage: &mut Coverage,
) {
    let mut fifo: Vec<(u64, u64, &Operation)> = ops
        .iter()
        .filter(|o| o.op == Op::Acquire && o.fifo)
        .filter_map(|o| match o.done {
            Some((Kind::Ok, ok)) => Some((o.invoke, ok, o)),
            _ => None,
        })
        .collect();
    fifo.sort_unstable_by_key(|&(invoke, ok, _)| (invoke, ok));
    for (n, &(a_invoke, a_ok, a)) in fifo.iter().enumerate() {
        let touched = {
            let lo = faults.partition_point(|&(_, b)| b <= a_invoke);
            faults.get(lo).is_some_and(|&(start, _)| start < a_ok)
        };
        if touched {
            continue;
        }
        let later = fifo[n + 1..]
            .iter()
            .take_while(|&&(b_invoke, _, _)| b_invoke < a_ok)
            .filter(|&&(b_invoke, _, _)| b_invoke > a_invoke.saturating_add(bounds.arrival_ns));
        for &(b_invoke, b_ok, b) in later {
            coverage.order_pairs_checked += 1;
            if b_ok < a_ok {
                violations.push(Violation {
                    kind: ViolationKind::FairOrder,
                    description: format!(
                        "{} arrived {} ms before {} and both waited, but {} got the lock first",
                        a.process,
                        (b_invoke - a_invoke) / 1_000_000,
                        b.process,
                        b.process
                    ),
                    from: a_invoke,
                    to: a_ok,
                    processes: vec![a.process.clone(), b.process.clone()],
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{gaps, merge};

    #[test]
    fn merging_and_gaps() {
        assert_eq!(
            merge(vec![(5, 7), (1, 3), (2, 4), (9, 9)]),
            vec![(1, 4), (5, 7)]
        );
        let blocked = merge(vec![(2, 4), (6, 8)]);
        assert_eq!(gaps(0, 10, &blocked), vec![(0, 2), (4, 6), (8, 10)]);
        assert_eq!(gaps(3, 7, &blocked), vec![(4, 6)]);
        assert_eq!(gaps(2, 4, &blocked), vec![]);
    }
}
