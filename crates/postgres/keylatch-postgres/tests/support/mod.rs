//! What the tests share: a throwaway server and a client on it.
#![allow(dead_code)]

use std::time::Duration;

use keylatch_postgres::{PgClient, PgConfig};
use keylatch_testkit::PostgresServer;

/// A server of this test's own (stopped and removed when dropped, also on failure).
pub fn server() -> PostgresServer {
    PostgresServer::start().expect("start a throwaway PostgreSQL (run ./scripts/setup.sh)")
}

/// A client with a short probe interval.
pub async fn client(server: &PostgresServer) -> PgClient {
    PgClient::connect_with(
        &server.url(),
        PgConfig::default().with_probe_interval(Duration::from_millis(200)),
    )
    .await
    .expect("connect")
}

/// Rows of `pg_locks` for the advisory lock of `name` (granted or waiting), as `granted` flags.
pub fn advisory_rows(server: &PostgresServer, name: &str) -> Vec<bool> {
    let sql = format!(
        "SELECT granted FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 \
         AND ((classid::int8 << 32) | objid::int8) = hashtextextended('{name}', 0)"
    );
    server
        .psql(&sql)
        .expect("psql")
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l == "t")
        .collect()
}

/// Waits (bounded) until `check` holds; panics with `what` when it does not within 10 s.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not within 10s: {what}");
}
