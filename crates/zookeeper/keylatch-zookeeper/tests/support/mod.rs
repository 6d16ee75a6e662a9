//! Shared by the test files: one ZooKeeper server per test binary, clients, and a raw
//! zookeeper-client session to look at the nodes.
#![allow(dead_code)]

pub mod curator;

use std::sync::OnceLock;
use std::time::Duration;

use keylatch_testkit::{ZooKeeperServer, zookeeper_available};
use keylatch_zookeeper::{ZkClient, ZkConfig};
use zookeeper_client as zk;

/// The server shared by the tests of one binary (each uses its own lock names).
pub fn server() -> &'static ZooKeeperServer {
    static SERVER: OnceLock<ZooKeeperServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        assert!(
            zookeeper_available(),
            "ZooKeeper is not installed: run ./scripts/setup-zookeeper.sh"
        );
        ZooKeeperServer::start().expect("start ZooKeeper")
    })
}

/// The `zk://` URL of `server`.
pub fn url(server: &ZooKeeperServer) -> String {
    format!("zk://{}", server.connect_string())
}

/// A client of the shared server, default settings.
pub async fn client() -> ZkClient {
    ZkClient::connect(&url(server())).await.expect("connect")
}

/// A client of `server` with `config`.
pub async fn client_with(server: &ZooKeeperServer, config: ZkConfig) -> ZkClient {
    ZkClient::connect_with(&url(server), config)
        .await
        .expect("connect")
}

/// A plain session, to list nodes.
pub async fn raw(server: &ZooKeeperServer) -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(&server.connect_string())
        .await
        .expect("raw connect")
}

/// The children of `path` (none when it does not exist).
pub async fn children(raw: &zk::Client, path: &str) -> Vec<String> {
    match raw.list_children(path).await {
        Ok(children) => children,
        Err(zk::Error::NoNode) => Vec::new(),
        Err(err) => panic!("list {path}: {err}"),
    }
}

/// Waits (a correctness bound, generous for a loaded machine) until `path` has `n` children.
pub async fn wait_children(raw: &zk::Client, path: &str, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let now = children(raw, path).await;
        if now.len() == n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path}: expected {n} children, have {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
