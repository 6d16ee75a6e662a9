//! A raw ZooKeeper session beside keylatch's, with zookeeper-client directly: the bench's
//! floor (the requests a lock needs, sent one by one) and the removal of the persistent nodes
//! the demo and the bench leave under the base path.

use std::time::Duration;

use keylatch::Config;
use keylatch::secrecy::ExposeSecret;
use zookeeper_client as zk;

use crate::failure::{EX_SOFTWARE, EX_UNAVAILABLE, EX_USAGE, Failure};

/// Where keylatch puts its nodes on a `zk://` URL (`ZkConfig`'s default base path, which
/// `Client::connect_with` keeps).
pub const BASE_PATH: &str = "/keylatch";

/// Whether the configuration names a ZooKeeper ensemble (`zk://`).
pub fn is_zookeeper(config: &Config) -> bool {
    config
        .url
        .expose_secret()
        .get(..5)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("zk://"))
}

/// A raw session on the ensemble of a `zk://` URL, inside its chroot.
#[derive(Debug)]
pub struct RawZk {
    client: zk::Client,
    /// The ACL keylatch gives its nodes on this URL (its `acl=` parameter; open by default).
    acls: zk::Acls<'static>,
}

/// The creator all, anyone read (`acl=read`).
static CREATOR_ALL_ANYONE_READ: [zk::Acl; 2] = [
    zk::Acl::new_const(zk::Permission::ALL, "auth", ""),
    zk::Acl::new_const(zk::Permission::READ, "world", "anyone"),
];

fn store_failure(what: &str, err: zk::Error) -> Failure {
    Failure::new(EX_SOFTWARE, format!("zookeeper {what}: {err}"))
}

impl RawZk {
    /// Opens a session on `config`'s `zk://[user[:password]@]host:port[,…][/chroot][?acl=…]`
    /// (digest credentials when given, the configured user and password over the URL's),
    /// rooted at the chroot.
    ///
    /// # Errors
    /// 64 for a URL that is not `zk://…`, 69 when no session could be opened.
    pub async fn connect(config: &Config) -> Result<RawZk, Failure> {
        let url = config.url.expose_secret();
        let rest = url
            .get(5..)
            .filter(|_| is_zookeeper(config))
            .ok_or_else(|| Failure::new(EX_USAGE, "not a zk:// URL"))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let acls = match query.split('&').find_map(|p| p.strip_prefix("acl=")) {
            Some("creator") => zk::Acls::creator_all(),
            Some("read") => zk::Acls::new(&CREATOR_ALL_ANYONE_READ),
            _ => zk::Acls::anyone_all(),
        };
        let (authority, chroot) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (userinfo, hosts) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        let (url_user, url_password) = match userinfo.map(|u| u.split_once(':')) {
            Some(Some((user, password))) => (Some(user), Some(password)),
            Some(None) => (userinfo, None),
            None => (None, None),
        };
        let user = config.username.as_deref().or(url_user);
        let password = config
            .password
            .as_ref()
            .map(|p| p.expose_secret())
            .or(url_password);
        let mut connector = zk::Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .with_connection_timeout(Duration::from_secs(5));
        if let (Some(user), Some(password)) = (user, password) {
            let digest = format!("{user}:{password}");
            connector = connector.with_auth("digest", digest.as_bytes());
        }
        let mut client = connector.connect(hosts).await.map_err(|err| {
            Failure::new(
                EX_UNAVAILABLE,
                format!(
                    "cannot open a ZooKeeper session on {}: {err}",
                    keylatch::redact_url(url)
                ),
            )
        })?;
        if !matches!(chroot, "" | "/") {
            client = client
                .chroot(chroot)
                .map_err(|_| Failure::new(EX_USAGE, "the chroot is not a valid path"))?;
        }
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
