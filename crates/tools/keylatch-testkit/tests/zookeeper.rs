//! Real ZooKeeper servers started by the testkit: a standalone server and a three-node
//! ensemble, checked only with four-letter words over TCP.

use std::net::{Ipv4Addr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use keylatch_testkit::{ZooKeeperEnsemble, ZooKeeperServer, zookeeper_available};

/// Generous: a JVM election on a loaded 2-core machine.
const ELECTION_TIMEOUT: Duration = Duration::from_secs(60);

fn require_zookeeper() {
    assert!(
        zookeeper_available(),
        "ZooKeeper is not installed: run ./scripts/setup-zookeeper.sh"
    );
}

fn refuses(port: u16) -> bool {
    TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err()
}

fn process_gone(pid: u32) -> bool {
    !PathBuf::from(format!("/proc/{pid}")).exists()
}

#[test]
fn standalone_server_answers_pauses_restarts_and_cleans_up() {
    require_zookeeper();
    let mut server = ZooKeeperServer::start().unwrap();
    let port = server.port();
    assert_eq!(server.connect_string(), format!("127.0.0.1:{port}"));
    assert_eq!(server.four_letter_word("ruok").unwrap(), "imok");
    assert_eq!(server.mode().as_deref(), Some("standalone"));
    assert!(server.myid().is_none());

    // Bad input is an error, not a panic.
    let err = server.four_letter_word("srvr\n").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);

    // Paused: the connection is accepted by the kernel, but nothing answers.
    server.pause().unwrap();
    assert!(server.four_letter_word("ruok").is_err());
    server.resume().unwrap();
    assert_eq!(server.four_letter_word("ruok").unwrap(), "imok");

    // Killed: the port refuses; restarted: same port, same data directory.
    let old_pid = server.pid();
    let dir = server.dir().to_path_buf();
    server.kill();
    assert!(refuses(port));
    assert!(process_gone(old_pid));
    server.restart().unwrap();
    assert_eq!(server.port(), port);
    assert_eq!(server.dir(), dir);
    assert_ne!(server.pid(), old_pid);
    assert_eq!(server.mode().as_deref(), Some("standalone"));

    let pid = server.pid();
    drop(server);
    assert!(process_gone(pid), "the JVM outlived its server");
    assert!(!dir.exists(), "the server's directory was left behind");
    assert!(refuses(port));
}

#[test]
fn ensemble_elects_a_new_leader_when_the_leader_dies() {
    require_zookeeper();
    let mut ensemble = ZooKeeperEnsemble::start().unwrap();
    assert_eq!(ensemble.nodes().len(), 3);
    let connect = ensemble.connect_string();
    for node in ensemble.nodes() {
        assert!(connect.contains(&node.connect_string()), "{connect}");
        assert_eq!(node.four_letter_word("ruok").unwrap(), "imok");
    }
    let mut modes: Vec<String> = ensemble.modes().into_iter().flatten().collect();
    modes.sort();
    assert_eq!(modes, ["follower", "follower", "leader"]);

    let old_leader = ensemble.leader().expect("a leader");
    ensemble.kill_node(old_leader).unwrap();
    let new_leader = ensemble.wait_for_leader(ELECTION_TIMEOUT).unwrap();
    assert_ne!(new_leader, old_leader);
    assert_eq!(ensemble.node(old_leader).unwrap().mode(), None);

    // The old leader comes back as a follower of the new one.
    ensemble.restart_node(old_leader).unwrap();
    assert_eq!(
        ensemble.node(old_leader).unwrap().mode().as_deref(),
        Some("follower")
    );
    assert_eq!(ensemble.leader(), Some(new_leader));

    // Bad input is an error, not a panic.
    let err = ensemble.kill_node(3).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);

    let nodes: Vec<(u32, u16, PathBuf)> = ensemble
        .nodes()
        .iter()
        .map(|n| (n.pid(), n.port(), n.dir().to_path_buf()))
        .collect();
    drop(ensemble);
    for (pid, port, dir) in nodes {
        assert!(process_gone(pid), "node pid {pid} outlived the ensemble");
        assert!(!dir.exists(), "{} was left behind", dir.display());
        assert!(refuses(port));
    }
}
