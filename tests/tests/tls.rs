//! TLS: every primitive over `rediss://` (server verified against the test's own CA, and
//! with mutual TLS), woken by pub/sub over TLS; a server whose certificate another CA signed
//! is refused with a typed error that says TLS verification failed.
use std::time::{Duration, Instant};

use keylatch::{Client, Config, Error};
use keylatch_testkit::{ClientAuth, RedisServer, TlsFiles};
use keylatch_tests::every::exercise_every_primitive;

fn tls_server(files: &TlsFiles, auth: ClientAuth) -> RedisServer {
    RedisServer::builder()
        .tls(files, auth)
        .start()
        .expect("start a TLS redis-server")
}

fn config(server: &RedisServer, files: &TlsFiles, client_cert: bool) -> Config {
    let mut builder = Config::builder()
        .url(server.url())
        .tls_ca_file(files.ca_file())
        .fallback_poll(Duration::from_secs(60))
        .connect_timeout(Duration::from_secs(2));
    if client_cert {
        builder = builder.tls_client_cert(files.client_cert_file(), files.client_key_file());
    }
    builder.build().expect("config")
}

async fn every_primitive_over(auth: ClientAuth, client_cert: bool, name: &str) {
    if keylatch_testkit::skip_without_tls() {
        return;
    }
    let files = TlsFiles::generate().unwrap();
    let server = tls_server(&files, auth);
    assert!(server.url().starts_with("rediss://"));
    let holder = Client::connect_with(config(&server, &files, client_cert))
        .await
        .expect("connect over TLS");
    let waiter = Client::connect_with(config(&server, &files, client_cert))
        .await
        .expect("connect over TLS");
    let ran = exercise_every_primitive(&holder, &waiter, name).await;
    assert_eq!(ran, 6);
    // The server saw TLS clients only: its plaintext port is off.
    assert_eq!(server.cli(&["CONFIG", "GET", "port"]).unwrap(), "port\n0");
    // Every permit is back, and no hold is left (the request markers expire on their own).
    let semaphore = holder.semaphore(&format!("{name}-semaphore"));
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    let expirable = holder.permit_expirable_semaphore(&format!("{name}-expirable"));
    assert_eq!(expirable.available_permits().await.unwrap(), 1);
    holder.shutdown().await.unwrap();
    waiter.shutdown().await.unwrap();
    let keys = server.cli(&["KEYS", "*"]).unwrap();
    let holds: Vec<&str> = keys
        .lines()
        .filter(|k| !k.contains(":req:") && !k.ends_with("semaphore") && !k.ends_with("expirable"))
        .collect();
    assert!(holds.is_empty(), "left behind: {holds:?}");
}

#[tokio::test]
async fn every_primitive_over_tls_verified_by_a_ca_file() {
    every_primitive_over(ClientAuth::No, false, "app:tls").await;
}

#[tokio::test]
async fn every_primitive_over_mutual_tls() {
    every_primitive_over(ClientAuth::Required, true, "app:mtls").await;
}

#[tokio::test]
async fn mutual_tls_without_a_client_certificate_is_refused() {
    if keylatch_testkit::skip_without_tls() {
        return;
    }
    let files = TlsFiles::generate().unwrap();
    let server = tls_server(&files, ClientAuth::Required);
    let started = Instant::now();
    let err = Client::connect_with(config(&server, &files, false))
        .await
        .expect_err("the server requires a client certificate");
    println!("refused in {:?}: {err}", started.elapsed());
    assert!(
        matches!(err, Error::Connect { .. } | Error::TlsVerification { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_certificate_from_another_ca_fails_verification() {
    if keylatch_testkit::skip_without_tls() {
        return;
    }
    let files = TlsFiles::generate().unwrap();
    let other = TlsFiles::generate().unwrap();
    let server = tls_server(&files, ClientAuth::No);
    // The client trusts another CA (and, separately, only the system roots).
    let trusting_other = Config::builder()
        .url(server.url())
        .tls_ca_file(other.ca_file())
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let system_roots = Config::builder()
        .url(server.url())
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    for (what, config) in [
        ("another CA", trusting_other),
        ("the system roots", system_roots),
    ] {
        let started = Instant::now();
        let err = Client::connect_with(config)
            .await
            .expect_err("the certificate is not trusted");
        println!("{what}: refused in {:?}: {err}", started.elapsed());
        assert!(
            matches!(err, Error::TlsVerification { .. }),
            "{what}: {err:?}"
        );
        assert!(
            err.to_string().contains("TLS verification failed"),
            "{what}: {err}"
        );
    }
    // Asked for explicitly, verification is skipped.
    let insecure = Config::builder()
        .url(server.url())
        .tls_insecure(true)
        .build()
        .unwrap();
    let client = Client::connect_with(insecure).await.expect("insecure mode");
    let guard = client.lock("app:tls-insecure").lock().await.unwrap();
    guard.unlock().await.unwrap();
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_missing_ca_file_is_a_typed_error() {
    if keylatch_testkit::skip_without_tls() {
        return;
    }
    let files = TlsFiles::generate().unwrap();
    let server = tls_server(&files, ClientAuth::No);
    let missing = files.ca_file().with_file_name("missing-ca.crt");
    let config = Config::builder()
        .url(server.url())
        .tls_ca_file(&missing)
        .build()
        .unwrap();
    let err = Client::connect_with(config).await.expect_err("no CA file");
    assert!(matches!(err, Error::TlsFile { .. }), "{err:?}");
    assert!(err.to_string().contains("missing-ca.crt"), "{err}");
}
