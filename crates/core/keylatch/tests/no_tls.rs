//! Built without the `tls` feature (`cargo test -p keylatch --no-default-features --test
//! no_tls`, run by scripts/test.sh), every TLS URL is a typed error that names the feature,
//! returned before anything is sent (the addresses below have nothing listening).
#![cfg(not(feature = "tls"))]

use keylatch::{Client, Error};

#[tokio::test]
async fn tls_urls_need_the_tls_feature() {
    for url in [
        "rediss://127.0.0.1:1",
        "REDISS://127.0.0.1:1",
        "rediss+sentinel://127.0.0.1:1/jobs",
        "rediss+cluster://127.0.0.1:1",
    ] {
        let err = Client::connect(url).await.unwrap_err();
        println!("{url}: {err}");
        assert!(
            matches!(err, Error::InvalidConfig { field: "url", .. }),
            "{url}: {err:?}"
        );
        assert!(err.to_string().contains("`tls` feature"), "{url}: {err}");
    }
}
