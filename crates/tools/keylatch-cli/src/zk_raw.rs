//! A raw ZooKeeper session beside keylatch's, with zookeeper-client directly: the bench's
//! floor (the requests a lock needs, sent one by one) and the removal of the persistent nodes
//! the demo and the bench leave under the base path.

use std::time::Duration;

use keylatch::Config;
use keylatch::zookeeper::{ZkClient, ZkConfig, ZkUrl};
use zookeeper_client as zk;

use crate::failure::{EX_SOFTWARE, Failure};

/// Where keylatch puts its nodes on a `zk://` URL (`ZkConfig`'s default base path, which
/// `Client::connect_with` keeps).
pub const BASE_PATH: &str = "/keylatch";

/// Whether the configuration names a ZooKeeper ensemble (`zk://` or `zk+tls://`).
pub fn is_zookeeper(config: &Config) -> bool {
    keylatch::zookeeper::is_zookeeper_url(config.url.expose_secret())
}

/// A raw session on the ensemble of a `zk://` or `zk+tls://` URL, inside its chroot.
#[derive(Debug)]
pub struct RawZk {
    client: zk::Client,
    /// The ACL keylatch gives its nodes on this URL (its `acl=` parameter; open by default).
    acls: zk::Acls<'static>,
}

fn store_failure(what: &str, err: zk::Error) -> Failure {
    Failure::new(EX_SOFTWARE, format!("zookeeper {what}: {err}"))
}

impl RawZk {
    /// Opens a session on `config`'s `zk://[user[:password]@]host:port[,…][/chroot][?acl=…]`
    /// or `zk+tls://…` URL, parsed and connected by keylatch-zookeeper (`ZkUrl::parse`,
    /// `ZkClient::connect_raw`): digest credentials when given (the configured user and
    /// password over the URL's), `config.tls`'s CA and client certificate for `zk+tls://`,
    /// rooted at the chroot.
    ///
    /// # Errors
    /// As `Failure::from(keylatch::Error)`: 64 for a URL that is not a valid ZooKeeper URL (or
    /// TLS settings it cannot take), 69 when no session could be opened, 77 when the
    /// credentials are refused.
    pub async fn connect(config: &Config) -> Result<RawZk, Failure> {
        let url = ZkUrl::parse(config.url.expose_secret())?;
        let mut settings = ZkConfig::default()
            .with_session_timeout(Duration::from_secs(10))
            .with_connection_timeout(Duration::from_secs(5));
        if let Some(user) = &config.username {
            settings = settings.with_user(user.clone());
        }
        if let Some(password) = &config.password {
            settings = settings.with_password(password.clone());
        }
        if let Some(ca) = &config.tls.ca_file {
            settings = settings.with_tls_ca_file(ca);
        }
        if let (Some(cert), Some(key)) = (&config.tls.cert_file, &config.tls.key_file) {
            settings = settings.with_tls_client_cert(cert, key);
        }
        let acls = url.acl_policy().unwrap_or_default().acls();
        let client = ZkClient::connect_raw(&url, settings).await?;
        Ok(RawZk { client, acls })
    }

    /// How nodes are created on this URL: with `mode` and keylatch's ACL.
    pub fn options(&self, mode: zk::CreateMode) -> zk::CreateOptions<'static> {
        mode.with_acls(self.acls)
    }

    /// Creates `path` and its missing parents as persistent nodes.
    ///
    /// # Errors
    /// 70 with the server's answer.
    pub async fn mkdir(&self, path: &str) -> Result<(), Failure> {
        self.client
            .mkdir(path, &self.options(zk::CreateMode::Persistent))
            .await
            .map_err(|err| store_failure("mkdir", err))
    }

    /// Deletes `path` and every node under it; a node already gone is fine. Nodes of live
    /// sessions other than this one are left (their parent then stays).
    pub async fn remove_tree(&self, path: &str) {
        // Breadth first, then deleted deepest first.
        let mut all = vec![path.to_owned()];
        let mut next = 0;
        while next < all.len() {
            if let Ok(children) = self.client.list_children(&all[next]).await {
                let parent = all[next].clone();
                all.extend(children.into_iter().map(|c| format!("{parent}/{c}")));
            }
            next += 1;
        }
        for node in all.iter().rev() {
            if let Err(err) = self.client.delete(node, None).await
                && !matches!(err, zk::Error::NoNode)
            {
                tracing::debug!(node = %node, %err, "left a scratch node");
            }
        }
    }

    /// The floor of one lock + unlock: create an ephemeral-sequential node under `dir`, list
    /// `dir`'s children, delete the node (Curator's mutex sends these three when uncontended).
    ///
    /// # Errors
    /// 70 with the server's answer.
    pub async fn floor_once(&self, dir: &str) -> Result<(), Failure> {
        let prefix = format!("{dir}/lock-");
        let options = self.options(zk::CreateMode::EphemeralSequential);
        let (_, sequence) = self
            .client
            .create(&prefix, b"", &options)
            .await
            .map_err(|err| store_failure("create", err))?;
        self.client
            .list_children(dir)
            .await
            .map_err(|err| store_failure("getChildren", err))?;
        self.client
            .delete(&format!("{prefix}{sequence}"), None)
            .await
            .map_err(|err| store_failure("delete", err))
    }

    /// One raw round trip: `exists` on `path`.
    ///
    /// # Errors
    /// 70 with the server's answer.
    pub async fn round_trip(&self, path: &str) -> Result<(), Failure> {
        self.client
            .check_stat(path)
            .await
            .map(drop)
            .map_err(|err| store_failure("exists", err))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::EX_USAGE;

    fn config(url: &str) -> Config {
        let mut config = Config::default();
        config.url = url.into();
        config
    }

    /// `zk+tls://` goes where `zk://` goes, and its URL to keylatch-zookeeper's parser: the
    /// parser's own refusals come back, nothing is sent.
    #[tokio::test]
    async fn zk_tls_urls_reach_the_one_parser() {
        assert!(is_zookeeper(&config("zk+tls://zk1:2281/app")));
        assert!(is_zookeeper(&config("ZK://zk1:2181")));
        assert!(!is_zookeeper(&config("rediss://zk1:6380")));

        for (url, reason) in [
            (
                "zk+tls://app:@zk1:2281",
                "credentials must be user:password or user",
            ),
            ("zk+tls://zk1", "every host needs a port (host:port)"),
            ("zk+tls://zk1:0", "a port is not a number from 1 to 65535"),
        ] {
            let failure = RawZk::connect(&config(url)).await.unwrap_err();
            assert_eq!(failure.code, EX_USAGE, "{url}: {}", failure.message);
            assert!(
                failure.message.contains(reason),
                "{url}: {}",
                failure.message
            );
        }
        // A well-formed zk+tls:// URL without a CA is refused by the same TLS checks as the
        // library's client, before any connection.
        let failure = RawZk::connect(&config("zk+tls://127.0.0.1:1/app"))
            .await
            .unwrap_err();
        assert_eq!(failure.code, EX_USAGE, "{}", failure.message);
        assert!(failure.message.contains("zk+tls://"), "{}", failure.message);
    }
}
