use super::*;
use std::net::TcpListener;

use crate::process::expect_port_taken;

#[test]
fn port_held_by_plain_listener_is_retryable() {
    assert!(zookeeper_available(), "run ./scripts/setup-zookeeper.sh");
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = ZooKeeperServer::create(port, None, &[], Vec::new()).unwrap();
    let msg = expect_port_taken(launch(&server.dir, STANDALONE_MAIN));
    assert!(msg.contains("Address already in use"), "{msg}");
}

#[test]
fn port_held_by_other_zookeeper_is_detected() {
    let other = ZooKeeperServer::start().unwrap();
    let server = ZooKeeperServer::create(other.port(), None, &[], Vec::new()).unwrap();
    let msg = expect_port_taken(launch(&server.dir, STANDALONE_MAIN));
    // Either our JVM lost the bind race visibly, or the user.dir check caught it.
    assert!(
        msg.contains("Address already in use") || msg.contains("already served"),
        "{msg}"
    );
    assert_eq!(other.four_letter_word("ruok").unwrap(), "imok");
}

#[test]
fn bad_four_letter_words_are_refused() {
    for word in ["", "srv", "srvrr", "SRVR", "sr\nr", "rüok"] {
        let err = four_letter_word(1, word).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{word:?}");
    }
}

#[test]
fn mode_is_read_from_srvr() {
    let srvr = "Zookeeper version: 3.8.0\nZxid: 0x0\nMode: follower\nNode count: 5\n";
    assert_eq!(mode_of(srvr).as_deref(), Some("follower"));
    let not_serving = "This ZooKeeper instance is not currently serving requests\n";
    assert_eq!(mode_of(not_serving), None);
}
