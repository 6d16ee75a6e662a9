//! Processes a test starts, each in its own process group, all killed when the test ends
//! (also when it fails).

use std::process::{Child, Command};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Kills every process group it started on drop.
#[derive(Debug, Default)]
pub struct Procs(Vec<Child>);

impl Procs {
    /// Starts `cmd` in a new process group and keeps it.
    pub fn spawn(&mut self, cmd: &mut Command) -> &mut Child {
        use std::os::unix::process::CommandExt;
        let child = cmd.process_group(0).spawn().expect("spawn");
        self.0.push(child);
        self.0.last_mut().unwrap()
    }

    /// Sends SIGTERM to the group of the process `pid` started here, and waits for it.
    pub fn terminate(&mut self, pid: u32) {
        if let Some(i) = self.0.iter().position(|c| c.id() == pid) {
            let mut child = self.0.remove(i);
            let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGTERM);
            let _ = child.wait();
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = child.wait();
        }
    }
}

/// A free port on 127.0.0.1 (bound, then let go).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP/1.1 request to 127.0.0.1:`port` (`Connection: close`): the status and body.
pub fn http(port: u16, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let head =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    match body {
        Some(body) => write!(
            stream,
            "{head}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
        None => write!(stream, "{head}\r\n"),
    }
    .unwrap();
    // Read the head, then the body by its length (chromedriver keeps the connection open).
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let mut head_end = None;
    let mut want = None;
    loop {
        if let (Some(end), Some(len)) = (head_end, want)
            && raw.len() >= end + 4 + len
        {
            break;
        }
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        raw.extend_from_slice(&buf[..n]);
        if head_end.is_none() {
            head_end = raw.windows(4).position(|w| w == b"\r\n\r\n");
            if let Some(end) = head_end {
                let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
                want = head.lines().find_map(|l| {
                    l.strip_prefix("content-length:")
                        .and_then(|v| v.trim().parse::<usize>().ok())
                });
            }
        }
    }
    let split = head_end.unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let rest = raw.get(split + 4..).unwrap_or_default();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = if head.contains("transfer-encoding: chunked") {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Kills (SIGKILL, by pid) every process whose command line mentions `marker`: the browser's
/// processes, which leave chromedriver's process group; `marker` is the test's own profile
/// directory, so nothing else matches.
pub fn kill_mentioning(marker: &str) {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(marker) {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&rest[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok());
        let tail = &rest[eol + 2..];
        match size {
            Some(size) if size > 0 && tail.len() >= size => {
                out.extend_from_slice(&tail[..size]);
                rest = tail[size..].strip_prefix(b"\r\n").unwrap_or(&tail[size..]);
            }
            _ => break,
        }
    }
    out
}
