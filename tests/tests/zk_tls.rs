//! `zk+tls://` through the facade (the `zookeeper-tls` feature): the TLS files come from
//! `Config::tls` as for `rediss://`; locks over a TLS-only ZooKeeper with mutual TLS; a
//! server certificate of another CA is a typed error; `insecure` is refused; the `Debug` of
//! the configuration shows neither the URL's password nor key material.
use std::time::Duration;

use keylatch::{Client, Config, Error, StoreKind};
use keylatch_testkit::{ClientAuth, TlsFiles, ZooKeeperServer};

fn config(server: &ZooKeeperServer, ca: &TlsFiles, client: &TlsFiles) -> Config {
    Config::builder()
        .url(format!("zk+tls://app:S3cret@{}", server.connect_string()))
        .tls_ca_file(ca.ca_file())
        .tls_client_cert(client.client_cert_file(), client.client_key_file())
        .watchdog_timeout(Duration::from_secs(2))
        .build()
        .expect("config")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_facade_locks_over_zookeepers_tls_port_and_refuses_another_ca() {
    let files = TlsFiles::generate().unwrap();
    let server = ZooKeeperServer::start_tls(&files, ClientAuth::Required).expect("start");
    let config = config(&server, &files, &files);
    let shown = format!("{config:?}");
    let key = std::fs::read_to_string(files.client_key_file()).unwrap();
    assert!(!shown.contains("S3cret"), "{shown}");
    assert!(!shown.contains(key.lines().nth(1).unwrap()), "{shown}");

    let a = Client::connect_with(config.clone()).await.expect("connect");
    let b = Client::connect_with(config.clone()).await.expect("connect");
    assert_eq!(a.store_kind(), StoreKind::ZooKeeper);
    let guard = a.lock("facade-tls").lock().await.unwrap();
    assert!(b.lock("facade-tls").try_lock().await.unwrap().is_none());
    guard.unlock().await.unwrap();
    b.lock("facade-tls")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();

    let other = TlsFiles::generate().unwrap();
    let mut wrong_ca = config.clone();
    wrong_ca.tls.ca_file = Some(other.ca_file());
    let err = Client::connect_with(wrong_ca).await.unwrap_err();
    assert!(matches!(err, Error::TlsVerification { .. }), "{err:?}");
    assert!(!format!("{err} {err:?}").contains("S3cret"));

    let mut insecure = config;
    insecure.tls.insecure = true;
    let err = Client::connect_with(insecure).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidConfig {
                field: "tls.insecure",
                ..
            }
        ),
        "{err:?}"
    );
}
