//! The checker's own tests: small histories with known answers.

use super::*;

const MS: u64 = 1_000_000;

/// The checker, with a cross-check: the linearizability search finds a history not
/// linearizable exactly when the interval checks find two holders (or too many) at once.
/// The search's verdicts are then left out, so the tests below count the interval checks'.
fn check(h: &[Event], log: Option<&[(u64, String)]>) -> Report {
    let mut r = super::check(h, log);
    let overlap = r.violations.iter().any(|v| {
        matches!(
            v.kind,
            ViolationKind::MutualExclusion | ViolationKind::Occupancy
        )
    });
    let not_linearizable = r
        .violations
        .iter()
        .any(|v| v.kind == ViolationKind::NotLinearizable);
    assert_eq!(overlap, not_linearizable, "{:?}", r.violations);
    r.violations
        .retain(|v| v.kind != ViolationKind::NotLinearizable);
    r
}

fn ev(p: &str, ms: u64, kind: Kind, op: Op) -> Event {
    Event::new(p, ms * MS, kind, op)
}

fn acquire(h: &mut Vec<Event>, p: &str, at: u64, ok_at: u64, token: u64, lease_ms: u64) {
    let mut inv = ev(p, at, Kind::Invoke, Op::Acquire);
    inv.lease_ms = Some(lease_ms);
    h.push(inv);
    h.push(ev(p, ok_at, Kind::Ok, Op::Acquire).token(token));
}

fn write(h: &mut Vec<Event>, p: &str, at: u64, done: u64, token: u64, kind: Kind) {
    let mut inv = ev(p, at, Kind::Invoke, Op::Write).token(token);
    inv.write_id = Some(format!("{p}-{at}"));
    h.push(inv);
    h.push(ev(p, done, kind, Op::Write));
}

fn release(h: &mut Vec<Event>, p: &str, at: u64, done: u64, kind: Kind) {
    h.push(ev(p, at, Kind::Invoke, Op::Release));
    h.push(ev(p, done, kind, Op::Release));
}

/// Two workers taking turns, each writing with its token.
fn clean() -> Vec<Event> {
    let mut h = Vec::new();
    acquire(&mut h, "c1", 0, 2, 1, 1000);
    write(&mut h, "c1", 3, 4, 1, Kind::Ok);
    acquire(&mut h, "c2", 1, 12, 2, 1000); // waits for c1
    release(&mut h, "c1", 10, 11, Kind::Ok);
    write(&mut h, "c2", 13, 14, 2, Kind::Ok);
    release(&mut h, "c2", 20, 21, Kind::Ok);
    h
}

fn log_of(h: &[Event]) -> Vec<(u64, String)> {
    let ops = operations(h);
    ops.iter()
        .filter(|o| o.op == Op::Write && o.is_ok())
        .map(|o| (o.token.unwrap_or(0), o.write_id.clone().unwrap_or_default()))
        .collect()
}

#[test]
fn a_clean_history_has_no_violation() {
    let h = clean();
    let log = log_of(&h);
    let r = check(&h, Some(&log));
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!(r.operations, 6);
    assert_eq!(r.acquisitions, 2);
    assert_eq!(r.writes_accepted, 2);
}

#[test]
fn an_overlap_is_found() {
    let mut h = Vec::new();
    acquire(&mut h, "c1", 0, 2, 1, 1000);
    // The server restarted without the lock: c2 gets in while c1 still holds.
    acquire(&mut h, "c2", 5, 6, 1, 1000);
    release(&mut h, "c1", 10, 11, Kind::Fail);
    release(&mut h, "c2", 20, 21, Kind::Ok);
    let r = check(&h, None);
    let me: Vec<_> = r
        .violations
        .iter()
        .filter(|v| v.kind == ViolationKind::MutualExclusion)
        .collect();
    assert_eq!(me.len(), 1, "{:?}", r.violations);
    assert_eq!(me[0].processes, ["c1", "c2"]);
    assert_eq!((me[0].from, me[0].to), (0, 10 * MS));
    // The token was issued again.
    assert!(
        r.violations
            .iter()
            .any(|v| v.kind == ViolationKind::TokenOrder)
    );
    let text = timeline(&h, r.shortest().unwrap(), 0);
    assert!(text.contains("c2       ok     acquire  token=1"), "{text}");
}

#[test]
fn a_hold_ends_at_its_lease() {
    let mut h = Vec::new();
    // c1 is paused past its 100 ms lease; c2 gets in after it; c1 releases late.
    acquire(&mut h, "c1", 0, 2, 1, 100);
    acquire(&mut h, "c2", 50, 150, 2, 100);
    release(&mut h, "c1", 400, 401, Kind::Fail);
    release(&mut h, "c2", 200, 201, Kind::Ok);
    assert!(check(&h, None).violations.is_empty());
    // With a longer lease the same history overlaps.
    h[0].lease_ms = Some(1000);
    h[2].lease_ms = Some(1000);
    assert_eq!(check(&h, None).violations.len(), 1);
}

#[test]
fn a_fixed_lease_ends_at_invoke_plus_lease_less_the_drift_whatever_the_library_says() {
    let mut h = Vec::new();
    // c1 waited 5 s for the lock (lease 1 s): the checker cannot know when the server started
    // the lease, only that it was after the invoke, so the hold ended by 0 + 1000 - 12 ms.
    acquire(&mut h, "c1", 0, 500, 1, 1000);
    acquire(&mut h, "c2", 980, 990, 2, 1000);
    release(&mut h, "c1", 1500, 1501, Kind::Fail);
    release(&mut h, "c2", 1600, 1601, Kind::Ok);
    let exclusion = |h: &[Event]| {
        check(h, None)
            .violations
            .iter()
            .filter(|v| v.kind == ViolationKind::MutualExclusion)
            .count()
    };
    assert_eq!(exclusion(&h), 0);
    // c2 acknowledged before c1's lease less the drift (988 ms) had run out: two holders.
    h[3].time = 987 * MS;
    assert_eq!(exclusion(&h), 1);
}

fn watchdog_acquire(h: &mut Vec<Event>, p: &str, at: u64, ok_at: u64, token: u64) {
    let mut inv = ev(p, at, Kind::Invoke, Op::Acquire);
    inv.watchdog_ms = Some(1000);
    h.push(inv);
    h.push(ev(p, ok_at, Kind::Ok, Op::Acquire).token(token));
}

fn update(h: &mut Vec<Event>, p: &str, at: u64, done: u64, value: u64) {
    h.push(ev(p, at, Kind::Invoke, Op::Update));
    let mut ok = ev(p, done, Kind::Ok, Op::Update);
    ok.value = Some(value);
    h.push(ok);
}

#[test]
fn a_watchdog_hold_ends_at_its_release_or_where_the_worker_saw_it_lost() {
    let mut h = Vec::new();
    watchdog_acquire(&mut h, "c1", 0, 1, 1);
    // c1 holds for 5 s, renewed, far past the watchdog timeout: no lease ends it.
    watchdog_acquire(&mut h, "c2", 100, 5200, 2);
    release(&mut h, "c1", 5000, 5001, Kind::Ok);
    release(&mut h, "c2", 6000, 6001, Kind::Ok);
    assert!(check(&h, None).violations.is_empty());
    // c2 got in at 4000 while c1 still thought it held until it saw the loss at 4500.
    h[3].time = 4000 * MS;
    h.push(ev("c1", 4500, Kind::Ok, Op::Lost));
    let r = check(&h, None);
    assert!(
        r.violations
            .iter()
            .any(|v| v.kind == ViolationKind::MutualExclusion),
        "{:?}",
        r.violations
    );
    // Had it seen the loss at 3900, before c2's ok, the holds would not meet.
    h.last_mut().unwrap().time = 3900 * MS;
    let r = check(&h, None);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
}

/// c1 holds (watchdog) and the nemesis stops it from 1000 to 3500; c2 gets the lock at 2500.
fn paused_holder(update_after_resume: bool) -> Vec<Event> {
    let mut h = Vec::new();
    watchdog_acquire(&mut h, "c1", 0, 1, 1);
    h.push(ev(NEMESIS, 999, Kind::Invoke, Op::Nemesis).detail("pause-client"));
    h.push(ev(NEMESIS, 1000, Kind::Info, Op::Nemesis).detail("pausing c1"));
    h.push(ev(NEMESIS, 3500, Kind::Ok, Op::Nemesis).detail("healed pause-client"));
    // (A pause shorter than the watchdog timeout would cut nothing.)
    watchdog_acquire(&mut h, "c2", 500, 2500, 2);
    update(&mut h, "c2", 2501, 2600, 1);
    if update_after_resume {
        // c1 did not look before writing: its read (0) was old.
        update(&mut h, "c1", 5, 3498, 1);
    }
    // Recorded before the nemesis records its heal: c1 runs as soon as it is continued.
    h.push(ev("c1", 3499, Kind::Ok, Op::Lost));
    release(&mut h, "c1", 3530, 3531, Kind::Fail);
    release(&mut h, "c2", 4000, 4001, Kind::Ok);
    h
}

#[test]
fn a_stopped_watchdog_holder_that_sees_its_loss_first_held_until_it_was_stopped() {
    let mut h = paused_holder(false);
    let r = check(&h, None);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!(r.holds_cut_at_pause, 1);
    assert_eq!(r.updates, 1);
    // A pause shorter than the watchdog timeout (500 ms of 1000) explains no loss.
    h[4].time = 1500 * MS;
    let r = check(&h, None);
    assert_eq!(r.holds_cut_at_pause, 0);
    assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
}

#[test]
fn a_stopped_holder_that_writes_before_it_looks_is_a_double_holder_and_loses_an_update() {
    let h = paused_holder(true);
    let r = super::check(&h, Some(&[]));
    let kinds: Vec<_> = r.violations.iter().map(|v| v.kind).collect();
    assert!(kinds.contains(&ViolationKind::MutualExclusion), "{kinds:?}");
    assert!(kinds.contains(&ViolationKind::NotLinearizable), "{kinds:?}");
    assert!(kinds.contains(&ViolationKind::LostUpdate), "{kinds:?}");
    assert_eq!(r.holds_cut_at_pause, 0);
    assert_eq!(r.lost_updates, 1);
}

#[test]
fn lost_updates_show_as_duplicate_values_or_a_short_counter() {
    let mut h = Vec::new();
    acquire(&mut h, "c1", 0, 1, 1, 10_000);
    update(&mut h, "c1", 2, 3, 1);
    release(&mut h, "c1", 10, 11, Kind::Ok);
    acquire(&mut h, "c2", 20, 21, 2, 10_000);
    update(&mut h, "c2", 22, 26, 2);
    // A fenced write inside the update, as the worker does (the checker sorts by time).
    write(&mut h, "c2", 24, 25, 2, Kind::Ok);
    release(&mut h, "c2", 30, 31, Kind::Ok);
    let r = check_with(&h, None, Some(2), Bounds::default());
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!((r.updates, r.lost_updates), (2, 0));
    // The counter says 1 after two acknowledged updates: one was lost (whoever lost it).
    let r = check_with(&h, None, Some(1), Bounds::default());
    assert_eq!(r.lost_updates, 1);
    assert_eq!(r.violations[0].kind, ViolationKind::LostUpdate);
    // Both wrote 1: each read 0.
    h[9].value = Some(1);
    let r = check_with(&h, None, Some(1), Bounds::default());
    assert_eq!(r.lost_updates, 1);
    assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
    assert_eq!(r.violations[0].processes, ["c1", "c2"]);
}

#[test]
fn an_acquisition_of_unknown_outcome_is_possibly_held_never_a_holder() {
    let mut h = Vec::new();
    let mut inv = ev("c1", 0, Kind::Invoke, Op::Acquire);
    inv.lease_ms = Some(1000);
    h.push(inv);
    h.push(ev("c1", 900, Kind::Info, Op::Acquire).detail("timed out"));
    acquire(&mut h, "c2", 100, 200, 1, 1000);
    release(&mut h, "c2", 300, 301, Kind::Ok);
    let r = check(&h, None);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!(r.possibly_held, 1);
    assert_eq!(r.linearizability.objects, 1);
}

#[test]
fn a_holder_without_a_release_holds_to_its_lease_end_or_the_end_of_the_run() {
    let mut h = Vec::new();
    acquire(&mut h, "c1", 0, 2, 1, 1000);
    // c1 never releases (killed); c2 gets in at 500 ms.
    acquire(&mut h, "c2", 400, 500, 2, 1000);
    release(&mut h, "c2", 600, 601, Kind::Ok);
    assert_eq!(check(&h, None).violations.len(), 1);
    // Past c1's lease it is fine.
    h[2].time = 1100 * MS;
    h[3].time = 1200 * MS;
    h[4].time = 1300 * MS;
    h[5].time = 1301 * MS;
    assert!(check(&h, None).violations.is_empty());
}

#[test]
fn an_info_acquire_is_no_hold() {
    let mut h = Vec::new();
    let mut inv = ev("c1", 0, Kind::Invoke, Op::Acquire);
    inv.lease_ms = Some(1000);
    h.push(inv);
    h.push(ev("c1", 5, Kind::Info, Op::Acquire).detail("timeout"));
    acquire(&mut h, "c2", 6, 7, 1, 1000);
    release(&mut h, "c2", 20, 21, Kind::Ok);
    assert!(check(&h, None).violations.is_empty());
}

#[test]
fn a_stale_write_accepted_is_found_and_a_refused_one_is_not() {
    let mut h = clean();
    // c1 was paused and writes again with its old token after c2's write was acknowledged.
    write(&mut h, "c1", 30, 31, 1, Kind::Fail);
    let log = log_of(&h);
    let r = check(&h, Some(&log));
    assert!(r.violations.is_empty());
    // c1's lease (1000 ms from 0) had not ended at 30 ms, but c1 had invoked its release.
    assert_eq!((r.late_writes_accepted, r.late_writes_refused), (0, 1));
    h[0].lease_ms = Some(20);
    assert_eq!(check(&h, Some(&log)).late_writes_refused, 1);
    h[0].lease_ms = Some(1000);
    let n = h.len();
    h[n - 1].kind = Kind::Ok;
    let r = check(&h, None);
    assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
    assert_eq!(r.violations[0].kind, ViolationKind::StaleWrite);
    // The register's own log out of order is found too.
    let log = log_of(&h);
    let r = check(&h, Some(&log));
    assert_eq!(
        r.counts().get("stale-write"),
        Some(&2),
        "{:?}",
        r.violations
    );
}

#[test]
fn a_lost_acknowledged_write_is_found() {
    let h = clean();
    let mut log = log_of(&h);
    log.pop();
    let r = check(&h, Some(&log));
    assert_eq!(r.violations.len(), 1);
    assert_eq!(r.violations[0].kind, ViolationKind::LostWrite);
}

#[test]
fn the_shortest_counterexample_is_chosen() {
    let mut h = Vec::new();
    acquire(&mut h, "c1", 0, 2, 1, 10_000);
    acquire(&mut h, "c2", 100, 101, 2, 10_000);
    release(&mut h, "c2", 5000, 5001, Kind::Ok);
    acquire(&mut h, "c3", 6000, 6001, 3, 10_000);
    release(&mut h, "c3", 6003, 6004, Kind::Ok);
    acquire(&mut h, "c4", 6002, 6002, 4, 10_000);
    release(&mut h, "c4", 6010, 6011, Kind::Ok);
    release(&mut h, "c1", 9000, 9001, Kind::Ok);
    let r = check(&h, None);
    assert_eq!(
        r.counts().get("mutual-exclusion"),
        Some(&4),
        "{:?}",
        r.violations
    );
    let s = r.shortest().unwrap();
    assert_eq!(s.processes, ["c3", "c4"]);
}

fn acquire_permit(h: &mut Vec<Event>, p: &str, at: u64, ok_at: u64, permits: u32) {
    let mut inv = ev(p, at, Kind::Invoke, Op::Acquire);
    inv.lease_ms = Some(1000);
    inv.permits = Some(permits);
    h.push(inv);
    h.push(ev(p, ok_at, Kind::Ok, Op::Acquire));
}

#[test]
fn a_semaphore_allows_its_permits_at_once_and_no_more() {
    // Two of two permits at once: no violation (and no mutual exclusion check).
    let mut h = Vec::new();
    acquire_permit(&mut h, "c1", 0, 1, 2);
    acquire_permit(&mut h, "c2", 2, 3, 2);
    release(&mut h, "c1", 10, 11, Kind::Ok);
    acquire_permit(&mut h, "c3", 4, 12, 2); // waits for c1's permit
    release(&mut h, "c2", 20, 21, Kind::Ok);
    release(&mut h, "c3", 22, 23, Kind::Ok);
    let r = check(&h, None);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!(r.acquisitions, 3);

    // A third holder while two hold.
    let mut h = Vec::new();
    acquire_permit(&mut h, "c1", 0, 1, 2);
    acquire_permit(&mut h, "c2", 2, 3, 2);
    acquire_permit(&mut h, "c3", 4, 5, 2);
    release(&mut h, "c1", 10, 11, Kind::Ok);
    release(&mut h, "c2", 12, 13, Kind::Ok);
    release(&mut h, "c3", 14, 15, Kind::Ok);
    let r = check(&h, None);
    assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
    let v = &r.violations[0];
    assert_eq!(v.kind, ViolationKind::Occupancy);
    assert_eq!(v.processes, ["c1", "c2", "c3"]);
    assert_eq!((v.from, v.to), (0, 10 * MS));
}

#[test]
fn acquisitions_without_tokens_are_counted_and_checked() {
    // A RedLock's acquisitions carry no token: an overlap is still found.
    let mut h = Vec::new();
    let mut inv = ev("c1", 0, Kind::Invoke, Op::Acquire);
    inv.lease_ms = Some(1000);
    h.push(inv.clone());
    h.push(ev("c1", 1, Kind::Ok, Op::Acquire));
    inv.process = "c2".to_owned();
    inv.time = 2 * MS;
    h.push(inv);
    h.push(ev("c2", 3, Kind::Ok, Op::Acquire));
    release(&mut h, "c1", 10, 11, Kind::Ok);
    release(&mut h, "c2", 12, 13, Kind::Ok);
    let r = check(&h, None);
    assert_eq!(r.acquisitions, 2);
    assert_eq!(r.counts().get("mutual-exclusion"), Some(&1));
}

/// An acquire of `p` with a side or a set of names.
fn acquire_as(
    h: &mut Vec<Event>,
    p: &str,
    at: u64,
    ok_at: u64,
    mode: Option<Mode>,
    names: Option<&[&str]>,
) {
    let mut inv = ev(p, at, Kind::Invoke, Op::Acquire);
    inv.lease_ms = Some(1000);
    inv.mode = mode;
    inv.names = names.map(|n| n.iter().map(|s| (*s).to_owned()).collect());
    h.push(inv);
    h.push(ev(p, ok_at, Kind::Ok, Op::Acquire));
}

#[test]
fn readers_may_overlap_but_a_writer_overlaps_nobody() {
    let mut h = Vec::new();
    acquire_as(&mut h, "c1", 0, 1, Some(Mode::Read), None);
    acquire_as(&mut h, "c2", 2, 3, Some(Mode::Read), None);
    release(&mut h, "c1", 10, 11, Kind::Ok);
    release(&mut h, "c2", 12, 13, Kind::Ok);
    acquire_as(&mut h, "c3", 5, 14, Some(Mode::Write), None);
    release(&mut h, "c3", 20, 21, Kind::Ok);
    let r = check(&h, None);
    assert!(r.violations.is_empty(), "{:?}", r.violations);

    // A writer in while a reader holds.
    let mut h = Vec::new();
    acquire_as(&mut h, "c1", 0, 1, Some(Mode::Read), None);
    acquire_as(&mut h, "c2", 2, 3, Some(Mode::Write), None);
    release(&mut h, "c1", 10, 11, Kind::Ok);
    release(&mut h, "c2", 12, 13, Kind::Ok);
    let r = check(&h, None);
    assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
    assert_eq!(r.violations[0].kind, ViolationKind::MutualExclusion);
    assert!(r.violations[0].description.contains("c2 (write)"));
}

#[test]
fn multi_lock_holds_exclude_per_name() {
    let mut h = Vec::new();
    acquire_as(&mut h, "c1", 0, 1, None, Some(&["a", "b"]));
    acquire_as(&mut h, "c2", 2, 3, None, Some(&["c", "d"]));
    release(&mut h, "c1", 10, 11, Kind::Ok);
    release(&mut h, "c2", 12, 13, Kind::Ok);
    let r = check(&h, None);
    assert!(r.violations.is_empty(), "{:?}", r.violations);

    let mut h = Vec::new();
    acquire_as(&mut h, "c1", 0, 1, None, Some(&["a", "b"]));
    acquire_as(&mut h, "c2", 2, 3, None, Some(&["b", "c", "d"]));
    release(&mut h, "c1", 10, 11, Kind::Ok);
    release(&mut h, "c2", 12, 13, Kind::Ok);
    let r = check(&h, None);
    assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
    assert!(r.violations[0].description.ends_with("both held b"));
}

mod liveness;
