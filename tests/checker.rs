//! The fault suite's checker: reads the workers' event logs and computes what must hold.

use serde_json::Value;

/// One worker event (a parsed JSON line).
pub type Event = Value;

/// Parses a worker's stdout; lines that are not JSON are skipped.
pub fn parse(output: &str) -> Vec<Event> {
    output
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A validity window: from acquisition to the earlier of the release and the local validity
/// deadline, in µs of wall-clock time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The worker.
    pub worker: u64,
    /// Acquired at.
    pub start: u128,
    /// Valid until.
    pub end: u128,
    /// The fencing token.
    pub token: u64,
}

fn num(v: &Value) -> u128 {
    v.as_u64()
        .map(u128::from)
        .or_else(|| v.as_f64().map(|f| f as u128))
        .unwrap_or(0)
}

/// The validity windows of all workers' critical sections.
pub fn windows(events: &[Event]) -> Vec<Window> {
    let mut open: std::collections::HashMap<(u64, u64), (u128, u128, u64)> = Default::default();
    let mut out = Vec::new();
    for ev in events {
        let worker = ev["w"].as_u64().unwrap_or(0);
        let i = ev["i"].as_u64().unwrap_or(0);
        match ev["ev"].as_str() {
            Some("acquired") => {
                open.insert(
                    (worker, i),
                    (
                        num(&ev["t"]),
                        num(&ev["until"]),
                        ev["token"].as_u64().unwrap_or(0),
                    ),
                );
            }
            Some("released") => {
                if let Some((start, until, token)) = open.remove(&(worker, i)) {
                    let until = until.max(num(&ev["until"]));
                    out.push(Window {
                        worker,
                        start,
                        end: num(&ev["t"]).min(until),
                        token,
                    });
                }
            }
            _ => {}
        }
    }
    out.sort_by_key(|w| w.start);
    out
}

/// Pairs of windows of different workers that overlap.
pub fn overlaps(windows: &[Window]) -> usize {
    let mut count = 0;
    for (i, a) in windows.iter().enumerate() {
        for b in &windows[i + 1..] {
            if b.start >= a.end {
                break;
            }
            if a.worker != b.worker {
                count += 1;
            }
        }
    }
    count
}

/// Whether fencing tokens strictly increase in acquisition order.
pub fn tokens_strictly_increase(windows: &[Window]) -> bool {
    windows.windows(2).all(|w| w[1].token > w[0].token)
}

/// The longest gap from one window's end to the next window's start (a stalled hand-off).
pub fn longest_gap_us(windows: &[Window]) -> u128 {
    windows
        .windows(2)
        .map(|w| w[1].start.saturating_sub(w[0].end))
        .max()
        .unwrap_or(0)
}

/// Events of a kind.
pub fn count(events: &[Event], kind: &str) -> usize {
    events.iter().filter(|e| e["ev"] == kind).count()
}

/// Writes the fenced oracle accepted.
pub fn accepted_writes(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| e["ev"] == "write" && e["ok"] == true)
        .count()
}

/// The most windows valid at the same instant (for semaphores: at most P).
pub fn max_concurrent(windows: &[Window]) -> usize {
    let mut edges: Vec<(u128, i32)> = Vec::new();
    for w in windows {
        edges.push((w.start, 1));
        edges.push((w.end, -1));
    }
    // Ends sort before starts at the same instant: touching windows do not overlap.
    edges.sort();
    let (mut now, mut max) = (0i32, 0i32);
    for (_, delta) in edges {
        now += delta;
        max = max.max(now);
    }
    usize::try_from(max).unwrap_or(0)
}

/// Windows of workers that held until they were killed: from `acquired` to the last validity
/// deadline they reported while not lost.
pub fn held_windows(events: &[Event]) -> Vec<Window> {
    let mut by_worker: std::collections::BTreeMap<u64, (u128, u128, u64)> = Default::default();
    for ev in events {
        let worker = ev["w"].as_u64().unwrap_or(0);
        match ev["ev"].as_str() {
            Some("acquired") => {
                by_worker.insert(
                    worker,
                    (
                        num(&ev["t"]),
                        num(&ev["until"]),
                        ev["token"].as_u64().unwrap_or(0),
                    ),
                );
            }
            Some("check") if ev["lost"] == false => {
                if let Some(entry) = by_worker.get_mut(&worker) {
                    entry.1 = entry.1.max(num(&ev["until"]));
                }
            }
            _ => {}
        }
    }
    by_worker
        .into_iter()
        .map(|(worker, (start, end, token))| Window {
            worker,
            start,
            end,
            token,
        })
        .collect()
}
