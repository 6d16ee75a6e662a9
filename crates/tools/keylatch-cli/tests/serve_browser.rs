//! `keylatch serve` in a real browser: Debian's headless Chromium, driven through
//! chromedriver's WebDriver HTTP API, loads the page while `keylatch run` processes hold and
//! wait for locks; the test reads the rendered holders and waiters, checks them against Redis,
//! takes a screenshot (under target/), and sees the page update itself when the hold passes on.
mod common;

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::procs::{Procs, free_port, http, kill_mentioning};
use common::{keylatch, server};
use serde_json::{Value, json};

/// A WebDriver session on chromedriver at `port`.
struct Session {
    port: u16,
    id: String,
}

impl Session {
    fn start(port: u16, profile: &std::path::Path) -> Session {
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": ["--headless", "--no-sandbox", "--disable-gpu",
                         "--disable-background-networking", "--disable-component-update",
                         "--disable-sync", "--no-first-run", "--window-size=1400,900",
                         format!("--user-data-dir={}", profile.display())]
            }
        }}});
        let reply = call(port, "POST", "/session", Some(caps));
        let id = reply["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {reply}"))
            .to_owned();
        Session { port, id }
    }

    fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let reply = call(
            self.port,
            method,
            &format!("/session/{}{path}", self.id),
            body,
        );
        reply["value"].clone()
    }

    /// Each element matching `css` as the browser renders it now (read in one script, so a
    /// refresh cannot swap the elements in between): (its text, the values of `attrs`).
    fn rows(&self, css: &str, attrs: &[&str]) -> Vec<(String, Vec<String>)> {
        let found = self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({
                "script": "var attrs = arguments[1]; \
                           return Array.from(document.querySelectorAll(arguments[0])).map(\
                           function (e) { return [e.innerText].concat(attrs.map(\
                           function (a) { return e.getAttribute(a) || ''; })); });",
                "args": [css, attrs],
            })),
        );
        found
            .as_array()
            .unwrap_or_else(|| panic!("rows of {css}: {found}"))
            .iter()
            .map(|row| {
                let cells: Vec<String> = row
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap_or_default().to_owned())
                    .collect();
                (cells[0].clone(), cells[1..].to_vec())
            })
            .collect()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = call(self.port, "DELETE", &format!("/session/{}", self.id), None);
    }
}

fn call(port: u16, method: &str, path: &str, body: Option<Value>) -> Value {
    let body = body.map(|b| b.to_string());
    let (_, text) = http(port, method, path, body.as_deref());
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// Kills the browser's processes and removes its profile on drop.
struct Browser(std::path::PathBuf);

impl Drop for Browser {
    fn drop(&mut self) {
        kill_mentioning(&self.0.display().to_string());
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Polls `check` every 200 ms for at most `within`.
fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

#[test]
fn the_page_lists_holders_and_waiters_and_follows_a_hand_over() {
    let (Ok(_), Ok(_)) = (
        std::fs::metadata("/usr/bin/chromium"),
        std::fs::metadata("/usr/bin/chromedriver"),
    ) else {
        keylatch_testkit::report_skip(
            "chromium and chromium-driver are not installed (scripts/setup.sh --browser)",
        );
        return;
    };
    let server = server();
    let mut procs = Procs::default();

    // The page, on a port the server picks; its first line says where.
    let serve = procs.spawn(
        keylatch(
            &server,
            &["serve", "--http", "127.0.0.1:0", "--every", "300ms"],
        )
        .stdout(Stdio::piped()),
    );
    let mut first = String::new();
    std::io::BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let port: u16 = first
        .trim()
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("serve said {first:?}"));

    // A reentrant holder (with metadata), a fair holder and two fair waiters, in order.
    let plain = procs
        .spawn(&mut keylatch(
            &server,
            &["run", "web-plain", "--", "sleep", "300"],
        ))
        .id();
    let fair_holder = procs
        .spawn(&mut keylatch(
            &server,
            &["run", "--fair", "web-fair", "--", "sleep", "300"],
        ))
        .id();
    assert!(eventually(Duration::from_secs(20), || {
        server.cli(&["EXISTS", "web-fair"]).unwrap().trim() == "1"
    }));
    for _ in 0..2 {
        procs.spawn(&mut keylatch(
            &server,
            &["run", "--fair", "web-fair", "--", "sleep", "300"],
        ));
        let before = server
            .cli(&["LLEN", "redisson_lock_queue:{web-fair}"])
            .unwrap();
        let before: usize = before.trim().parse().unwrap();
        assert!(eventually(Duration::from_secs(20), || {
            let now = server
                .cli(&["LLEN", "redisson_lock_queue:{web-fair}"])
                .unwrap();
            now.trim().parse::<usize>().unwrap() > before
        }));
    }
    let queue: Vec<String> = server
        .cli(&["LRANGE", "redisson_lock_queue:{web-fair}", "0", "-1"])
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(queue.len(), 2, "{queue:?}");
    let fair_owner = server
        .cli(&["HKEYS", "web-fair"])
        .unwrap()
        .trim()
        .to_owned();
    let plain_owner = server
        .cli(&["HKEYS", "web-plain"])
        .unwrap()
        .trim()
        .to_owned();

    // The HTML as first served already lists them (what curl and screen readers get).
    assert!(eventually(Duration::from_secs(10), || {
        let (status, html) = http(port, "GET", "/", None);
        status == 200
            && html.contains(&format!("data-owner=\"{plain_owner}\""))
            && html.contains(&format!("data-owner=\"{}\"", queue[1]))
    }));
    let (_, metrics) = http(port, "GET", "/metrics", None);
    assert!(metrics.contains("keylatch_locks_held 2"), "{metrics}");
    assert!(metrics.contains("keylatch_lock_waiters 2"), "{metrics}");

    // The browser.
    let driver_port = free_port();
    let profile = std::env::temp_dir().join(format!("keylatch-chromium-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&profile);
    // Whatever happens, the browser goes (after chromedriver's own group, on drop).
    let _browser = Browser(profile.clone());
    procs.spawn(
        Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={driver_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    assert!(eventually(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", driver_port)).is_ok()
    }));
    let session = Session::start(driver_port, &profile);
    session.cmd(
        "POST",
        "/url",
        Some(json!({ "url": format!("http://127.0.0.1:{port}/") })),
    );

    let holders = session.rows("tr.holder", &["data-lock", "data-owner", "data-pid"]);
    let waiters = session.rows("tr.waiter", &["data-lock", "data-owner", "data-position"]);
    let of = |rows: &[(String, Vec<String>)], lock: &str| -> Vec<Vec<String>> {
        rows.iter()
            .filter(|(_, v)| v[0] == lock)
            .map(|(_, v)| v.clone())
            .collect()
    };
    // The reentrant holder with the pid of the `keylatch run` that holds it, and its command.
    let plain_rows = of(&holders, "web-plain");
    assert_eq!(plain_rows.len(), 1, "{holders:?}");
    assert_eq!(plain_rows[0][1], plain_owner);
    assert_eq!(plain_rows[0][2], plain.to_string());
    let plain_text = &holders.iter().find(|(_, v)| v[0] == "web-plain").unwrap().0;
    assert!(plain_text.contains("sleep 300"), "{plain_text}");
    // The fair lock: its holder, then the waiters in the queue's order.
    assert_eq!(of(&holders, "web-fair")[0][1], fair_owner);
    let fair_waiters: Vec<(String, String)> = of(&waiters, "web-fair")
        .into_iter()
        .map(|v| (v[1].clone(), v[2].clone()))
        .collect();
    assert_eq!(
        fair_waiters,
        vec![
            (queue[0].clone(), "1".to_owned()),
            (queue[1].clone(), "2".to_owned())
        ]
    );

    // A screenshot, for a human to look at.
    let png = session.cmd("GET", "/screenshot", None);
    let png = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        png.as_str().unwrap_or_default(),
    )
    .expect("a base64 screenshot");
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("serve.png"), &png).unwrap();

    // The hold passes on: the page (not reloaded) shows the first waiter as the holder, and
    // the second as the only waiter.
    procs.terminate(fair_holder);
    let updated = eventually(Duration::from_secs(30), || {
        let holders = session.rows("tr.holder", &["data-lock", "data-owner"]);
        let waiters = session.rows("tr.waiter", &["data-lock", "data-owner"]);
        of(&holders, "web-fair").first().map(|v| v[1].as_str()) == Some(queue[0].as_str())
            && of(&waiters, "web-fair")
                .iter()
                .map(|v| v[1].as_str())
                .collect::<Vec<_>>()
                == vec![queue[1].as_str()]
    });
    assert!(updated, "the page did not follow the hand-over");
    drop(session);
}
