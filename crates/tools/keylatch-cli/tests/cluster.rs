//! The CLI on a Redis Cluster: `run` excludes across processes (plain and fair locks),
//! `inspect` reads a name through any node, `demo` holds every property, and nothing but the
//! fencing counters is left on any node after.
mod common;

use std::process::Command;

use common::{bare, critical_section, json_output, scratch, wait_for_file};
use keylatch_testkit::RedisCluster;

/// `keylatch --redis URL ARGS`, with no connection settings from the test's environment.
fn keylatch(url: &str, args: &[&str]) -> Command {
    let mut cmd = bare(&["--redis", url]);
    cmd.args(args);
    cmd
}

/// The keys on every primary.
fn keys_left(cluster: &RedisCluster) -> Vec<String> {
    cluster
        .primaries()
        .iter()
        .flat_map(|node| {
            let keys = node.cli(&["KEYS", "*"]).unwrap();
            keys.lines()
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn run_inspect_and_demo_on_a_cluster() {
    let cluster = RedisCluster::start().expect("start a cluster (run ./scripts/setup.sh)");
    let seeds = cluster.seed_url();

    // Exclusion: 4 processes on each of a plain and a fair lock, through the seed list.
    let dir = scratch("cluster");
    let mut children = Vec::new();
    for (name, fair) in [("cli-cluster-plain", false), ("cli-cluster-fair", true)] {
        let part = dir.join(name);
        std::fs::create_dir_all(&part).unwrap();
        for i in 0..4 {
            let body = critical_section(&part, &format!("{name}-{i}"), 40);
            let mut args = vec!["run", name];
            if fair {
                args.push("--fair");
            }
            args.extend(["--", "sh", "-c", &body]);
            children.push(keylatch(&seeds, &args).spawn().unwrap());
        }
    }
    for mut child in children {
        let status = child.wait().unwrap();
        assert!(status.success(), "a run failed: {status}");
    }
    for name in ["cli-cluster-plain", "cli-cluster-fair"] {
        let part = dir.join(name);
        let log = std::fs::read_to_string(part.join("log")).unwrap();
        println!(
            "{name}: {} runs, overlaps: {}",
            log.lines().count(),
            part.join("overlaps").exists()
        );
        assert_eq!(log.lines().count(), 4, "every command ran once");
        assert!(!part.join("overlaps").exists(), "two commands overlapped");
    }

    // inspect through a node that does not own the name's slot: cluster mode is detected and
    // the read follows the slot.
    let marker = dir.join("running");
    let mut holder = keylatch(
        &seeds,
        &[
            "run",
            "cli-cluster-job",
            "--",
            "sh",
            "-c",
            &format!("touch {}; sleep 3", marker.display()),
        ],
    )
    .spawn()
    .unwrap();
    wait_for_file(&marker);
    let owner = cluster.node_for_key("cli-cluster-job").unwrap();
    let other = cluster
        .primaries()
        .into_iter()
        .find(|node| node.port() != owner.port())
        .unwrap();
    let out = keylatch(&other.url(), &["inspect", "cli-cluster-job", "--json"])
        .output()
        .unwrap();
    let report = json_output(&out);
    println!(
        "inspect through port {} (owner {}): {report}",
        other.port(),
        owner.port()
    );
    assert_eq!(report["primitive"], "reentrant", "{report}");
    assert_eq!(report["locked"], true, "{report}");
    assert!(holder.wait().unwrap().success());
    assert_eq!(
        owner.cli(&["EXISTS", "cli-cluster-job"]).unwrap().trim(),
        "0"
    );

    // The demo: every property held, across real processes.
    let out = keylatch(&seeds, &["demo"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "demo failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.matches("[held]").count(), 3, "{stdout}");

    // Nothing behind on any node but the fencing counters of the names `run` held, which
    // stay by design (a token never goes back): the demo deletes what it wrote, and the
    // locks, queues and permits are gone.
    let mut left = keys_left(&cluster);
    left.sort();
    assert_eq!(
        left,
        [
            "redisson_lock_token:{cli-cluster-fair}",
            "redisson_lock_token:{cli-cluster-job}",
            "redisson_lock_token:{cli-cluster-plain}",
        ],
        "keys left on the primaries"
    );
}

#[test]
fn a_malformed_cluster_url_exits_64_and_an_unavailable_cluster_69() {
    // Malformed: refused before anything is sent.
    for url in [
        "redis+cluster://h:notaport",
        "redis+cluster://h:6379,h:99999",
        "redis+cluster://",
    ] {
        let out = keylatch(url, &["run", "cli-bad-url", "--", "true"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        println!("{url}: exit {:?}: {}", out.status.code(), stderr.trim());
        assert_eq!(out.status.code(), Some(64), "{url}: {stderr}");
        assert!(stderr.contains("invalid cluster url"), "{url}: {stderr}");
    }

    // Nothing listens: as any unreachable Redis.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("redis+cluster://127.0.0.1:{closed}");
    let out = keylatch(&url, &["run", "cli-closed", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{url}: exit {:?}: {}", out.status.code(), stderr.trim());
    assert_eq!(out.status.code(), Some(69), "{stderr}");

    // A cluster whose nodes answer but that serves no slot (they were all taken away): it
    // cannot be used for now, which is unavailable too, not an internal error.
    let cluster = RedisCluster::builder()
        .primaries(1)
        .replicas_per_primary(0)
        .start()
        .expect("start a cluster (run ./scripts/setup.sh)");
    let node = &cluster.primaries()[0];
    node.cli(&["CLUSTER", "DELSLOTSRANGE", "0", "16383"])
        .unwrap();
    for url in [cluster.seed_url(), node.url()] {
        let out = keylatch(&url, &["run", "cli-no-slots", "--", "true"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        println!(
            "{url} without slots: exit {:?}: {}",
            out.status.code(),
            stderr.trim()
        );
        assert_eq!(out.status.code(), Some(69), "{url}: {stderr}");
    }
}

#[test]
fn queue_offer_take_inspect_and_transfer_on_a_cluster() {
    let cluster = RedisCluster::start().expect("start a cluster (run ./scripts/setup.sh)");
    let seeds = cluster.seed_url();
    let run = |args: &[&str]| {
        let out = keylatch(&seeds, args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(&["queue", "offer", "cq-a", "one", "--delay", "100ms"]);
    assert_eq!(run(&["queue", "take", "cq-a", "--wait", "10s"]), "one\n");
    // The agent moves due elements of a queue on each primary it is given.
    let _agent = KilledOnDrop(
        keylatch(&seeds, &["queue", "transfer", "cq-b", "cq-c", "cq-d"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    for name in ["cq-b", "cq-c", "cq-d"] {
        run(&["queue", "offer", name, name, "--delay", "300ms"]);
    }
    let started = std::time::Instant::now();
    let moved = |name: &str| {
        cluster
            .node_for_key(name)
            .unwrap()
            .cli(&["LLEN", name])
            .unwrap()
    };
    while ["cq-b", "cq-c", "cq-d"].iter().any(|n| moved(n) != "1") {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the agent did not move every queue's element"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let report = json_output(
        &keylatch(&seeds, &["queue", "inspect", "cq-b", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        (report["backlog"].clone(), report["ready"].clone()),
        (0.into(), 1.into())
    );
    assert_eq!(report["sharded_subscribers"], 1, "{report}");
}

/// A process killed (and reaped) when the test ends, whether or not it failed.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
