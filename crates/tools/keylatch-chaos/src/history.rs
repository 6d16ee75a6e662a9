//! The recorded history: one JSON object a line, `invoke` then `ok` / `fail` / `info`.

use serde::{Deserialize, Serialize};

/// The process name the nemesis records its events under.
pub const NEMESIS: &str = "nemesis";

/// What an event says about its operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The operation starts.
    Invoke,
    /// It took effect.
    Ok,
    /// It certainly did not take effect.
    Fail,
    /// Its outcome is unknown (a timeout, a lost connection).
    Info,
}

/// The operation an event belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Acquire the lock (with a fixed lease, or in watchdog mode).
    Acquire,
    /// A fenced write to the register.
    Write,
    /// An unfenced read-modify-write of the plain counter (`value`: what was written, on
    /// `ok`): read it, wait, write back what was read plus one.
    Update,
    /// The worker saw its hold lost (`ok` only, no `invoke`): a watchdog hold ends here.
    Lost,
    /// Release the lock.
    Release,
    /// A fault starts (`invoke`) or is healed (`ok`).
    Nemesis,
}

/// How a worker holds: a fixed lease, or renewed by the watchdog until released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum HoldMode {
    /// No fixed lease: the watchdog renews the hold (`lock()`, what most users run).
    #[default]
    Watchdog,
    /// A fixed lease of `--lease-ms` on every acquisition, never renewed.
    Lease,
}

impl std::fmt::Display for HoldMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HoldMode::Watchdog => "watchdog",
            HoldMode::Lease => "lease",
        })
    }
}

/// The side of a read-write lock an acquisition takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Shared with other readers.
    Read,
    /// Exclusive.
    Write,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Read => "read",
            Mode::Write => "write",
        })
    }
}

/// One event of the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// `c1`, `c2`, … for workers, [`NEMESIS`] for faults.
    pub process: String,
    /// Nanoseconds on the host's monotonic clock ([`crate::clock::now_ns`]).
    pub time: u64,
    /// invoke / ok / fail / info.
    #[serde(rename = "type")]
    pub kind: Kind,
    /// The operation.
    #[serde(rename = "f")]
    pub op: Op,
    /// The fencing token: of the acquisition (acquire ok) or sent with a write (write invoke).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// The lock owner of an acquisition (acquire ok).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The fixed lease asked for (acquire invoke of the lease mode), in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    /// The watchdog timeout asked for (acquire invoke of the watchdog mode: no fixed lease,
    /// renewed while held), in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watchdog_ms: Option<u64>,
    /// The counter's value an update wrote (update ok).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
    /// How many holders may hold at once (acquire invoke of a semaphore; none: one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permits: Option<u32>,
    /// The side taken (acquire invoke of a read-write lock; none: exclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// The locks taken at once (acquire invoke of a multi-lock; none: the one lock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
    /// Whether the lock grants in arrival order (acquire invoke of a fair lock; none: no
    /// order promised).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fifo: Option<bool>,
    /// A write's unique id, as the register logs it (write invoke).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_id: Option<String>,
    /// An error's text, or what a fault does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Event {
    /// An event with no optional fields.
    pub fn new(process: &str, time: u64, kind: Kind, op: Op) -> Event {
        Event {
            process: process.to_owned(),
            time,
            kind,
            op,
            token: None,
            owner: None,
            lease_ms: None,
            watchdog_ms: None,
            value: None,
            permits: None,
            mode: None,
            names: None,
            fifo: None,
            write_id: None,
            detail: None,
        }
    }

    /// The same event with a token.
    pub fn token(mut self, token: u64) -> Event {
        self.token = Some(token);
        self
    }

    /// The same event with a detail.
    pub fn detail(mut self, detail: impl Into<String>) -> Event {
        self.detail = Some(detail.into());
        self
    }
}

/// The worker (1-based) whose last lock event is an acknowledged acquire, if any.
pub fn current_holder(history: &[Event], workers: usize) -> Option<usize> {
    (1..=workers).find(|i| {
        let name = format!("c{i}");
        history
            .iter()
            .rev()
            .filter(|e| e.process == name && matches!(e.op, Op::Acquire | Op::Release))
            .find(|e| e.kind != Kind::Invoke || e.op == Op::Release)
            .is_some_and(|e| e.op == Op::Acquire && e.kind == Kind::Ok)
    })
}
