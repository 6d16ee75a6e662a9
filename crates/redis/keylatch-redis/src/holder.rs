//! Holder metadata: who holds a hold (host, process id, program, since when), kept by the
//! acquiring script in keylatch's own hash `keylatch_meta:{name}` beside the lock, one field
//! per owner id, with the lock's expiry. Redisson never reads that key.
//!
//! A field's value is lines of `key=value`: `since_ms` (the server's clock when the owner's
//! first hold began, ms since the epoch, written by the script), then `host`, `pid` and
//! `program` as the client wrote them. Unknown keys are ignored by [`HolderMeta::parse`].

use crate::keys::prefixed;

/// The prefix of the holder metadata hash: `keylatch_meta:{name}`.
pub const HOLDER_META_PREFIX: &str = "keylatch_meta";

/// The most bytes of a program's command line that are recorded.
const MAX_PROGRAM: usize = 256;

/// The holder metadata hash of the lock key `name` (in its cluster slot).
pub fn holder_meta_key(name: &str) -> String {
    prefixed(HOLDER_META_PREFIX, name)
}

/// The lines a client records for each of its holds (without `since_ms`, which the script
/// adds from the server's clock): `host=…`, `pid=…`, `program=…`. `program` defaults to this
/// process's command line.
pub(crate) fn metadata_lines(program: Option<&str>) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    let program = program.map_or_else(
        || std::env::args().collect::<Vec<_>>().join(" "),
        str::to_owned,
    );
    format!(
        "host={}\npid={}\nprogram={}",
        one_line(&host, 255),
        std::process::id(),
        one_line(&program, MAX_PROGRAM)
    )
}

/// `text` on one line (control characters as spaces), cut to at most `max` bytes.
fn one_line(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for c in text.chars() {
        let c = if c.is_control() { ' ' } else { c };
        if out.len() + c.len_utf8() > max {
            break;
        }
        out.push(c);
    }
    out
}

/// One holder's metadata, as read back from its field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HolderMeta {
    /// When the owner's first hold began, ms since the epoch on the server's clock.
    pub since_ms: Option<i64>,
    /// The holder's host name.
    pub host: Option<String>,
    /// The holder's process id.
    pub pid: Option<u32>,
    /// The holder's program (its command line, or what it was configured to say).
    pub program: Option<String>,
}

impl HolderMeta {
    /// Reads a field's value; keys it does not know are skipped.
    pub fn parse(value: &str) -> HolderMeta {
        let mut meta = HolderMeta::default();
        for line in value.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            match key {
                "since_ms" => meta.since_ms = value.parse().ok(),
                "host" => meta.host = Some(value.to_owned()),
                "pid" => meta.pid = value.parse().ok(),
                "program" => meta.program = Some(value.to_owned()),
                _ => {}
            }
        }
        meta
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let lines = metadata_lines(Some("sh -c 'echo\nhi'"));
        let meta = HolderMeta::parse(&format!("since_ms=17\n{lines}"));
        assert_eq!(meta.since_ms, Some(17));
        assert_eq!(meta.pid, Some(std::process::id()));
        assert_eq!(meta.program.as_deref(), Some("sh -c 'echo hi'"));
        assert!(meta.host.is_some_and(|h| !h.is_empty()));
    }

    #[test]
    fn long_programs_are_cut() {
        let lines = metadata_lines(Some(&"é".repeat(400)));
        let meta = HolderMeta::parse(&lines);
        assert!(meta.program.unwrap().len() <= MAX_PROGRAM);
    }

    #[test]
    fn key_is_in_the_lock_slot() {
        assert_eq!(holder_meta_key("jobs"), "keylatch_meta:{jobs}");
        assert_eq!(holder_meta_key("{a}b"), "keylatch_meta:{a}b");
    }
}
