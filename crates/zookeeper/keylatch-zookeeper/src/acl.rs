//! [`AclPolicy`]: the ACL every node keylatch creates gets (lock directories, lock nodes, a
//! missing chroot), and its `acl=` URL parameter.
//!
//! May import: zookeeper-client only (no other file of this crate).

use zookeeper_client as zk;

/// The ACL of the nodes keylatch creates.
///
/// ```
/// use keylatch_zookeeper::{AclPolicy, ZkConfig};
///
/// // Or `zk://app:secret@host:2181/?acl=read` in the URL.
/// let config = ZkConfig::default().with_acl_policy(AclPolicy::ReadOnlyForOthers);
/// # let _ = config;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum AclPolicy {
    /// `world:anyone` with every permission: Curator's default ACL provider
    /// (`ZooDefs.Ids.OPEN_ACL_UNSAFE`), so clients with other credentials or none (a Curator
    /// application, another keylatch) share the locks. The default; `acl=open`.
    #[default]
    Open,
    /// Every permission for the creator's authenticated ids only (`auth` scheme,
    /// `CREATOR_ALL_ACL`): clients without the same credentials get `NoAuth` on the nodes,
    /// including the lock directories, so they cannot take these locks. Needs digest
    /// credentials. `acl=creator`.
    CreatorOnly,
    /// Every permission for the creator, read for anyone (`CREATOR_ALL_ACL` plus
    /// `READ_ACL_UNSAFE`): others can see who holds and waits, not take the lock. Needs
    /// digest credentials. `acl=read`.
    ReadOnlyForOthers,
}

/// The creator all, anyone read.
static CREATOR_ALL_ANYONE_READ: [zk::Acl; 2] = [
    zk::Acl::new_const(zk::Permission::ALL, "auth", ""),
    zk::Acl::new_const(zk::Permission::READ, "world", "anyone"),
];

impl AclPolicy {
    /// The ACL list for created nodes.
    pub fn acls(self) -> zk::Acls<'static> {
        match self {
            AclPolicy::Open => zk::Acls::anyone_all(),
            AclPolicy::CreatorOnly => zk::Acls::creator_all(),
            AclPolicy::ReadOnlyForOthers => zk::Acls::new(&CREATOR_ALL_ANYONE_READ),
        }
    }

    /// Whether the policy names the creator, which the server refuses (`InvalidACL`) for a
    /// session without credentials.
    pub(crate) fn needs_credentials(self) -> bool {
        !matches!(self, AclPolicy::Open)
    }

    /// The value of an `acl=` URL parameter.
    pub(crate) fn from_param(value: &str) -> Option<AclPolicy> {
        match value {
            "open" => Some(AclPolicy::Open),
            "creator" => Some(AclPolicy::CreatorOnly),
            "read" => Some(AclPolicy::ReadOnlyForOthers),
            _ => None,
        }
    }
}
