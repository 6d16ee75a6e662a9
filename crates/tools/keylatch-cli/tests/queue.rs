//! `keylatch queue`: offer and take across processes with each codec, `take --wait` ending
//! with 75, `inspect --json`, and the transfer agent recovering (and saying so) after its
//! subscription is killed and after a server restart, with nothing left stuck.
mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{RedisServer, json_output, keylatch, output, server};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ok(out: std::process::Output) -> std::process::Output {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn offer_then_take_round_trips_each_codec_in_due_order() {
    let server = server();
    ok(output(
        &server,
        &["queue", "offer", "cli-q-rt", "later", "--delay", "400ms"],
    ));
    ok(output(
        &server,
        &[
            "queue",
            "offer",
            "cli-q-rt",
            "héllo wörld",
            "--delay",
            "100ms",
        ],
    ));
    let first = ok(output(
        &server,
        &["queue", "take", "cli-q-rt", "--wait", "10s"],
    ));
    assert_eq!(stdout(&first), "héllo wörld\n");
    let second = ok(output(
        &server,
        &["queue", "take", "cli-q-rt", "--wait", "10s"],
    ));
    assert_eq!(stdout(&second), "later\n");

    ok(output(
        &server,
        &["queue", "offer", "cli-q-long", "-42", "--codec", "long"],
    ));
    assert_eq!(
        server.cli(&["LRANGE", "cli-q-long", "0", "-1"]).unwrap(),
        "",
        "not moved before a take"
    );
    let long = ok(output(
        &server,
        &[
            "queue",
            "take",
            "cli-q-long",
            "--codec",
            "long",
            "--wait",
            "5s",
        ],
    ));
    assert_eq!(stdout(&long), "-42\n");
    let bad = output(
        &server,
        &["queue", "offer", "cli-q-long", "4x", "--codec", "long"],
    );
    assert_eq!(bad.status.code(), Some(64));

    // Kryo5Codec's bytes of "é": the class id of String, the flagged length, UTF-8.
    ok(output(
        &server,
        &["queue", "offer", "cli-q-kryo", "é", "--codec", "kryo"],
    ));
    let stored = ok(output(
        &server,
        &[
            "queue",
            "take",
            "cli-q-kryo",
            "--codec",
            "bytes",
            "--wait",
            "5s",
        ],
    ));
    assert_eq!(stored.stdout, [0x03, 0x82, 0xC3, 0xA9]);
    ok(output(
        &server,
        &["queue", "offer", "cli-q-kryo", "é", "--codec", "kryo"],
    ));
    let kryo = ok(output(
        &server,
        &[
            "queue",
            "take",
            "cli-q-kryo",
            "--codec",
            "kryo",
            "--wait",
            "5s",
        ],
    ));
    assert_eq!(stdout(&kryo), "é\n");

    ok(output(
        &server,
        &["queue", "offer", "cli-q-bytes", "raw", "--codec", "bytes"],
    ));
    let raw = ok(output(
        &server,
        &[
            "queue",
            "take",
            "cli-q-bytes",
            "--codec",
            "bytes",
            "--wait",
            "5s",
        ],
    ));
    assert_eq!(raw.stdout, b"raw", "bytes are printed as they are");
}

#[test]
fn take_with_wait_exits_75_when_nothing_is_due_in_time() {
    let server = server();
    ok(output(
        &server,
        &["queue", "offer", "cli-q-wait", "x", "--delay", "1h"],
    ));
    let started = Instant::now();
    let out = output(&server, &["queue", "take", "cli-q-wait", "--wait", "300ms"]);
    assert_eq!(out.status.code(), Some(75));
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing was due"));
    assert!(out.stdout.is_empty());
    let now = output(&server, &["queue", "take", "cli-q-wait", "--wait", "0s"]);
    assert_eq!(now.status.code(), Some(75));
    // The element is still there.
    let report = json_output(&output(
        &server,
        &["queue", "inspect", "cli-q-wait", "--json"],
    ));
    assert_eq!(report["backlog"], 1);
}

#[test]
fn inspect_json_reports_backlog_due_ready_overdue_age_and_subscribers() {
    let server = server();
    for (value, delay) in [("a", "0s"), ("b", "0s"), ("c", "1h")] {
        ok(output(
            &server,
            &["queue", "offer", "cli-q-insp", value, "--delay", delay],
        ));
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut subscriber = Subscriber::start(&server, "redisson_delay_queue_channel:{cli-q-insp}");
    let report = json_output(&output(
        &server,
        &["queue", "inspect", "cli-q-insp", "--json"],
    ));
    assert_eq!(report["primitive"], "delayed_queue");
    assert_eq!(report["backlog"], 3);
    assert_eq!(report["due_now"], 2);
    assert_eq!(report["ready"], 0);
    assert!(
        report["oldest_overdue_ms"].as_u64().unwrap() >= 250,
        "{report}"
    );
    assert_eq!(report["channel_subscribers"], 1);
    assert_eq!(report["sharded_subscribers"], 0);
    assert_eq!(
        (report["processing"].clone(), report["dead_letters"].clone()),
        (0.into(), 0.into())
    );
    subscriber.stop();
    std::thread::sleep(Duration::from_millis(200));
    // A take moves the due ones: one taken, one ready, none overdue.
    ok(output(
        &server,
        &["queue", "take", "cli-q-insp", "--wait", "0s"],
    ));
    let report = json_output(&output(
        &server,
        &["queue", "inspect", "cli-q-insp", "--json"],
    ));
    assert_eq!(
        (
            report["backlog"].clone(),
            report["due_now"].clone(),
            report["ready"].clone()
        ),
        (1.into(), 0.into(), 1.into())
    );
    assert!(report["oldest_overdue_ms"].is_null());
    assert_eq!(report["channel_subscribers"], 0);
}

/// A bare `SUBSCRIBE` on a channel over a plain TCP connection, as a Redisson transfer task
/// holds one.
struct Subscriber(std::net::TcpStream);

impl Subscriber {
    fn start(server: &RedisServer, channel: &str) -> Subscriber {
        use std::io::{Read, Write};
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            conn,
            "*2\r\n$9\r\nSUBSCRIBE\r\n${}\r\n{channel}\r\n",
            channel.len()
        )
        .unwrap();
        // The confirmation ends with the count of this connection's subscriptions, `:1`.
        let mut reply = Vec::new();
        let mut byte = [0u8];
        while !reply.ends_with(b":1\r\n") {
            conn.read_exact(&mut byte).unwrap();
            reply.push(byte[0]);
        }
        Subscriber(conn)
    }

    fn stop(&mut self) {
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

/// The agent's process and its stdout lines.
struct Agent {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Agent {
    fn start(server: &RedisServer, names: &[&str]) -> Agent {
        let mut args = vec!["queue", "transfer"];
        args.extend_from_slice(names);
        // Far longer than any wait below: only the channel and the recoveries wake it.
        args.extend_from_slice(&["--max-sleep", "1h"]);
        let mut child = keylatch(server, &args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let agent = Agent { child, lines };
        agent.expect_line("transfer agent:");
        agent
    }

    fn expect_line(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(_) => panic!("the agent never printed {needle:?}"),
            }
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (30 s at most) until the list `name` holds `n` elements.
fn wait_ready(server: &RedisServer, name: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(len) = server.cli(&["LLEN", name])
            && len == n.to_string()
        {
            return;
        }
        assert!(Instant::now() < deadline, "{name} never held {n}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn offer(server: &RedisServer, name: &str, value: &str, delay: &str) {
    ok(output(
        server,
        &["queue", "offer", name, value, "--delay", delay],
    ));
}

#[test]
fn the_agent_moves_due_elements_and_recovers_after_its_subscription_is_killed() {
    let server = server();
    let agent = Agent::start(&server, &["cli-q-agent-a", "cli-q-agent-b"]);
    offer(&server, "cli-q-agent-a", "1", "300ms");
    offer(&server, "cli-q-agent-b", "2", "200ms");
    wait_ready(&server, "cli-q-agent-a", 1);
    wait_ready(&server, "cli-q-agent-b", 1);

    let killed = server.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]).unwrap();
    assert_ne!(killed, "0", "no subscriber was killed");
    agent.expect_line("recovery 1: pub/sub connection re-established");
    // Due after the recovery: only the re-subscribed channel wakes the agent in time.
    offer(&server, "cli-q-agent-a", "3", "300ms");
    wait_ready(&server, "cli-q-agent-a", 2);
    assert_eq!(
        server
            .cli(&["ZCARD", "redisson_delay_queue_timeout:{cli-q-agent-a}"])
            .unwrap(),
        "0"
    );
}

#[test]
fn the_agent_recovers_after_a_server_restart_with_nothing_stuck() {
    let mut server = server();
    let agent = Agent::start(&server, &["cli-q-restart"]);
    offer(&server, "cli-q-restart", "before", "200ms");
    wait_ready(&server, "cli-q-restart", 1);
    server.restart().unwrap();
    agent.expect_line("recovery");
    // The restart lost the data (the testkit deletes it): what is offered now must move.
    offer(&server, "cli-q-restart", "after-1", "300ms");
    offer(&server, "cli-q-restart", "after-2", "600ms");
    wait_ready(&server, "cli-q-restart", 2);
    let report = json_output(&output(
        &server,
        &["queue", "inspect", "cli-q-restart", "--json"],
    ));
    assert_eq!(report["backlog"], 0, "{report}");
    assert_eq!(report["channel_subscribers"], 1, "{report}");
    assert_eq!(
        server.cli(&["LRANGE", "cli-q-restart", "0", "-1"]).unwrap(),
        "after-1\nafter-2"
    );
}
