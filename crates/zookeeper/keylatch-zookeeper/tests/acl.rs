//! ACLs and credentials: by default the nodes keylatch creates are open to anyone (Curator's
//! default ACL), so a client with other credentials, or none, takes a lock a client with
//! digest credentials created; `acl=creator` (or `AclPolicy::CreatorOnly`) refuses it, and
//! `acl=read` lets it look but not lock. A password without a user name, or a creator-only
//! policy without credentials, is refused before anything is sent; the password shows
//! nowhere.
//!
//! The ACLs are checked by reading them back from the server with a plain session.
//!
//! May import: keylatch-testkit, keylatch-zookeeper, keylatch-core, zookeeper-client.

mod support;

use keylatch_core::secrecy::SecretString;
use keylatch_core::{DistributedLock, Error};
use keylatch_zookeeper::{AclPolicy, ZkClient, ZkConfig};
use support::{raw, server};
use zookeeper_client as zk;

fn at(userinfo: &str, chroot: &str, query: &str) -> String {
    format!(
        "zk://{userinfo}{}{chroot}{query}",
        server().connect_string()
    )
}

/// A plain session with the digest credentials of keylatch's clients, to read ACLs that
/// only the creator may read.
async fn raw_as_app() -> zk::Client {
    zk::Client::connector()
        .with_auth("digest", b"app:S3cret")
        .connect(&server().connect_string())
        .await
        .unwrap()
}

/// The ACL of `path`, as `scheme:id:perms` strings.
async fn acl_of(raw: &zk::Client, path: &str) -> Vec<String> {
    let (acls, _) = raw.get_acl(path).await.unwrap();
    acls.iter()
        .map(|a| format!("{}:{}:{}", a.scheme(), a.id(), a.permission()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_client_with_other_credentials_takes_a_lock_keylatch_created() {
    let owner = ZkClient::connect(&at("app:S3cret@", "/acl-open", ""))
        .await
        .unwrap();
    let held = owner.lock("shared").unwrap().lock().await.unwrap();
    let raw = raw(server()).await;
    for path in [
        "/acl-open",
        "/acl-open/keylatch",
        "/acl-open/keylatch/shared",
    ] {
        assert_eq!(acl_of(&raw, path).await, ["world:anyone:ALL"], "{path}");
    }
    // Another user, and no user at all: both queue behind the holder and get the lock.
    let other = ZkClient::connect(&at("other:Pw0ther@", "/acl-open", ""))
        .await
        .unwrap();
    let anonymous = ZkClient::connect(&at("", "/acl-open", "")).await.unwrap();
    assert!(
        other
            .lock("shared")
            .unwrap()
            .try_lock()
            .await
            .unwrap()
            .is_none()
    );
    held.unlock().await.unwrap();
    other
        .lock("shared")
        .unwrap()
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    anonymous
        .lock("shared")
        .unwrap()
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    for client in [owner, other, anonymous] {
        client.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creator_only_refuses_other_credentials_and_read_only_lets_them_look() {
    let raw = raw_as_app().await;
    // acl=creator in the URL.
    let owner = ZkClient::connect(&at("app:S3cret@", "/acl-creator", "?acl=creator"))
        .await
        .unwrap();
    let held = owner.lock("private").unwrap().lock().await.unwrap();
    let acl = acl_of(&raw, "/acl-creator/keylatch/private").await;
    assert_eq!(acl.len(), 1);
    assert!(acl[0].starts_with("digest:app:"), "{acl:?}");
    assert!(!acl[0].contains("S3cret"));
    let other = ZkClient::connect(&at("other:Pw0ther@", "/acl-creator", ""))
        .await
        .unwrap();
    let refused = other.lock("private").unwrap().try_lock().await;
    assert!(matches!(refused, Err(Error::Auth(_))), "{refused:?}");
    // The same credentials given through the configuration are the creator's.
    let same = ZkClient::connect_with(
        &at("app@", "/acl-creator", ""),
        ZkConfig::default().with_password(SecretString::from("S3cret".to_owned())),
    )
    .await
    .unwrap();
    assert!(
        same.lock("private")
            .unwrap()
            .try_lock()
            .await
            .unwrap()
            .is_none()
    );
    held.unlock().await.unwrap();

    // AclPolicy::ReadOnlyForOthers: others read the queue, never join it.
    let reader = ZkClient::connect_with(
        &at("app:S3cret@", "/acl-read", ""),
        ZkConfig::default().with_acl_policy(AclPolicy::ReadOnlyForOthers),
    )
    .await
    .unwrap();
    let held = reader.lock("visible").unwrap().lock().await.unwrap();
    assert_eq!(
        acl_of(&raw, "/acl-read/keylatch/visible").await.len(),
        2,
        "creator all and anyone read"
    );
    let looker = ZkClient::connect(&at("other:Pw0ther@", "/acl-read", ""))
        .await
        .unwrap();
    let seen = looker.contenders("visible", 10).await.unwrap();
    assert_eq!(seen.nodes.len(), 1);
    let refused = looker.lock("visible").unwrap().try_lock().await;
    assert!(matches!(refused, Err(Error::Auth(_))), "{refused:?}");
    held.unlock().await.unwrap();
    for client in [owner, other, same, reader, looker] {
        client.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_credentials_are_refused_before_anything_is_sent_and_never_shown() {
    let password = || SecretString::from("S3cret".to_owned());
    // A password without a user name (Config::password, KEYLATCH_REDIS_PASSWORD,
    // --password-file on a zk:// URL without a user) is refused, not dropped.
    let config = ZkConfig::default().with_password(password());
    assert!(!format!("{config:?}").contains("S3cret"));
    let refused = ZkClient::connect_with(&at("", "", ""), config).await;
    let err = refused.unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidConfig {
                field: "password",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!format!("{err} {err:?}").contains("S3cret"));
    // A user without a password.
    let err = ZkClient::connect(&at("app@", "", "")).await.unwrap_err();
    assert!(matches!(err, Error::InvalidConfig { .. }), "{err:?}");
    // A creator-only policy without credentials: the server would refuse every create.
    for query in ["?acl=creator", "?acl=read"] {
        let err = ZkClient::connect(&at("", "", query)).await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidConfig {
                    field: "acl_policy",
                    ..
                }
            ),
            "{err:?}"
        );
    }
    // A user from the configuration with the URL's password.
    let ok = ZkClient::connect_with(
        &at("", "/acl-config", ""),
        ZkConfig::default()
            .with_user("app")
            .with_password(password()),
    )
    .await
    .unwrap();
    assert!(!format!("{ok:?}").contains("S3cret"));
    ok.shutdown().await.unwrap();
}
