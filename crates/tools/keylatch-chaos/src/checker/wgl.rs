//! A linearizability check of each lock's history, by Wing–Gong–Lowe search (as Knossos and
//! Porcupine do): is there an order of the acquires and releases, each placed within its own
//! window, that a lock model accepts?
//!
//! Each hold gives two operations. Its **acquire** takes effect between the acquire's `invoke`
//! and its `ok`. Its **release** takes effect at the hold's end (as the checker derived it:
//! the release's invoke, the fixed lease's end, the seen loss) or later; no later than the
//! release's `ok` when it succeeded, else at any time (or never: a lock nobody frees stays
//! taken). Acquisitions of unknown outcome are left out: nothing observed them, and leaving an
//! operation out only removes constraints. The model holds a set of holders: one writer or
//! any number of readers (a read-write lock), at most `permits` (a semaphore).
//!
//! The search is Lowe's: walk the operations by time; linearize a call the model accepts and
//! whose (set of linearized operations, state) was not tried before; at a return whose call is
//! not linearized, undo the last choice. No choice left: not linearizable. A multi-lock's
//! names are separate objects (linearizability is local), each checked on its own.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use super::holds::Hold;
use super::{Operation, Violation, ViolationKind};

/// Search steps per object before the check gives up on it (reported, not a violation).
const BUDGET: u64 = 20_000_000;

/// One operation of a history for the search: what it does, and its window.
#[derive(Debug, Clone)]
pub struct Call<O> {
    /// The operation.
    pub op: O,
    /// When it may start taking effect.
    pub call: u64,
    /// By when it has taken effect; `None`: any time after `call`, or never.
    pub ret: Option<u64>,
}

/// A sequential model of an object.
pub trait Model {
    /// An operation on it.
    type Op;
    /// The object's state.
    type State: Clone + Eq + std::hash::Hash;
    /// The state after `op` from `state`, or `None` if the model refuses it there.
    fn step(&self, state: &Self::State, op: &Self::Op) -> Option<Self::State>;
}

/// A search's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// An order exists.
    Linearizable,
    /// None exists; the operation whose window the deepest attempt could not close.
    Not(usize),
    /// The budget ran out.
    Unknown,
}

const NIL: usize = usize::MAX;

/// Searches for an order of `calls` that `model` accepts from `init`, in at most `budget`
/// steps.
pub fn search<M: Model>(model: &M, init: M::State, calls: &[Call<M::Op>], budget: u64) -> Verdict {
    // Entries: (time, is a call, operation); at the same time a return comes first.
    let mut entries: Vec<(u64, bool, usize)> = Vec::with_capacity(calls.len() * 2);
    for (i, c) in calls.iter().enumerate() {
        entries.push((c.call, true, i));
        if let Some(r) = c.ret {
            entries.push((r.max(c.call), false, i));
        }
    }
    entries.sort_by_key(|&(t, call, i)| (t, call, i));
    // A doubly linked list over the entries, with a head at index n.
    let n = entries.len();
    let head = n;
    let mut next: Vec<usize> = (1..=n).map(|i| if i == n { NIL } else { i }).collect();
    next.push(if n == 0 { NIL } else { 0 });
    let mut prev: Vec<usize> = (0..n).map(|i| if i == 0 { head } else { i - 1 }).collect();
    prev.push(NIL);
    let mut ret_entry = vec![NIL; calls.len()];
    for (e, &(_, call, i)) in entries.iter().enumerate() {
        if !call {
            ret_entry[i] = e;
        }
    }
    let unlink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, e: usize| {
        let (p, q) = (prev[e], next[e]);
        next[p] = q;
        if q != NIL {
            prev[q] = p;
        }
    };
    let relink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, e: usize| {
        let (p, q) = (prev[e], next[e]);
        next[p] = e;
        if q != NIL {
            prev[q] = e;
        }
    };

    let mut remaining = calls.iter().filter(|c| c.ret.is_some()).count();
    let mut linearized = vec![0u64; calls.len().div_ceil(64)];
    let mut state = init;
    let mut stack: Vec<(usize, M::State)> = Vec::new();
    let mut tried: HashSet<(Vec<u64>, M::State)> = HashSet::new();
    let (mut deepest, mut stuck) = (0, 0);
    let mut steps = 0u64;
    let mut cur = next[head];
    while remaining > 0 {
        steps += 1;
        if steps > budget {
            return Verdict::Unknown;
        }
        if cur == NIL {
            // Only reachable with returns left if every call before them was refused.
            cur = next[head];
            if cur == NIL {
                return Verdict::Linearizable;
            }
        }
        let (_, is_call, op) = entries[cur];
        if is_call {
            if let Some(after) = model.step(&state, &calls[op].op) {
                linearized[op / 64] |= 1 << (op % 64);
                if tried.insert((linearized.clone(), after.clone())) {
                    stack.push((cur, std::mem::replace(&mut state, after)));
                    unlink(&mut next, &mut prev, cur);
                    if ret_entry[op] != NIL {
                        unlink(&mut next, &mut prev, ret_entry[op]);
                        remaining -= 1;
                    }
                    cur = next[head];
                    continue;
                }
                linearized[op / 64] &= !(1 << (op % 64));
            }
            cur = next[cur];
        } else {
            if stack.len() >= deepest {
                deepest = stack.len();
                stuck = op;
            }
            let Some((e, before)) = stack.pop() else {
                return Verdict::Not(stuck);
            };
            let op = entries[e].2;
            if ret_entry[op] != NIL {
                relink(&mut next, &mut prev, ret_entry[op]);
                remaining += 1;
            }
            relink(&mut next, &mut prev, e);
            linearized[op / 64] &= !(1 << (op % 64));
            state = before;
            cur = next[e];
        }
    }
    Verdict::Linearizable
}

/// A lock's operation: hold `id` takes (shared or not) or gives back the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockOp {
    /// Hold `id` takes it; `true`: a read (shared) hold.
    Acquire(u32, bool),
    /// Hold `id` gives it back.
    Release(u32),
}

/// A lock of `permits` holders (1: a mutex, or a read-write lock's writer), readers shared.
#[derive(Debug, Clone, Copy)]
pub struct LockModel {
    /// How many holders at once (a semaphore's permits).
    pub permits: usize,
}

impl Model for LockModel {
    type Op = LockOp;
    /// The holders, sorted: (hold id, shared).
    type State = Vec<(u32, bool)>;

    fn step(&self, state: &Self::State, op: &LockOp) -> Option<Self::State> {
        match *op {
            LockOp::Acquire(id, shared) => {
                let fits = if self.permits > 1 {
                    state.len() < self.permits
                } else if shared {
                    state.iter().all(|&(_, s)| s)
                } else {
                    state.is_empty()
                };
                fits.then(|| {
                    let mut s = state.clone();
                    let at = s.partition_point(|&(h, _)| h < id);
                    s.insert(at, (id, shared));
                    s
                })
            }
            LockOp::Release(id) => {
                let at = state.iter().position(|&(h, _)| h == id)?;
                let mut s = state.clone();
                s.remove(at);
                Some(s)
            }
        }
    }
}

/// What the linearizability check did.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Summary {
    /// Objects (lock names) checked.
    pub objects: usize,
    /// Operations searched (two per hold).
    pub operations: usize,
    /// Objects found not linearizable.
    pub not_linearizable: usize,
    /// Objects whose search ran out of budget (no verdict).
    pub unknown: usize,
}

/// The acquire and release operations of `holds`, per lock name.
pub(super) fn lock_histories(holds: &[Hold]) -> BTreeMap<String, Vec<(usize, Call<LockOp>)>> {
    let mut objects: BTreeMap<String, Vec<(usize, Call<LockOp>)>> = BTreeMap::new();
    for (i, h) in holds.iter().enumerate() {
        let id = i as u32;
        let names = if h.names.is_empty() {
            vec![String::new()]
        } else {
            h.names.clone()
        };
        for name in names {
            let calls = objects.entry(name).or_default();
            calls.push((
                i,
                Call {
                    op: LockOp::Acquire(id, h.shared),
                    call: h.acquire_invoke,
                    ret: Some(h.start),
                },
            ));
            calls.push((
                i,
                Call {
                    op: LockOp::Release(id),
                    call: h.end_raw,
                    ret: h.released.filter(|&t| t >= h.end_raw),
                },
            ));
        }
    }
    objects
}

/// Checks each lock's history; appends a violation per object that is not linearizable.
pub(super) fn check_holds(
    _ops: &[Operation],
    holds: &[Hold],
    permits: usize,
    violations: &mut Vec<Violation>,
) -> Summary {
    let mut summary = Summary::default();
    let model = LockModel { permits };
    for (name, calls) in lock_histories(holds) {
        summary.objects += 1;
        summary.operations += calls.len();
        let plain: Vec<Call<LockOp>> = calls.iter().map(|(_, c)| c.clone()).collect();
        match search(&model, Vec::new(), &plain, BUDGET) {
            Verdict::Linearizable => {}
            Verdict::Unknown => summary.unknown += 1,
            Verdict::Not(at) => {
                summary.not_linearizable += 1;
                let h = &holds[calls[at].0];
                let what = if name.is_empty() {
                    "the lock".to_owned()
                } else {
                    name.clone()
                };
                violations.push(Violation {
                    kind: ViolationKind::NotLinearizable,
                    description: format!(
                        "the history of {what} is not linearizable ({} operations): no order \
                         places {}'s {} within its window",
                        calls.len(),
                        h.process,
                        match plain[at].op {
                            LockOp::Acquire(..) => "acquire",
                            LockOp::Release(_) => "release",
                        }
                    ),
                    from: h.acquire_invoke,
                    to: plain[at].ret.unwrap_or(h.end),
                    processes: vec![h.process.clone()],
                });
            }
        }
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(op: LockOp, call: u64, ret: Option<u64>) -> Call<LockOp> {
        Call { op, call, ret }
    }
    use LockOp::{Acquire as A, Release as R};
    const MUTEX: LockModel = LockModel { permits: 1 };

    #[test]
    fn sequential_holds_are_linearizable() {
        let h = [
            call(A(1, false), 0, Some(2)),
            call(R(1), 5, Some(6)),
            call(A(2, false), 1, Some(7)),
            call(R(2), 9, None),
        ];
        assert_eq!(search(&MUTEX, Vec::new(), &h, 1000), Verdict::Linearizable);
    }

    #[test]
    fn overlapping_windows_that_can_be_ordered_are_linearizable() {
        // Both acquires' windows overlap; c2's release may come before c1's acquire.
        let h = [
            call(A(1, false), 0, Some(10)),
            call(A(2, false), 0, Some(3)),
            call(R(2), 4, Some(5)),
            call(R(1), 12, None),
        ];
        assert_eq!(search(&MUTEX, Vec::new(), &h, 1000), Verdict::Linearizable);
    }

    #[test]
    fn two_holders_at_once_are_not_linearizable() {
        // c2's acquire returned while c1 surely held (c1 acquired by 2, released from 8 on).
        let h = [
            call(A(1, false), 0, Some(2)),
            call(A(2, false), 3, Some(4)),
            call(R(2), 6, Some(7)),
            call(R(1), 8, Some(9)),
        ];
        assert!(matches!(
            search(&MUTEX, Vec::new(), &h, 1000),
            Verdict::Not(_)
        ));
    }

    #[test]
    fn a_release_before_its_acquire_is_not_linearizable() {
        // The release completed before the acquire was invoked.
        let h = [call(R(1), 0, Some(1)), call(A(1, false), 2, Some(3))];
        assert!(matches!(
            search(&MUTEX, Vec::new(), &h, 1000),
            Verdict::Not(_)
        ));
    }

    #[test]
    fn readers_share_and_a_writer_excludes_them() {
        let read = |id, a, b| {
            [
                call(A(id, true), a, Some(a + 1)),
                call(R(id), b, Some(b + 1)),
            ]
        };
        let mut h: Vec<_> = read(1, 0, 10).into_iter().chain(read(2, 2, 12)).collect();
        assert_eq!(search(&MUTEX, Vec::new(), &h, 1000), Verdict::Linearizable);
        // A writer acknowledged at 6, while both readers surely held.
        h.push(call(A(3, false), 5, Some(6)));
        h.push(call(R(3), 7, Some(8)));
        assert!(matches!(
            search(&MUTEX, Vec::new(), &h, 1000),
            Verdict::Not(_)
        ));
    }

    #[test]
    fn a_semaphore_admits_its_permits_and_no_more() {
        let hold = |id, a, b| {
            [
                call(A(id, false), a, Some(a + 1)),
                call(R(id), b, Some(b + 1)),
            ]
        };
        let two = LockModel { permits: 2 };
        let mut h: Vec<_> = hold(1, 0, 10).into_iter().chain(hold(2, 2, 12)).collect();
        assert_eq!(search(&two, Vec::new(), &h, 1000), Verdict::Linearizable);
        h.extend(hold(3, 4, 14));
        assert!(matches!(
            search(&two, Vec::new(), &h, 1000),
            Verdict::Not(_)
        ));
    }

    #[test]
    fn an_unreleased_hold_blocks_for_good() {
        // c1 never frees the lock (its release may never happen); c2 cannot get in unless
        // c1's release is placed first, which its window allows from 5 on.
        let mut h = vec![
            call(A(1, false), 0, Some(1)),
            call(R(1), 5, None),
            call(A(2, false), 6, Some(7)),
        ];
        assert_eq!(search(&MUTEX, Vec::new(), &h, 1000), Verdict::Linearizable);
        // But not before 5.
        h[2] = call(A(2, false), 2, Some(3));
        assert!(matches!(
            search(&MUTEX, Vec::new(), &h, 1000),
            Verdict::Not(_)
        ));
    }

    #[test]
    fn a_search_out_of_budget_says_so() {
        let h: Vec<_> = (0..20)
            .flat_map(|i| [call(A(i, false), 0, Some(100)), call(R(i), 0, Some(100))])
            .collect();
        assert_eq!(search(&MUTEX, Vec::new(), &h, 5), Verdict::Unknown);
    }
}
