use super::*;
use std::net::TcpListener;

use crate::process::expect_port_taken;

#[test]
fn port_held_by_plain_listener_is_retryable() {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = make_temp_dir().unwrap();
    let opts = RedisServerBuilder::default();
    let msg = expect_port_taken(launch(&server_program(), &opts, &dir, port));
    assert!(msg.contains("Address already in use"), "{msg}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn port_held_by_other_redis_is_detected() {
    let other = RedisServer::start().unwrap();
    let dir = make_temp_dir().unwrap();
    let opts = RedisServerBuilder::default();
    let msg = expect_port_taken(launch(&server_program(), &opts, &dir, other.port()));
    // Either our child lost the bind race visibly, or the pid check caught it.
    assert!(
        msg.contains("Address already in use") || msg.contains("already served"),
        "{msg}"
    );
    assert_eq!(other.cli(&["PING"]).unwrap(), "PONG");
    fs::remove_dir_all(&dir).unwrap();
}
