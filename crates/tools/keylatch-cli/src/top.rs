//! `keylatch top`: the operators' view in a terminal, redrawn in place (plain ANSI). `q` quits,
//! `r` refreshes at once; SIGINT and SIGTERM quit too.

use keylatch::{Client, Config};
use std::io::{IsTerminal, Read, Write};

use crate::failure::{EX_USAGE, Failure};
use crate::view::{Snapshot, Watcher, short_duration};
use crate::view_args::TopArgs;

/// Runs until `q`, SIGINT or SIGTERM (or after one view with `--once`).
pub async fn top(config: Config, args: TopArgs) -> Result<(), Failure> {
    let client = Client::connect_with(config).await?;
    if client.as_zookeeper().is_some() {
        return Err(Failure::new(
            EX_USAGE,
            "top reads Redis only for now (ZooKeeper: use `keylatch inspect --watch`)",
        ));
    }
    let mut conn = client.connection().await?;
    let mut watcher = Watcher::new(&args.pattern, &client.config().key_prefix);
    if args.once {
        let view = watcher.refresh(&mut conn).await?;
        print!("{}", render(&view, 200));
        return Ok(());
    }
    let mut keys = keys();
    let mut input_open = true;
    let _raw = RawInput::enable();
    let stop = crate::run::interrupted();
    tokio::pin!(stop);
    loop {
        let width = columns();
        let text = match watcher.refresh(&mut conn).await {
            Ok(view) => render(&view, width),
            Err(err) => format!("keylatch top: cannot read Redis: {}\n", err.message),
        };
        // Home, clear, draw.
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "\x1b[H\x1b[2J{text}");
        let _ = out.flush();
        drop(out);
        tokio::select! {
            () = tokio::time::sleep(args.every) => {}
            () = &mut stop => break,
            key = keys.recv(), if input_open => match key {
                Some(b'q' | b'Q' | 3) => break,
                // No more input (stdin closed): run on until a signal.
                None => input_open = false,
                Some(_) => {}
            },
        }
    }
    let _ = client.shutdown().await;
    Ok(())
}

/// The view as lines of text, cut to `width` columns.
pub fn render(view: &Snapshot, width: usize) -> String {
    let waiters: usize = view.locks.iter().map(|l| l.waiters.len()).sum();
    let mut lines = vec![
        format!(
            "keylatch top  pattern {:?}  {} held, {} waiting{}   (q quits)",
            view.pattern,
            view.locks.len(),
            waiters,
            if view.truncated {
                "  [scan stopped early]"
            } else {
                ""
            }
        ),
        String::new(),
        format!(
            "{:<24} {:>9}  {:<9} {:<44} {:<16} {:>7} {:>9}  PROGRAM",
            "LOCK", "LEASE", "ROLE", "OWNER", "HOST", "PID", "FOR"
        ),
    ];
    for lock in &view.locks {
        let ttl = lock.ttl_ms.map_or("-".to_owned(), short_duration);
        for holder in &lock.holders {
            let held = short_duration(holder.held_ms);
            lines.push(format!(
                "{:<24} {:>9}  {:<9} {:<44} {:<16} {:>7} {:>9}  {}",
                lock.name,
                ttl,
                format!("holds {}", holder.holds),
                holder.owner,
                holder.host.as_deref().unwrap_or("?"),
                holder.pid.map_or("?".to_owned(), |p| p.to_string()),
                if holder.held_exact {
                    held
                } else {
                    format!(">={held}")
                },
                holder.program.as_deref().unwrap_or(""),
            ));
        }
        for waiter in &lock.waiters {
            lines.push(format!(
                "{:<24} {:>9}  {:<9} {:<44} {:<16} {:>7} {:>9}",
                lock.name,
                "",
                format!("waits #{}", waiter.position),
                waiter.owner,
                "",
                "",
                format!(">={}", short_duration(waiter.waited_ms)),
            ));
        }
        if lock.subscribers > 0 {
            lines.push(format!(
                "{:<24} {:>9}  {} client(s) subscribed for its release",
                lock.name, "", lock.subscribers
            ));
        }
    }
    if view.locks.is_empty() {
        lines.push("(no lock held)".to_owned());
    }
    let mut out = String::new();
    for line in lines {
        let cut: String = line.chars().take(width.max(20)).collect();
        out.push_str(cut.trim_end());
        out.push('\n');
    }
    out
}

/// The terminal's width: `COLUMNS`, else what `stty size` says (no ioctl: no unsafe code),
/// else 120.
fn columns() -> usize {
    if let Some(cols) = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()) {
        return cols;
    }
    std::process::Command::new("stty")
        .arg("size")
        .stdin(std::process::Stdio::inherit())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .and_then(|out| {
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.split_whitespace().nth(1).and_then(|c| c.parse().ok())
        })
        .unwrap_or(120)
}

/// Key presses from stdin, one byte each, read on a thread of their own.
fn keys() -> tokio::sync::mpsc::UnboundedReceiver<u8> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        let mut stdin = std::io::stdin();
        while let Ok(1) = stdin.read(&mut byte) {
            if tx.send(byte[0]).is_err() {
                return;
            }
        }
    });
    rx
}

/// The terminal without line buffering and echo while `top` runs (restored on drop).
struct RawInput(Option<nix::sys::termios::Termios>);

impl RawInput {
    fn enable() -> RawInput {
        use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return RawInput(None);
        }
        let Ok(saved) = tcgetattr(&stdin) else {
            return RawInput(None);
        };
        let mut raw = saved.clone();
        raw.local_flags
            .remove(LocalFlags::ICANON | LocalFlags::ECHO);
        let _ = tcsetattr(&stdin, SetArg::TCSANOW, &raw);
        RawInput(Some(saved))
    }
}

impl Drop for RawInput {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin(),
                nix::sys::termios::SetArg::TCSANOW,
                saved,
            );
        }
        println!();
        let _ = std::io::stdout().flush();
    }
}

impl std::fmt::Debug for RawInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RawInput")
    }
}
