//! Worker processes for the fault suite: spawn, watch their events, signal them.

use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A running worker process and the events it has printed so far.
#[derive(Debug)]
pub struct Worker {
    child: Child,
    pid: u32,
    events: Arc<Mutex<Vec<Value>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Worker {
    /// Starts `binary` with `args`; stdout lines are parsed as events.
    pub fn spawn(binary: &str, args: &[String]) -> Worker {
        let mut child = Command::new(binary)
            .args(args)
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn worker");
        let pid = child.id().expect("pid");
        let stdout = child.stdout.take().expect("stdout");
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(event) = serde_json::from_str::<Value>(&line) {
                    sink.lock().unwrap().push(event);
                }
            }
        });
        Worker {
            child,
            pid,
            events,
            reader,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The events so far.
    pub fn events(&self) -> Vec<Value> {
        self.events.lock().unwrap().clone()
    }

    /// Waits up to `within` for an event matching `pred`.
    pub async fn wait_for(&self, within: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(ev) = self.events.lock().unwrap().iter().find(|e| pred(e)) {
                return Some(ev.clone());
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Sends a signal by name (`KILL`, `STOP`, `CONT`, `TERM`).
    pub fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid.to_string())
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{name} {}", self.pid);
    }

    /// Waits for the process to exit (at most `within`, then kills it) and returns its status
    /// and every event.
    pub async fn finish(mut self, within: Duration) -> (Option<ExitStatus>, Vec<Value>) {
        let status = match tokio::time::timeout(within, self.child.wait()).await {
            Ok(status) => status.ok(),
            Err(_) => {
                let _ = self.child.kill().await;
                None
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.reader).await;
        let events = self.events.lock().unwrap().clone();
        (status, events)
    }
}

/// Command-line arguments for the fault worker.
pub fn args(pairs: &[(&str, String)], flags: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in pairs {
        out.push(format!("--{k}"));
        out.push(v.clone());
    }
    for f in flags {
        out.push(format!("--{f}"));
    }
    out
}
