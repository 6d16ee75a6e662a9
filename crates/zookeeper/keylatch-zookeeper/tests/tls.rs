//! `zk+tls://`: locks over ZooKeeper's TLS port (a testkit server with `secureClientPort` only
//! and generated certificates), and the typed errors of a wrong CA, a missing client
//! certificate, a plaintext client at the TLS port and a TLS client at a plain port. Needs the
//! `tls` feature (`cargo test -p keylatch-zookeeper --features tls --test tls`).
//!
//! May import: keylatch-testkit, keylatch-zookeeper, keylatch-core.

use std::sync::OnceLock;
use std::time::Duration;

use keylatch_core::{DistributedLock, Error};
use keylatch_testkit::{ClientAuth, TlsFiles, ZooKeeperServer, zookeeper_available};
use keylatch_zookeeper::{ZkClient, ZkConfig};

/// A correctness bound on a failing connect (the client gives up after its session timeout).
const GIVES_UP: Duration = Duration::from_secs(30);

/// The certificates and the mutual-TLS server shared by this binary's tests.
fn server() -> &'static (TlsFiles, ZooKeeperServer) {
    static SERVER: OnceLock<(TlsFiles, ZooKeeperServer)> = OnceLock::new();
    SERVER.get_or_init(|| {
        assert!(zookeeper_available(), "run ./scripts/setup-zookeeper.sh");
        let tls = TlsFiles::generate().unwrap();
        let server = ZooKeeperServer::start_tls(&tls, ClientAuth::Required).expect("start");
        (tls, server)
    })
}

fn tls_url() -> String {
    format!("zk+tls://{}", server().1.connect_string())
}

/// The CA and the client certificate of `tls`; a short session, so failures come quickly.
fn config(tls: &TlsFiles) -> ZkConfig {
    ZkConfig::default()
        .with_session_timeout(Duration::from_secs(2))
        .with_tls_ca_file(tls.ca_file())
        .with_tls_client_cert(tls.client_cert_file(), tls.client_key_file())
}

async fn connect(url: &str, config: ZkConfig) -> Result<ZkClient, Error> {
    tokio::time::timeout(GIVES_UP, ZkClient::connect_with(url, config))
        .await
        .expect("connect gives up within its session timeout")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_exclude_each_other_over_mutual_tls() {
    let (tls, _) = server();
    let a = connect(&tls_url(), config(tls)).await.unwrap();
    let b = connect(&tls_url(), config(tls)).await.unwrap();
    let guard = a.lock("over-tls").unwrap().lock().await.unwrap();
    let token = guard.fencing_token();
    assert!(token.is_some());
    let other = b.lock("over-tls").unwrap();
    assert!(other.try_lock().await.unwrap().is_none(), "held by a");
    guard.unlock().await.unwrap();
    let next = other.lock().await.unwrap();
    assert!(next.fencing_token() > token);
    next.unlock().await.unwrap();
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_certificate_from_another_ca_is_refused() {
    let (tls, _) = server();
    let other = TlsFiles::generate().unwrap();
    let config = config(tls).with_tls_ca_file(other.ca_file());
    let err = connect(&tls_url(), config).await.unwrap_err();
    assert!(matches!(err, Error::TlsVerification { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_certificate_is_refused_by_a_server_that_needs_one() {
    let (tls, _) = server();
    let config = ZkConfig::default()
        .with_session_timeout(Duration::from_secs(2))
        .with_tls_ca_file(tls.ca_file());
    let err = connect(&tls_url(), config).await.unwrap_err();
    assert!(matches!(err, Error::TlsVerification { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_client_at_the_tls_port_fails_within_its_session_timeout() {
    let url = format!("zk://{}", server().1.connect_string());
    let config = ZkConfig::default().with_session_timeout(Duration::from_secs(2));
    let err = connect(&url, config).await.unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_at_a_plain_port_says_the_server_speaks_no_tls() {
    let (tls, _) = server();
    let plain = ZooKeeperServer::start().unwrap();
    let url = format!("zk+tls://{}", plain.connect_string());
    let err = connect(&url, config(tls)).await.unwrap_err();
    let Error::Connect { source, .. } = &err else {
        panic!("{err:?}");
    };
    assert!(source.to_string().contains("TLS handshake"), "{err}");
}

#[tokio::test]
async fn tls_settings_are_checked_before_anything_is_sent_and_keep_the_key_out_of_debug() {
    let (tls, _) = server();
    let key = std::fs::read_to_string(tls.client_key_file()).unwrap();
    let key_body = key.lines().nth(1).unwrap();
    let config = config(tls);
    let shown = format!("{config:?}");
    assert!(
        !shown.contains(key_body) && !shown.contains("PRIVATE KEY"),
        "{shown}"
    );

    // Port 9 is never dialled: each is refused first.
    let url = "zk+tls://127.0.0.1:9";
    let no_ca = ZkConfig::default();
    let err = connect(url, no_ca).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidConfig {
                field: "tls.ca_file",
                ..
            }
        ),
        "{err:?}"
    );
    let not_pem = config.clone().with_tls_ca_file(tls.client_key_file());
    let err = connect(url, not_pem).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidConfig {
                field: "tls.ca_file",
                ..
            }
        ),
        "{err:?}"
    );
    let missing = config.clone().with_tls_ca_file("/nonexistent/ca.crt");
    let err = connect(url, missing).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::TlsFile {
                field: "tls.ca_file",
                ..
            }
        ),
        "{err:?}"
    );
    let swapped = config
        .clone()
        .with_tls_client_cert(tls.client_key_file(), tls.client_cert_file());
    let err = connect(url, swapped).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidConfig {
                field: "tls.key_file",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!format!("{err} {err:?}").contains(key_body));
    let err = connect("zk://127.0.0.1:9", config.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidConfig { field: "tls", .. }),
        "{err:?}"
    );
    let err = connect("zk+tls://bad_host!:9", config).await.unwrap_err();
    assert!(matches!(err, Error::InvalidUrl { .. }), "{err:?}");
}
