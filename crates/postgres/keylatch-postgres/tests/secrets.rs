//! The password of a URL never shows in an error (with its sources) or a `Debug` output.

mod support;

use std::error::Error as _;

use keylatch_postgres::PgClient;

fn chain(err: &dyn std::error::Error) -> String {
    let mut text = format!("{err} {err:?}");
    let mut source = err.source();
    while let Some(err) = source {
        text.push_str(&format!(" {err} {err:?}"));
        source = err.source();
    }
    text
}

#[tokio::test]
async fn the_password_never_shows() {
    // Nothing listens on port 1: a connect error.
    let err = PgClient::connect("postgres://app:S3cretPw@127.0.0.1:1/jobs")
        .await
        .unwrap_err();
    let text = chain(&err);
    assert!(!text.contains("S3cretPw"), "{text}");
    assert!(
        text.contains("postgres://app:***@127.0.0.1:1/jobs"),
        "{text}"
    );
    // A URL that does not parse: refused before anything is sent.
    let err = PgClient::connect("postgres://app:S3cretPw@127.0.0.1:notaport/jobs")
        .await
        .unwrap_err();
    assert!(
        matches!(err, keylatch_core::Error::InvalidUrl { .. }),
        "{err}"
    );
    let text = chain(&err);
    assert!(!text.contains("S3cretPw"), "{text}");
    // A client on a real server (trust auth ignores the password) and its locks.
    let server = support::server();
    let url = format!(
        "postgres://postgres:S3cretPw@127.0.0.1:{}/postgres",
        server.port()
    );
    let client = PgClient::connect(&url).await.unwrap();
    let lock = client.lock("secret").unwrap();
    let guard = keylatch_core::DistributedLock::lock(&lock).await.unwrap();
    let debug = format!("{client:?} {lock:?} {guard:?}");
    assert!(!debug.contains("S3cretPw"), "{debug}");
    let _ = err.source();
}
