//! The testkit's Redis Cluster: forming, key placement, failovers, slot migration,
//! passwords, killed and paused primaries.

use super::*;

/// Asks a cluster node for `CLUSTER INFO` and returns one field.
fn cluster_info_field(node: &RedisServer, field: &str) -> String {
    let info = node.cli(&["CLUSTER", "INFO"]).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .trim()
        .to_owned()
}

#[test]
fn cluster_starts_with_three_primaries_and_three_replicas() {
    require_redis();
    let started = std::time::Instant::now();
    let cluster = crate::RedisCluster::start().unwrap();
    println!("cluster start took {:?}", started.elapsed());
    assert_eq!(cluster.nodes().len(), 6);
    let primaries = cluster.primaries();
    let replicas = cluster.replicas();
    assert_eq!(primaries.len(), 3, "{cluster:?}");
    assert_eq!(replicas.len(), 3, "{cluster:?}");
    for node in cluster.nodes() {
        assert!(node.port() < 55536);
        assert_eq!(cluster_info_field(node, "cluster_state"), "ok");
        assert_eq!(cluster_info_field(node, "cluster_known_nodes"), "6");
        assert_eq!(cluster_info_field(node, "cluster_slots_assigned"), "16384");
        assert_eq!(cluster_info_field(node, "cluster_slots_ok"), "16384");
    }
    for primary in &primaries {
        assert!(primary.cli(&["ROLE"]).unwrap().starts_with("master"));
        assert_eq!(cluster.replicas_of(primary).unwrap().len(), 1);
    }
    for replica in &replicas {
        assert!(replica.cli(&["ROLE"]).unwrap().starts_with("slave"));
    }
    // The primaries' slot ranges (from CLUSTER NODES) cover 0..=16383 without gaps.
    let nodes = primaries[0].cli(&["CLUSTER", "NODES"]).unwrap();
    let mut ranges: Vec<(u32, u32)> = nodes
        .lines()
        .filter(|l| l.split(' ').nth(2).is_some_and(|f| f.contains("master")))
        .flat_map(|l| l.split(' ').skip(8).map(str::to_owned).collect::<Vec<_>>())
        .map(|r| {
            let (a, b) = r.split_once('-').unwrap_or((&r, &r));
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect();
    ranges.sort_unstable();
    assert_eq!(
        ranges,
        [(0, 5460), (5461, 10921), (10922, 16383)],
        "{nodes}"
    );
    for slot in [0u16, 5461, 10923, 16383] {
        let owner = cluster.node_for_slot(slot).unwrap();
        assert!(primaries.iter().any(|p| p.port() == owner.port()));
    }
    assert_eq!(cluster.url(), cluster.nodes()[0].url());
    assert_eq!(cluster.urls().len(), 6);
    let seeds = cluster.seed_url();
    assert!(seeds.starts_with("redis+cluster://127.0.0.1:"), "{seeds}");
    assert_eq!(seeds.matches("127.0.0.1:").count(), 6, "{seeds}");
    for node in cluster.nodes() {
        assert_eq!(cluster.node_id(node).unwrap().len(), 40);
    }
    cluster.wait_ok(std::time::Duration::from_secs(5)).unwrap();
}

#[test]
fn cluster_keys_live_on_the_node_that_owns_their_slot() {
    require_redis();
    let cluster = crate::RedisCluster::builder()
        .primaries(2)
        .replicas_per_primary(0)
        .start()
        .unwrap();
    assert_eq!(cluster.nodes().len(), 2);
    assert!(cluster.replicas().is_empty());
    assert_eq!(
        cluster.keyslot("{abc}:x").unwrap(),
        cluster.keyslot("abc").unwrap()
    );
    assert_eq!(cluster.keyslot("foo").unwrap(), 12182);
    for key in ["alpha", "beta", "gamma", "{abc}:x"] {
        let owner = cluster.node_for_key(key).unwrap();
        assert_eq!(owner.cli(&["SET", key, "v"]).unwrap(), "OK");
        assert_eq!(owner.cli(&["GET", key]).unwrap(), "v");
        let other = cluster
            .nodes()
            .iter()
            .find(|n| n.port() != owner.port())
            .unwrap();
        let err = other.cli(&["GET", key]).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "MOVED {} 127.0.0.1:{}",
                cluster.keyslot(key).unwrap(),
                owner.port()
            )),
            "{err}"
        );
    }
}

#[test]
fn cluster_failover_promotes_the_replica() {
    require_redis();
    let cluster = crate::RedisCluster::start().unwrap();
    let primary = cluster.node_for_key("k").unwrap();
    primary.cli(&["SET", "k", "v"]).unwrap();
    let replica = cluster.replicas_of(primary).unwrap()[0];
    let took = cluster.failover(replica).unwrap();
    println!(
        "cluster failover from {} to {} took {took:?}",
        primary.port(),
        replica.port()
    );
    assert!(replica.cli(&["ROLE"]).unwrap().starts_with("master"));
    assert!(primary.cli(&["ROLE"]).unwrap().starts_with("slave"));
    assert_eq!(cluster.node_for_key("k").unwrap().port(), replica.port());
    assert_eq!(replica.cli(&["GET", "k"]).unwrap(), "v");
    let primaries = cluster.primaries();
    assert_eq!(primaries.len(), 3);
    assert!(primaries.iter().any(|p| p.port() == replica.port()));
    assert!(
        cluster
            .replicas()
            .iter()
            .any(|r| r.port() == primary.port())
    );
    // A primary is not something to fail over to.
    assert!(cluster.failover(cluster.primaries()[0]).is_err());
}

#[test]
fn cluster_migrate_slot_moves_the_keys() {
    require_redis();
    let cluster = crate::RedisCluster::start().unwrap();
    let keys = ["{user:1}:a", "{user:1}:b", "{user:1}:c"];
    let from = cluster.node_for_key(keys[0]).unwrap();
    for key in keys {
        from.cli(&["SET", key, key]).unwrap();
    }
    let slot = cluster.keyslot(keys[0]).unwrap();
    let to = cluster
        .primaries()
        .into_iter()
        .find(|p| p.port() != from.port())
        .unwrap();
    let started = std::time::Instant::now();
    let moved = cluster.migrate_slot(slot, from, to).unwrap();
    println!(
        "slot {slot} ({moved} keys) moved from {} to {} in {:?}",
        from.port(),
        to.port(),
        started.elapsed()
    );
    assert_eq!(moved, 3);
    assert_eq!(cluster.node_for_key(keys[0]).unwrap().port(), to.port());
    assert_eq!(cluster.node_for_slot(slot).unwrap().port(), to.port());
    for key in keys {
        assert_eq!(to.cli(&["GET", key]).unwrap(), key);
        let err = from.cli(&["GET", key]).unwrap_err().to_string();
        assert!(err.starts_with("MOVED"), "{err}");
    }
    // No node keeps the slot half-way (MIGRATING / IMPORTING).
    for node in cluster.nodes() {
        let nodes = node.cli(&["CLUSTER", "NODES"]).unwrap();
        assert!(!nodes.contains('['), "{nodes}");
    }
    cluster.wait_ok(std::time::Duration::from_secs(10)).unwrap();

    // Step by step: half-way the source answers ASK for a key it handed over.
    cluster.begin_slot_migration(slot, to, from).unwrap();
    let err = to
        .cli(&["GET", "{user:1}:missing"])
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("ASK"), "{err}");
    assert_eq!(cluster.move_slot_keys(slot, to, from).unwrap(), 3);
    let err = to.cli(&["GET", keys[0]]).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("ASK {slot} 127.0.0.1:{}", from.port())),
        "{err}"
    );
    cluster.finish_slot_migration(slot, from).unwrap();
    assert_eq!(cluster.node_for_key(keys[0]).unwrap().port(), from.port());
    assert_eq!(from.cli(&["GET", keys[2]]).unwrap(), keys[2]);
    // An empty slot moves too.
    let empty = cluster.keyslot("nothing-here").unwrap();
    let owner = cluster.node_for_slot(empty).unwrap();
    let other = cluster
        .primaries()
        .into_iter()
        .find(|p| p.port() != owner.port())
        .unwrap();
    assert_eq!(cluster.migrate_slot(empty, owner, other).unwrap(), 0);
    assert_eq!(cluster.node_for_slot(empty).unwrap().port(), other.port());
}

#[test]
fn password_cluster_refuses_anonymous_clients() {
    require_redis();
    let secret = "cluster s3cret \"pw\"";
    let builder = crate::RedisCluster::builder()
        .primaries(3)
        .replicas_per_primary(1)
        .password(secret);
    assert!(!format!("{builder:?}").contains("s3cret"));
    let cluster = builder.start().unwrap();
    assert!(!format!("{cluster:?}").contains("s3cret"));
    assert!(!cluster.seed_url().contains("s3cret"));
    for node in cluster.nodes() {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", node.pid())).unwrap();
        assert!(!String::from_utf8_lossy(&cmdline).contains("s3cret"));
        assert_eq!(node.cli(&["PING"]).unwrap(), "PONG");
        let anonymous = crate::resp::request_to(
            &crate::resp::Target::Tcp((Ipv4Addr::LOCALHOST, node.port()).into()),
            None,
            &["CLUSTER", "INFO"],
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(1),
        )
        .unwrap();
        assert!(
            matches!(&anonymous, crate::resp::Reply::Error(e) if e.starts_with("NOAUTH")),
            "{anonymous:?}"
        );
    }
    // MIGRATE logs in to the target with the password.
    let from = cluster.node_for_key("pw-key").unwrap();
    from.cli(&["SET", "pw-key", "1"]).unwrap();
    let to = cluster
        .primaries()
        .into_iter()
        .find(|p| p.port() != from.port())
        .unwrap();
    let slot = cluster.keyslot("pw-key").unwrap();
    assert_eq!(cluster.migrate_slot(slot, from, to).unwrap(), 1);
    assert_eq!(to.cli(&["GET", "pw-key"]).unwrap(), "1");
}

#[test]
fn cluster_replaces_a_killed_primary_and_the_restarted_node_rejoins() {
    require_redis();
    let mut cluster = crate::RedisCluster::builder()
        .primaries(3)
        .replicas_per_primary(1)
        .start()
        .unwrap();
    let primary = cluster.node_for_key("k").unwrap();
    primary.cli(&["SET", "k", "v"]).unwrap();
    // WAIT: the replica has the write before its primary dies.
    assert_eq!(primary.cli(&["WAIT", "1", "5000"]).unwrap(), "1");
    let (port, replica_port) = (
        primary.port(),
        cluster.replicas_of(primary).unwrap()[0].port(),
    );
    let started = std::time::Instant::now();
    cluster.node_mut(port).unwrap().kill();
    cluster.wait_ok(std::time::Duration::from_secs(30)).unwrap();
    println!(
        "killed primary {port} replaced by {replica_port} in {:?}",
        started.elapsed()
    );
    let owner = cluster.node_for_key("k").unwrap();
    assert_eq!(owner.port(), replica_port);
    assert_eq!(owner.cli(&["GET", "k"]).unwrap(), "v");
    assert!(cluster.primaries().iter().all(|p| p.port() != port));

    cluster.node_mut(port).unwrap().restart().unwrap();
    cluster.wait_ok(std::time::Duration::from_secs(30)).unwrap();
    let node = cluster.nodes().iter().find(|n| n.port() == port).unwrap();
    assert!(node.cli(&["ROLE"]).unwrap().starts_with("slave"));
    assert!(cluster.replicas().iter().any(|r| r.port() == port));
    assert_eq!(cluster_info_field(node, "cluster_known_nodes"), "6");
}

#[test]
fn cluster_replaces_a_paused_primary_which_rejoins_as_a_replica_when_resumed() {
    require_redis();
    let cluster = crate::RedisCluster::start().unwrap();
    let paused = &cluster.nodes()[0];
    let started = std::time::Instant::now();
    paused.pause().unwrap();
    // The paused primary does not answer, so this waits for its replica to take over.
    cluster.wait_ok(std::time::Duration::from_secs(30)).unwrap();
    println!("paused primary replaced in {:?}", started.elapsed());
    assert_eq!(cluster.primaries().len(), 3);
    assert!(
        cluster
            .primaries()
            .iter()
            .all(|p| p.port() != paused.port())
    );
    paused.resume().unwrap();
    cluster.wait_ok(std::time::Duration::from_secs(30)).unwrap();
    assert!(paused.cli(&["ROLE"]).unwrap().starts_with("slave"));
    assert!(cluster.replicas().iter().any(|r| r.port() == paused.port()));
}
