//! `keylatch inspect --json` reports the state of each primitive.
mod common;

use std::time::Duration;

use common::{inspect, keylatch, server};

#[test]
fn inspect_reports_a_reentrant_holder_and_a_free_name() {
    let server = server();
    let free = inspect(&server, "nothing-here");
    assert_eq!(free["primitive"], "none");
    assert_eq!(free["locked"], false);

    let mut holder = keylatch(&server, &["run", "inspected", "--", "sleep", "30"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let report = inspect(&server, "inspected");
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_eq!(report["primitive"], "reentrant");
    assert_eq!(report["locked"], true);
    let holders = report["holders"].as_array().unwrap();
    assert_eq!(holders.len(), 1);
    assert_eq!(holders[0]["count"], 1);
    let field = server.cli(&["HKEYS", "inspected"]).unwrap();
    assert_eq!(holders[0]["owner"], field.trim());
    let ttl = report["ttl_ms"].as_i64().unwrap();
    assert!(ttl > 0 && ttl <= 30_000, "{ttl}");
}

#[test]
fn inspect_reports_plain_semaphore_permits() {
    let server = server();
    // A plain semaphore is a string of available permits (Redisson's RSemaphore).
    assert_eq!(server.cli(&["SET", "cli-plain-sem", "5"]).unwrap(), "OK");
    let report = inspect(&server, "cli-plain-sem");
    assert_eq!(report["primitive"], "semaphore");
    assert_eq!(report["available_permits"], 5);
    assert!(report.get("permits").is_none());
}

#[test]
fn inspect_shows_redisson_permit_ids_in_hex_with_their_leases() {
    let server = server();
    // What Redisson's RPermitExpirableSemaphore leaves: the available count, and each permit
    // id in `{name}:timeout` as the 16 raw bytes of its hex form, scored by its lease end on
    // the client's clock (or 922337203685477 for a permit without a lease).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let leased = "00ff10e0c3a4b5d6e7f8091a2b3c4d5e";
    let unleased = "9f8e7d6c5b4a39281706f5e4d3c2b1a0";
    let add_raw = "local id = string.gsub(ARGV[2], '..', function(p) \
                   return string.char(tonumber(p, 16)) end) \
                   return redis.call('zadd', KEYS[1], ARGV[1], id)";
    assert_eq!(server.cli(&["SET", "cli-redisson-sem", "3"]).unwrap(), "OK");
    let until = (now + 60_000).to_string();
    for (score, id) in [(until.as_str(), leased), ("922337203685477", unleased)] {
        let added = server
            .cli(&[
                "EVAL",
                add_raw,
                "1",
                "{cli-redisson-sem}:timeout",
                score,
                id,
            ])
            .unwrap();
        assert_eq!(added.trim(), "1");
    }
    let report = inspect(&server, "cli-redisson-sem");
    assert_eq!(report["primitive"], "permit_expirable_semaphore");
    assert_eq!(report["available_permits"], 3);
    assert_eq!(report["total_permits"], 5);
    let permits = report["permits"].as_array().unwrap();
    assert_eq!(permits.len(), 2, "{report}");
    assert_eq!(permits[0]["id"], leased);
    let left = permits[0]["expires_in_ms"].as_i64().unwrap();
    assert!(left > 0 && left <= 60_000, "{left}");
    assert_eq!(permits[1]["id"], unleased);
    assert!(permits[1]["expires_in_ms"].is_null(), "{report}");
}

/// The fair lock's direct grant in the report: a holder the lock was handed to on release,
/// and which queued keylatch waiters accept that (a Redisson waiter never does). A fair lock
/// whose only trace of fairness is a grant is still reported as one.
#[test]
fn inspect_shows_fair_grants_and_offers() {
    let server = server();
    let far = "9999999999999";
    for args in [
        &["HSET", "cli-granted", "c:7", "1"][..],
        &["PEXPIRE", "cli-granted", "60000"],
        &[
            "HSET",
            "{cli-granted}:keylatch_grants",
            "c:7",
            "=123:2",
            "c:8",
            "5000,0,3",
        ],
        &["RPUSH", "redisson_lock_queue:{cli-granted}", "c:8", "r:9"],
        &["ZADD", "{cli-granted}:keylatch_waiters", far, "c:8"],
        &[
            "ZADD",
            "redisson_lock_timeout:{cli-granted}",
            far,
            "c:8",
            far,
            "r:9",
        ],
        &["HSET", "cli-granted-alone", "c:1", "1"],
        &["HSET", "{cli-granted-alone}:keylatch_grants", "c:1", "=:4"],
    ] {
        server.cli(args).unwrap();
    }
    let report = inspect(&server, "cli-granted");
    println!("{report}");
    assert_eq!(report["primitive"], "fair");
    assert_eq!(report["holders"][0]["owner"], "c:7");
    assert_eq!(report["holders"][0]["granted"], true);
    assert_eq!(report["queue"][0]["waiter"], "c:8");
    assert_eq!(report["queue"][0]["accepts_grant"], true);
    assert_eq!(report["queue"][1]["client"], "redisson");
    assert!(report["queue"][1].get("accepts_grant").is_none());
    let alone = inspect(&server, "cli-granted-alone");
    assert_eq!(alone["primitive"], "fair", "{alone}");
    assert_eq!(alone["holders"][0]["granted"], true);
}

#[test]
fn inspect_of_hostile_data_is_bounded_and_says_what_is_malformed() {
    let server = server();
    // A read-write hash that claims 10^12 read holds, a fair queue of 100 000 ids, and counts
    // that are negative or not numbers.
    server
        .cli(&[
            "HSET",
            "cli-hostile-rw",
            "mode",
            "read",
            "r:1",
            "1000000000000",
        ])
        .unwrap();
    server.cli(&["PEXPIRE", "cli-hostile-rw", "60000"]).unwrap();
    let script = "for i = 1, 100000 do redis.call('rpush', KEYS[1], 'waiter:' .. i) end return 1";
    server
        .cli(&[
            "EVAL",
            script,
            "1",
            "redisson_lock_queue:{cli-hostile-fair}",
        ])
        .unwrap();
    server
        .cli(&["HSET", "cli-hostile-fair", "a:1", "lots"])
        .unwrap();
    server.cli(&["SET", "cli-hostile-sem", "-7"]).unwrap();
    server.cli(&["SET", "cli-hostile-junk", "many"]).unwrap();

    let rw = inspect(&server, "cli-hostile-rw");
    let holds = rw["readers"][0]["holds"].as_array().unwrap().len();
    println!(
        "10^12 read holds: {holds} shown, count {}",
        rw["readers"][0]["count"]
    );
    assert_eq!(holds, 50, "the default limit");
    assert_eq!(rw["readers"][0]["count"], 1_000_000_000_000u64);

    let fair = inspect(&server, "cli-hostile-fair");
    assert_eq!(fair["queue"].as_array().unwrap().len(), 50);
    assert_eq!(fair["queue_total"], 100_000);
    assert!(
        fair["malformed"].to_string().contains("not a whole number"),
        "{fair}"
    );

    let sem = inspect(&server, "cli-hostile-sem");
    assert!(sem["malformed"].to_string().contains("negative"), "{sem}");
    let junk = inspect(&server, "cli-hostile-junk");
    assert!(
        junk["malformed"].to_string().contains("not a number"),
        "{junk}"
    );

    // The text form says how much it left out, and --limit shows more.
    let out = common::output(&server, &["inspect", "cli-hostile-fair", "--limit", "3"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("showing 3 of 100000"), "{text}");
    assert!(text.contains("malformed"), "{text}");
    assert!(text.lines().count() < 20, "{text}");
}

#[test]
fn inspect_watch_streams_json_lines_until_interrupted() {
    use std::io::{BufRead, BufReader};

    let server = server();
    let mut child = keylatch(
        &server,
        &["inspect", "--watch", "--json", "cli-watch-a", "cli-watch-b"],
    )
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || -> serde_json::Value {
        serde_json::from_str(&lines.next().expect("a line").unwrap()).expect("a JSON line")
    };
    let (a, b) = (next(), next());
    assert_eq!(
        (a["name"].as_str(), b["name"].as_str()),
        (Some("cli-watch-a"), Some("cli-watch-b"))
    );
    assert_eq!(a["primitive"], "none");
    // The next refreshes see a holder appear.
    server
        .cli(&[
            "HSET",
            "cli-watch-a",
            "00000000-0000-0000-0000-000000000000:1",
            "1",
        ])
        .unwrap();
    server.cli(&["PEXPIRE", "cli-watch-a", "30000"]).unwrap();
    let mut seen = false;
    for _ in 0..10 {
        let line = next();
        if line["name"] == "cli-watch-a" && line["primitive"] == "reentrant" {
            seen = true;
            break;
        }
    }
    assert!(seen, "a refresh showed the new holder");
    let status = std::process::Command::new("kill")
        .arg("-INT")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        child.wait().unwrap().code(),
        Some(0),
        "interrupted: exits cleanly"
    );
}

#[test]
fn url_and_keylatch_url_name_the_server_like_redis() {
    let server = server();
    let free = |out: std::process::Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // --url is --redis.
    let by_flag = free(
        common::bare(&["--url", &server.url(), "inspect", "url-flag"])
            .output()
            .unwrap(),
    );
    assert!(by_flag.contains("url-flag: free"), "{by_flag}");
    // KEYLATCH_URL comes before KEYLATCH_REDIS_URL and REDIS_URL.
    let by_env = free(
        common::bare(&["inspect", "url-env"])
            .env("KEYLATCH_URL", server.url())
            .env("KEYLATCH_REDIS_URL", "redis://127.0.0.1:1")
            .env("REDIS_URL", "redis://127.0.0.1:1")
            .output()
            .unwrap(),
    );
    assert!(by_env.contains("url-env: free"), "{by_env}");
}
