//! The ZooKeeper store of [keylatch](https://docs.rs/keylatch): Apache Curator's lock recipes
//! behind keylatch's core [`DistributedLock`](keylatch_core::DistributedLock) trait, on the
//! [`zookeeper-client`](https://docs.rs/zookeeper-client) crate.
//!
//! - [`ZkClient`]: one ZooKeeper session
//!   (`zk://[user[:password]@]host:port[,…][/chroot][?acl=open|creator|read]`, or
//!   `zk+tls://…` for ZooKeeper's TLS port with the `tls` feature: see
//!   [`ZkConfig::with_tls_ca_file`]), its base path for lock names, the [`AclPolicy`] of the
//!   nodes it creates (open to anyone by default, as Curator's), and a session watcher that
//!   marks every hold lost when the connection is lost (by default: before the ensemble could
//!   expire the session and hand the lock on; see [`DisconnectLoss`] for the bound and the
//!   other policies) or the session ends, and opens a new session after an expiry (Curator's
//!   reconnection after LOST). Lock directories are container nodes, which the server deletes
//!   once empty (Curator's `creatingParentContainersIfNeeded`).
//! - [`ZkMutex`]: Curator's `InterProcessMutex` — an ephemeral-sequential node
//!   `_c_<uuid>-lock-<sequence>` per acquisition under the lock's path, the lowest sequence
//!   holds, each waiter watches only its predecessor (FIFO, no herd); reentrancy is local to
//!   the client (a count per owner; the last release deletes the node), or refused with
//!   `AlreadyHeld` by a [`non_reentrant`](ZkMutex::non_reentrant) handle. Holds of a
//!   [`revocable`](ZkMutex::revocable) handle learn a revoke request (Curator's `Revoker`, or
//!   [`ZkMutex::revoke_holder`]) through `lost()`, with `LossReason::Revoked`.
//! - [`ZkSemaphore`]: Curator's `InterProcessSemaphoreV2` — a lease node per permit under
//!   `leases/`, a mutex under `locks/` held while a lease is taken; permits are [`ZkPermit`]s
//!   (or guards through [`ZkSemaphore::as_lock`]). The maximum may come from a Curator
//!   `SharedCount` node ([`ZkSemaphore::with_shared_count`]), followed as it changes.
//! - [`ZkReadWriteLock`]: Curator's `InterProcessReadWriteLock` — `__READ__` and `__WRIT__`
//!   nodes in one directory; a writer waits for every earlier node, a reader for earlier
//!   writers; a write holder may also read (downgrade), a reader may not write (refused).
//!
//! Every guard is the core's [`LockGuard`](keylatch_core::LockGuard); its fencing token is
//! the creation zxid of the acquisition's node, which strictly increases per path, across
//! leader changes too.
//!
//! ```no_run
//! use keylatch_core::DistributedLock;
//! use keylatch_zookeeper::ZkClient;
//!
//! # async fn demo() -> keylatch_core::Result<()> {
//! let client = ZkClient::connect("zk://127.0.0.1:2181/apps/billing").await?;
//! let lock = client.lock("invoices")?; // the znode /keylatch/invoices under the chroot
//! let guard = lock.lock().await?;
//! let token = guard.fencing_token(); // Some(creation zxid)
//! tokio::select! {
//!     () = guard.lost() => { /* the session ended: stop writing */ }
//!     () = async { /* ... critical section, passing `token` along ... */ } => {}
//! }
//! guard.unlock().await?;
//! client.shutdown().await?;
//! # let _ = token;
//! # Ok(()) }
//! ```
//!
//! **Layers.** This crate depends on keylatch-core and zookeeper-client, never on a Redis
//! crate; primitives reach ZooKeeper only through it (docs/design.md).
//!
//! # Leases
//! A fixed lease ([`AcquireOptions::with_lease`](keylatch_core::AcquireOptions::with_lease))
//! has no meaning on ZooKeeper, where a node lives as long as its session: an acquisition with
//! one fails with [`Error::Unsupported`](keylatch_core::Error::Unsupported) and sends nothing.
//! `valid_until()` of a guard is far in the future; `lost()` is what tells the hold ended.
//!
//! # Errors
//! keylatch's [`Error`](keylatch_core::Error): bad names and configuration are typed errors
//! found before anything is sent (`InvalidName`, `InvalidUrl`, `InvalidConfig`); a lost
//! connection is `Connection` (ambiguous: what it may have created is undone), a request
//! timeout `Timeout`, refused credentials `Auth`, a closed client `Closed`, and every other
//! error of the ZooKeeper client `Store`, with the library's error as the source. The
//! password of a URL never appears in an error, a log or a `Debug` output.
//!
//! # Cancel safety
//! Acquisitions are cancel safe: the node of a dropped acquisition is deleted in the
//! background (found by its protected `_c_<uuid>-` prefix when the create's reply had not
//! arrived); [`ZkClient::wait_idle`] waits for those deletes. A dropped guard is released in
//! the background; `unlock().await` releases and reports errors.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod acl;
mod client;
mod holds;
mod inspect;
mod mutex;
mod node;
mod path;
mod revoke;
mod rwlock;
mod semaphore;
mod session;
mod shared_count;
mod tls;
mod url;
mod watch;

pub use acl::AclPolicy;
pub use client::{ZkClient, ZkConfig};
pub use inspect::{Contender, Contenders};
pub use mutex::ZkMutex;
pub use node::NodeGone;
pub use rwlock::{ZkReadWriteLock, ZkRwSide};
pub use semaphore::{ZkPermit, ZkSemaphore, ZkSemaphoreLock};
pub use shared_count::BadSharedCount;
pub use url::{UrlError, ZkUrl, is_zookeeper_url};
pub use watch::DisconnectLoss;
