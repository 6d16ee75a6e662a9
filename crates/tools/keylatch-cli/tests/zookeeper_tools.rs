//! `keylatch demo` and `keylatch bench` on a `zk://` URL: the demo tells its story with what
//! ZooKeeper has and every property holds; the bench measures the lock family beside the raw
//! ZooKeeper requests a lock needs and prints the ratio (alone, as JSON, and beside Redis in one
//! table); the Redis-only scale suite exits 64 with a message. Nothing here asserts a timing.
mod common;

use std::process::{Command, Output};

use common::{bare, server};
use keylatch_testkit::{ZooKeeperServer, zookeeper_available};

fn zookeeper() -> ZooKeeperServer {
    assert!(
        zookeeper_available(),
        "ZooKeeper is not installed: run ./scripts/setup-zookeeper.sh"
    );
    ZooKeeperServer::start().expect("start ZooKeeper")
}

/// `keylatch --url URL ARGS`, with no connection settings from the test's environment.
fn keylatch(url: &str, args: &[&str]) -> Command {
    let mut cmd = bare(&["--url", url]);
    cmd.args(args);
    cmd
}

/// The nodes under keylatch's base path, read with zookeeper-client directly.
fn left_under_base(server: &ZooKeeperServer) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = zookeeper_client::Client::connect(&server.connect_string())
            .await
            .expect("a raw session");
        match client.list_children("/keylatch").await {
            Ok(children) => children,
            Err(zookeeper_client::Error::NoNode) => Vec::new(),
            Err(err) => panic!("list /keylatch: {err}"),
        }
    })
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn demo_on_zookeeper_tells_every_part_and_every_property_holds() {
    let server = zookeeper();
    let url = format!("zk://{}", server.connect_string());
    let out = keylatch(&url, &["demo"]).output().unwrap();
    let (stdout, stderr) = text(&out);
    println!("{stdout}{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    for section in [
        "1. the reentrant lock excludes across sessions",
        "2. FIFO jobs on the fair lock",
        "3. cache refresh with the read-write lock",
        "4. fencing tokens",
        "5. a session that ends loses its locks",
        "6. the ZooKeeper semaphore (client.as_zookeeper())",
        "\nsummary\n",
    ] {
        assert!(stdout.contains(section), "no {section:?} in:\n{stdout}");
    }
    assert_eq!(stdout.matches("  [held] ").count(), 6, "{stdout}");
    assert!(!stdout.contains("FAILED"), "{stdout}");
    assert!(
        stdout.contains("learned it from lost(): lost "),
        "the paused holder reported its loss:\n{stdout}"
    );
    assert_eq!(
        left_under_base(&server),
        Vec::<String>::new(),
        "the demo's nodes"
    );
}

#[test]
fn bench_on_zookeeper_prints_the_floor_ratio_alone_as_json_and_beside_redis() {
    let zk = zookeeper();
    let url = format!("zk://{}", zk.connect_string());

    let out = keylatch(&url, &["bench", "--ops", "10"]).output().unwrap();
    let (stdout, stderr) = text(&out);
    println!("{stdout}{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    for row in [
        "zookeeper  raw exists round trip",
        "zookeeper  raw create+getChildren+delete",
        "zookeeper  reentrant lock+unlock, 1 task",
        "zookeeper  reentrant hand-off gap, 16 tasks",
        "zookeeper  read lock+unlock, 1 task",
        "zookeeper  semaphore acquire+release",
    ] {
        assert!(stdout.contains(row), "no row {row:?} in:\n{stdout}");
    }
    assert!(
        stdout.contains("keylatch/raw on zookeeper: reentrant lock+unlock p50 = ")
            && stdout.contains("x the floor (create+getChildren+delete)"),
        "no ratio line in:\n{stdout}"
    );
    assert!(!stdout.contains("expirable"), "a Redis-only row: {stdout}");

    // JSON: one array of rows; the lock's row carries its ratio to the floor.
    let out = keylatch(&url, &["bench", "--ops", "10", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let rows = rows.as_array().expect("an array of rows");
    assert!(rows.iter().all(|r| r["store"] == "zookeeper"), "{rows:?}");
    let lock = rows
        .iter()
        .find(|r| r["scenario"] == "reentrant lock+unlock, 1 task")
        .expect("the lock's row");
    assert!(lock["p50_over_floor"].as_f64().is_some(), "{lock}");
    assert_eq!(
        left_under_base(&zk),
        Vec::<String>::new(),
        "the bench's nodes"
    );

    // Beside Redis, in one run and one table.
    let redis = server();
    let out = keylatch(&redis.url(), &["bench", "--ops", "10", "--compare", &url])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    println!("{stdout}{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    for line in [
        "redis      raw 2x EVALSHA",
        "zookeeper  raw create+getChildren+delete",
        "keylatch/raw on redis: reentrant lock+unlock p50 = ",
        "keylatch/raw on zookeeper: reentrant lock+unlock p50 = ",
        "zookeeper / redis: lock+unlock p50 ",
    ] {
        assert!(stdout.contains(line), "no {line:?} in:\n{stdout}");
    }
}

#[test]
fn the_redis_only_scale_suite_on_zookeeper_exits_64_with_a_message() {
    let zk = zookeeper();
    let url = format!("zk://{}", zk.connect_string());
    let out = keylatch(&url, &["bench", "--scale"]).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(64), "{stdout}{stderr}");
    assert!(
        stderr.contains("--scale measures a Redis server or cluster"),
        "{stderr}"
    );
    assert!(stdout.is_empty(), "nothing measured: {stdout}");
    // Nor beside another store.
    let out = keylatch(
        "redis://127.0.0.1:1",
        &["bench", "--scale", "--compare", &url],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(64), "{:?}", text(&out));
}
