//! Small helpers: free ports, temporary directories and log tails.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The server's log file, in its directory.
pub(crate) const LOG_FILE: &str = "redis.log";
/// Where the server's stdout and stderr go (config errors show up here).
pub(crate) const STDIO_FILE: &str = "redis.stdio.log";

/// Lines of each log quoted in startup errors.
const LOG_TAIL_LINES: usize = 20;

/// Ports handed to live servers of this process, so two never get the same one.
static PORTS_IN_USE: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// Picks a free loopback port not used by another server of this process.
pub(crate) fn reserve_free_port() -> io::Result<u16> {
    for _ in 0..50 {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        let mut guard = PORTS_IN_USE.lock().unwrap_or_else(|p| p.into_inner());
        if guard.get_or_insert_with(HashSet::new).insert(port) {
            return Ok(port);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        "no free loopback port found",
    ))
}

/// Offset of a cluster node's bus port from its client port (fixed by Redis).
pub(crate) const CLUSTER_BUS_OFFSET: u16 = 10000;

/// Picks a free loopback port for a Redis Cluster node: its bus port, `port + 10000`,
/// must exist (so `port` is below 55536) and be free too. Reserves both; release them
/// with [`release_port`] each.
pub(crate) fn reserve_free_cluster_port() -> io::Result<u16> {
    // Rejected ports stay bound until we return, so the kernel offers new ones.
    let mut rejected = Vec::new();
    for _ in 0..200 {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let port = listener.local_addr()?.port();
        rejected.push(listener);
        let Some(bus) = port.checked_add(CLUSTER_BUS_OFFSET) else {
            continue;
        };
        if TcpListener::bind((Ipv4Addr::LOCALHOST, bus)).is_err() {
            continue;
        }
        let mut guard = PORTS_IN_USE.lock().unwrap_or_else(|p| p.into_inner());
        let in_use = guard.get_or_insert_with(HashSet::new);
        if !in_use.contains(&port) && !in_use.contains(&bus) {
            in_use.insert(port);
            in_use.insert(bus);
            return Ok(port);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        "no free loopback port below 55536 with its cluster bus port (+10000) free too",
    ))
}

pub(crate) fn release_port(port: u16) {
    let mut guard = PORTS_IN_USE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(set) = guard.as_mut() {
        set.remove(&port);
    }
}

pub(crate) fn make_temp_dir() -> io::Result<PathBuf> {
    // Kept (not deleted on drop): the server owns the directory and removes it when it stops.
    tempfile::Builder::new()
        .prefix(&format!("keylatch-redis-{}-", std::process::id()))
        .tempdir()
        .map(tempfile::TempDir::keep)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create a temp dir: {e}")))
}

/// Deletes everything in `dir` except the log files and the file named `keep`, if any
/// (dump.rdb, AOF dir, ...).
pub(crate) fn clear_data_files(dir: &Path, keep: Option<&str>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == LOG_FILE || name == STDIO_FILE || keep.is_some_and(|k| name == k) {
            continue;
        }
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            fs::remove_dir_all(&path)?;
        } else {
            fs::remove_file(&path)?;
        }
    }
    Ok(())
}

pub(crate) fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}

/// The last lines of `path` written after byte `from`.
pub(crate) fn tail(path: &Path, from: u64) -> String {
    let mut text = String::new();
    let read = File::open(path).and_then(|mut f| {
        f.seek(SeekFrom::Start(from))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)?;
        text = String::from_utf8_lossy(&buf).into_owned();
        Ok(())
    });
    if let Err(e) = read {
        return format!("(cannot read: {e})");
    }
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return "(empty)".to_owned();
    }
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}
