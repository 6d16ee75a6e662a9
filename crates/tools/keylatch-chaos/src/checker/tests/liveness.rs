//! The liveness rules (lost wake-ups, the fair lock's arrival order) on hand-made histories.

use super::*;

fn nemesis(h: &mut Vec<Event>, from: u64, healed: u64) {
    h.push(ev(NEMESIS, from, Kind::Invoke, Op::Nemesis));
    h.push(ev(NEMESIS, healed, Kind::Ok, Op::Nemesis));
}

/// c1 holds and releases at 100 ms; c2, waiting since 50 ms, gets the lock at `c2_ok`.
fn late_waiter(c2_ok: u64) -> Vec<Event> {
    let mut h = Vec::new();
    acquire(&mut h, "c1", 0, 1, 1, 3000);
    acquire(&mut h, "c2", 50, c2_ok, 2, 3000);
    release(&mut h, "c1", 100, 101, Kind::Ok);
    release(&mut h, "c2", c2_ok + 10, c2_ok + 11, Kind::Ok);
    h
}

#[test]
fn a_waiter_left_waiting_on_a_free_lock_is_a_lost_wakeup() {
    let h = late_waiter(2600);
    let r = check(&h, None);
    let lost: Vec<_> = r
        .violations
        .iter()
        .filter(|v| v.kind == ViolationKind::LostWakeup)
        .collect();
    assert_eq!(lost.len(), 1, "{:?}", r.violations);
    assert!(
        lost[0]
            .description
            .contains("c2 waited while the lock was free for 2499 ms")
    );
    assert_eq!(r.liveness.longest_free_wait_ms, 2499);
}

#[test]
fn a_waiter_woken_at_once_or_held_up_by_a_fault_is_no_lost_wakeup() {
    let r = check(&late_waiter(103), None);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!(r.liveness.wait_checked_ms, 54);
    // A fault healed at 500 ms settles until 2500 ms: only 100 ms of the wait are checked.
    let mut h = late_waiter(2600);
    nemesis(&mut h, 0, 500);
    // What the nemesis says about a fault (`info`) does not end it.
    h.push(ev(NEMESIS, 10, Kind::Info, Op::Nemesis).detail("the leader is s2"));
    let r = check(&h, None);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!(r.liveness.longest_free_wait_ms, 100);
}

#[test]
fn an_unknown_acquisition_may_hold_so_the_lock_is_not_free_then() {
    let mut h = late_waiter(2600);
    // c3's acquire timed out without an answer at 150 ms: it may hold until 3150 ms.
    let mut inv = ev("c3", 120, Kind::Invoke, Op::Acquire);
    inv.lease_ms = Some(3000);
    h.push(inv);
    h.push(ev("c3", 150, Kind::Info, Op::Acquire));
    let r = check(&h, None);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
}

/// c1 holds 0–5000 ms; c2 (at 100 ms) and c3 (at `c3_at`) wait; `first` gets the lock at
/// 5002 ms, the other at 6002 ms.
fn fair_history(fifo: bool, c3_at: u64, first: &str) -> Vec<Event> {
    let mut h = Vec::new();
    let second = if first == "c2" { "c3" } else { "c2" };
    for (p, at, ok) in [
        ("c1", 0, 1),
        ("c2", 100, if first == "c2" { 5002 } else { 6002 }),
        ("c3", c3_at, if first == "c3" { 5002 } else { 6002 }),
    ] {
        let mut inv = ev(p, at, Kind::Invoke, Op::Acquire);
        inv.lease_ms = Some(10_000);
        inv.fifo = fifo.then_some(true);
        h.push(inv);
        h.push(ev(p, ok, Kind::Ok, Op::Acquire));
    }
    release(&mut h, "c1", 5000, 5001, Kind::Ok);
    release(&mut h, first, 6000, 6001, Kind::Ok);
    release(&mut h, second, 7000, 7001, Kind::Ok);
    h
}

#[test]
fn a_fifo_lock_that_serves_a_later_arrival_first_breaks_the_order() {
    let r = check(&fair_history(true, 1500, "c3"), None);
    assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
    assert_eq!(r.violations[0].kind, ViolationKind::FairOrder);
    assert!(
        r.violations[0]
            .description
            .contains("c2 arrived 1400 ms before c3")
    );
    assert_eq!(r.liveness.order_pairs_checked, 1);
}

#[test]
fn arrival_order_is_only_asked_of_fifo_locks_and_beyond_the_margin() {
    // In order.
    let r = check(&fair_history(true, 1500, "c2"), None);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!(r.liveness.order_pairs_checked, 1);
    // No order promised.
    assert!(
        check(&fair_history(false, 1500, "c3"), None)
            .violations
            .is_empty()
    );
    // Arrivals closer than the margin (1 s) are not ordered.
    let r = check(&fair_history(true, 900, "c3"), None);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!(r.liveness.order_pairs_checked, 0);
    // A fault during the first arrival's wait: its place may rightly lapse.
    let mut h = fair_history(true, 1500, "c3");
    nemesis(&mut h, 3000, 3500);
    assert!(check(&h, None).violations.is_empty());
}
