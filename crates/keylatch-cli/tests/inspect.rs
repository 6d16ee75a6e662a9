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
