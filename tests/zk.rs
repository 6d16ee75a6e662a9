//! ZooKeeper for the facade's tests: one server per test binary, its `zk://` URL, and a raw
//! session (not keylatch's) to list the nodes a test left.

use std::sync::OnceLock;
use std::time::Duration;

use keylatch_testkit::{ZooKeeperServer, zookeeper_available};
use zookeeper_client as zk;

/// The ZooKeeper server shared by the tests of one binary (each uses its own names).
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

/// The `zk://` URL of [`server`].
pub fn url() -> String {
    format!("zk://{}", server().connect_string())
}

/// A plain session on [`server`], to look at the nodes.
pub async fn raw() -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(&server().connect_string())
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
