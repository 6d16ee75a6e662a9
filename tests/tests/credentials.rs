//! Passwords in URLs: read the same way (percent-decoding, as redis-rs reads `redis://`) by
//! all three URL forms, against servers that require them; and never shown, whatever the
//! text around them, by an error, a log line, `Debug` output or a serialized `Config`.
use std::sync::OnceLock;
use std::time::Duration;

use keylatch::{Client, Config, SecretUrl, redact_url};
use keylatch_testkit::{RedisCluster, SentinelSet};
use keylatch_tests::support::{Captured, capture};
use keylatch_tests::{RedisServer, unique};
use proptest::prelude::*;

/// Every character the URL grammar treats specially in a user-info, in one password.
const AWKWARD: &str = "p+a&s%s/w:o@r=d?x";

/// `password` percent-encoded for a URL's user-info: `%`, `/`, `:`, `@`, `?` and `#` must be;
/// `+`, `&` and `=` may stay as they are (`all`: encode them too).
fn encode(password: &str, all: bool) -> String {
    password
        .chars()
        .map(|c| match c {
            '%' | '/' | ':' | '@' | '?' | '#' => format!("%{:02X}", c as u32),
            '+' | '&' | '=' if all => format!("%{:02X}", c as u32),
            c => c.to_string(),
        })
        .collect()
}

/// `url` (`scheme://hosts…`) with `:password@` after its scheme.
fn with_password(url: &str, encoded: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
    format!("{scheme}://:{encoded}@{rest}")
}

/// Connects with `url` alone (no other credentials), takes and releases a lock, and checks
/// the hold was on the server.
async fn lock_through(url: &str, name: &str) {
    let config = Config::builder()
        .url(url)
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let client = Client::connect_with(config)
        .await
        .unwrap_or_else(|err| panic!("{}: {err}", redact_url(url)));
    let lock = client.lock(name);
    let guard = lock.lock().await.unwrap();
    assert!(lock.is_locked().await.unwrap(), "the hold is on the server");
    guard.unlock().await.unwrap();
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn awkward_passwords_through_a_single_server_url() {
    for password in [AWKWARD, "plus+sign", "a&b=c", "100%", "s/l:a@s?h"] {
        let server = RedisServer::builder().password(password).start().unwrap();
        for all in [false, true] {
            let url = with_password(&server.url(), &encode(password, all));
            lock_through(&url, &unique("cred-single")).await;
        }
        // Without the password, the server refuses: the URL's password is what got in.
        let refused = Client::connect(&server.url()).await.unwrap_err();
        assert!(matches!(refused, keylatch::Error::Auth(_)), "{refused:?}");
    }
}

#[tokio::test]
async fn awkward_passwords_through_a_sentinel_url() {
    let set = SentinelSet::builder().password(AWKWARD).start().unwrap();
    for all in [false, true] {
        let url = with_password(&set.url(), &encode(AWKWARD, all));
        lock_through(&url, &unique("cred-sentinel")).await;
    }
    // Decoded as form data, `+` would be a space and `&` would end the password.
    let wrong = with_password(&set.url(), &encode("p a", false));
    let refused = Client::connect(&wrong).await.unwrap_err();
    assert!(matches!(refused, keylatch::Error::Auth(_)), "{refused}");
}

#[tokio::test]
async fn awkward_passwords_through_a_cluster_url() {
    let cluster = RedisCluster::builder()
        .primaries(3)
        .replicas_per_primary(0)
        .password(AWKWARD)
        .start()
        .unwrap();
    for all in [false, true] {
        let url = with_password(&cluster.seed_url(), &encode(AWKWARD, all));
        lock_through(&url, &unique("cred-cluster")).await;
    }
}

#[test]
fn a_password_that_is_not_utf8_once_decoded_is_a_typed_error() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for url in [
        "redis+sentinel://:%FF%FE@127.0.0.1:1/svc",
        "redis+cluster://:%FF%FE@127.0.0.1:1",
    ] {
        let err = runtime.block_on(Client::connect(url)).unwrap_err();
        assert!(
            matches!(
                err,
                keylatch::Error::InvalidSentinelUrl { .. }
                    | keylatch::Error::InvalidClusterUrl { .. }
            ),
            "{url}: {err}"
        );
    }
}

/// The secret every generated text carries: upper-case letters and digits, which the
/// generated text around it never has, so it can only appear where it was put.
const SECRET: &str = "ZQ7WK3";

/// The captured log, installed once for this binary (at debug, so every event counts).
fn log() -> &'static Captured {
    static LOG: OnceLock<Captured> = OnceLock::new();
    LOG.get_or_init(|| capture(tracing::Level::DEBUG))
}

/// Text around a secret: any of the characters a URL can hold (and some it cannot).
fn junk() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-z0-9:@/?#&=+%._\\[\\] -]{0,10}").unwrap()
}

/// Text that cannot move a connection's host away from loopback: no `/`, `?`, `#` or `@`.
fn local_junk() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-z0-9:&=+%._-]{0,8}").unwrap()
}

const SCHEMES: [&str; 7] = [
    "redis",
    "rediss",
    "REDIS",
    "redis+sentinel",
    "redis+cluster",
    "unix",
    "valkey",
];

/// `SECRET` in each place a password can take, with `a`, `b` and `c` around it.
fn placed(scheme: &str, a: &str, b: &str, c: &str) -> Vec<String> {
    vec![
        format!("{scheme}://{a}:{SECRET}@{b}"),
        format!("{scheme}://:{SECRET}@{b}/{c}"),
        format!("{scheme}:/:{SECRET}@{b}"),
        format!("{scheme}:{a}:{SECRET}@{b}"),
        format!("{a}:{SECRET}@{b}"),
        format!("{a}:{SECRET}"),
        // A scheme's name where the user goes.
        format!("{scheme}:{SECRET}"),
        format!("{scheme}:{SECRET}@{b}"),
        format!("{scheme}://{a}:{SECRET}"),
        format!("{scheme}://{b}?{c}password={SECRET}&{c}"),
        format!("{scheme}://{b}?pass={SECRET}"),
        format!("{scheme}://{a}:{SECRET}@{b}?{c}"),
        format!("{scheme}://{a}:{SECRET}@{b}#{c}"),
    ]
}

fn assert_hidden(what: &str, shown: &str) {
    assert!(!shown.contains(SECRET), "{what} shows the secret: {shown}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Redaction, `SecretUrl` and `Config` (its `Debug` and its serialized form).
    #[test]
    fn no_secret_in_redacted_text(
        scheme in proptest::sample::select(&SCHEMES[..]),
        a in junk(),
        b in junk(),
        c in junk(),
    ) {
        for text in placed(scheme, &a, &b, &c) {
            assert_hidden(&text, &redact_url(&text));
            let url = SecretUrl::from(text.as_str());
            assert_hidden(&text, &format!("{url} {url:?}"));
            let config = Config::builder()
                .url(text.as_str())
                .password(SECRET)
                .sentinel_credentials(None, SECRET)
                .build();
            match config {
                Ok(config) => {
                    assert_hidden(&text, &format!("{config:?}"));
                    assert_hidden(&text, &serde_json::to_string(&config).unwrap());
                }
                Err(err) => assert_hidden(&text, &format!("{err} {err:?}")),
            }
        }
    }

    /// Connecting: the error (with its sources) and every log event, for URLs whose host can
    /// only be loopback (a closed port, so nothing answers).
    #[test]
    fn no_secret_in_connect_errors_or_logs(
        scheme in proptest::sample::select(&SCHEMES[..]),
        a in local_junk(),
        c in local_junk(),
        host in proptest::sample::select(&[
            "127.0.0.1:1",
            "127.0.0.1:notaport",
            "[::1]:1",
            "127.0.0.1:1,127.0.0.1:2/svc",
            "127.0.0.1",
        ][..]),
    ) {
        let log = log();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        for text in placed(scheme, &a, host, &c) {
            let config = Config::builder()
                .url(text.as_str())
                .connect_timeout(Duration::from_millis(200))
                .response_timeout(Duration::from_millis(200))
                .build()
                .unwrap();
            let outcome = runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(5), Client::connect_with(config)).await
            });
            if let Ok(Err(err)) = outcome {
                let mut shown = format!("{err} {err:?}");
                let mut source = std::error::Error::source(&err);
                while let Some(cause) = source {
                    shown.push_str(&format!(" {cause} {cause:?}"));
                    source = cause.source();
                }
                assert_hidden(&text, &shown);
            }
        }
        assert_hidden("the log", &log.text());
    }
}
