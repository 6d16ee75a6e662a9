//! Test support for keylatch: throwaway `redis-server` processes.
//!
//! Each [`RedisServer`] is a real `redis-server` child process listening on a
//! free loopback port, with its own temporary directory and no persistence.
//! It is killed and its directory removed when the value is dropped, so tests
//! can start as many as they like, in parallel, without sharing state:
//!
//! ```no_run
//! use keylatch_testkit::RedisServer;
//!
//! let server = RedisServer::start()?;
//! assert_eq!(server.cli(&["SET", "greeting", "hello"])?, "OK");
//! assert_eq!(server.cli(&["GET", "greeting"])?, "hello");
//! println!("connect your client to {}", server.url());
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Servers that need `DEBUG` (Redis 7+ refuses it by default) or other
//! options are made with the [`RedisServerBuilder`]:
//!
//! ```no_run
//! use keylatch_testkit::RedisServer;
//!
//! let mut server = RedisServer::builder()
//!     .enable_debug(true)
//!     .arg("--maxmemory")
//!     .arg("64mb")
//!     .start()?;
//! server.cli(&["DEBUG", "SLEEP", "0"])?;
//! server.restart()?; // same port, same options, empty data set
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! A TLS-only server (plaintext port off) on certificates generated in the test, with or
//! without mutual TLS, and a password that stays out of the process arguments:
//!
//! ```no_run
//! use keylatch_testkit::{ClientAuth, RedisServer, TlsFiles};
//!
//! let tls = TlsFiles::generate()?; // a CA, a server and a client certificate
//! let server = RedisServer::builder()
//!     .tls(&tls, ClientAuth::Required)
//!     .password("s3cret")
//!     .start()?;
//! assert!(server.url().starts_with("rediss://"));
//! assert_eq!(server.cli(&["PING"])?, "PONG"); // through a unix socket, logged in
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! A [`SentinelSet`] is one primary, two replicas and three sentinels, with
//! [`SentinelSet::failover`] to force a failover.
//!
//! A [`RedisCluster`] is a Redis Cluster: three primaries with one replica each by
//! default, formed with raw `CLUSTER` commands (no `redis-cli`). It tells which primary
//! owns a key, forces a failover, and moves a slot with its keys, in one go or step by
//! step so that a test can look at a slot half-way through its migration:
//!
//! ```no_run
//! use keylatch_testkit::RedisCluster;
//!
//! let cluster = RedisCluster::builder()
//!     .primaries(3)
//!     .replicas_per_primary(1)
//!     .password("s3cret")
//!     .start()?;
//! println!("connect to {}", cluster.seed_url()); // redis+cluster://127.0.0.1:…,…
//! let key = "lock:{order-7}";
//! let owner = cluster.node_for_key(key)?;
//! owner.cli(&["SET", key, "me"])?; // `cli` logs in with the password
//!
//! let slot = cluster.keyslot(key)?;
//! let to = cluster.primaries().into_iter().find(|p| p.port() != owner.port()).unwrap();
//! cluster.begin_slot_migration(slot, owner, to)?; // the slot is MIGRATING / IMPORTING
//! cluster.move_slot_keys(slot, owner, to)?; // the old owner now answers ASK
//! cluster.finish_slot_migration(slot, to)?;
//! assert_eq!(cluster.node_for_key(key)?.port(), to.port());
//!
//! let replica = cluster.replicas()[0];
//! println!("failover in {:?}", cluster.failover(replica)?);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! A [`FaultProxy`] sits between a client and a server and injects network faults on
//! demand: delays, a blackhole, replies dropped after the request was applied, reset
//! connections, refused connections.
//!
//! # Requirements
//!
//! `redis-server` must be on `PATH`; `./scripts/setup.sh` installs it. Use
//! [`redis_server_available`] to check for it up front.
//!
//! # Server builds
//!
//! Set `KEYLATCH_TEST_SERVER` to a server executable (a path such as
//! `.servers/valkey-9.1/valkey-server`, or a name on `PATH`) to run every server,
//! sentinel and cluster node on that build instead of `redis-server`;
//! `./scripts/setup.sh` provides the other builds under `.servers/`. Each server start
//! prints the build it runs to stderr (`testkit: valkey-server 9.1.2 (…)`).
//! [`server_build`] tells the build's name, version and capabilities; a test that needs
//! TLS calls [`skip_without_tls`] first and returns early, with a printed
//! `skipped: …` line, on a build made without it.
//!
//! # Leaks
//!
//! A server whose [`RedisServer`] is never dropped (one kept in a `static`,
//! or a test process that is killed) is still cleaned up: each server has a
//! tiny `sh` watchdog that kills it within about a second of the test
//! process exiting. Its temporary directory stays behind in that case.

mod build;
mod cluster;
mod curator;
mod postgres;
mod process;
mod proxy;
mod resp;
mod sentinel;
mod server;
mod support;
mod tls;
mod zookeeper;

pub use build::{
    SERVER_ENV, ServerBuild, report_skip, server_build, server_program, skip_without_tls,
};
pub use cluster::{RedisCluster, RedisClusterBuilder};
pub use curator::{CURATOR_RECIPES_JAR, CuratorDriver, curator_unavailable};
pub use postgres::{PostgresServer, postgres_available, postgres_bin_dir};
pub use proxy::{Fault, FaultProxy};
pub use sentinel::{SentinelSet, SentinelSetBuilder};
pub use server::{RedisServer, RedisServerBuilder};
pub use tls::{ClientAuth, TlsFiles};
pub use zookeeper::{FORCE_SYNC_ENV, ZooKeeperEnsemble, ZooKeeperServer, zookeeper_available};

use std::path::Path;

/// Returns `true` if the server executable ([`server_program`]: `redis-server`, or
/// `KEYLATCH_TEST_SERVER`) is found: on `PATH`, or at the path given.
///
/// Tests that cannot run without Redis can use this to fail early with a
/// clear message; [`RedisServer::start`] reports the same problem as an
/// [`std::io::ErrorKind::NotFound`] error that says to run
/// `./scripts/setup.sh`.
pub fn redis_server_available() -> bool {
    program_exists(&server_program())
}

/// Whether `program` (a path, or a name looked up on `PATH`) is an executable file.
pub(crate) fn program_exists(program: &str) -> bool {
    if program.contains(std::path::MAIN_SEPARATOR) {
        is_executable(Path::new(program))
    } else {
        find_on_path(program)
    }
}

/// Whether `program` is an executable file in one of the `PATH` directories.
pub(crate) fn find_on_path(program: &str) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| is_executable(&dir.join(program)))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file() || path.with_extension("exe").is_file()
}

#[cfg(test)]
mod tests;
