//! Apache Curator's lock recipes written from their source, on a raw `zookeeper_client` session
//! and none of keylatch's code: the other side of the interoperability tests. Java cannot run
//! here, so this is the protocol of curator-recipes (`locks/LockInternals.java`,
//! `StandardLockInternalsDriver.java`, `InterProcessMutex.java`,
//! `InterProcessReadWriteLock.java`, `InterProcessSemaphoreV2.java`) and curator-framework's
//! protected mode (`ProtectedUtils.java`), step by step:
//!
//! - a contender's node is created in protected mode, `<dir>/_c_<uuid>-<lock name><sequence>`,
//!   EPHEMERAL_SEQUENTIAL, its parents made as containers when missing
//!   (`creatingParentContainersIfNeeded`), its data the client's address (Curator's default
//!   node data, `CuratorFrameworkFactory.getLocalAddress()`);
//! - the children of the directory are all sorted (no filter) by the text after the last
//!   occurrence of the lock name (`standardFixForSorting`), compared as strings; the read-write
//!   lock strips `__READ__` and then `__WRIT__`;
//! - `getsTheLock`: a mutex or a writer holds at index 0 and else watches the node just before
//!   it; a reader holds when no `__WRIT__` node comes before it and else watches the first
//!   writer; the watch is set with `getData` (a `NoNode` means: look again);
//! - a timed-out contender deletes its node; a release deletes it (`NoNode` ignored);
//! - the semaphore v2 takes the mutex `<path>/locks`, creates `<path>/leases/_c_<uuid>-lease-`,
//!   lists the leases with a watch and waits, still holding the mutex, until there are at most
//!   `max_leases` children, then releases the mutex.
//!
//! Left out: retries after a lost connection, revocation, a read lock's downgrade from the
//! same process's write lock.

use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;
use zookeeper_client as zk;

/// `InterProcessMutex.LOCK_NAME`.
pub const LOCK_NAME: &str = "lock-";
/// `InterProcessReadWriteLock.READ_LOCK_NAME`.
pub const READ_LOCK_NAME: &str = "__READ__";
/// `InterProcessReadWriteLock.WRITE_LOCK_NAME`.
pub const WRITE_LOCK_NAME: &str = "__WRIT__";
/// `InterProcessSemaphoreV2.LEASE_BASE_NAME`.
pub const LEASE_BASE_NAME: &str = "lease-";
/// `ProtectedUtils.PROTECTED_PREFIX`.
pub const PROTECTED_PREFIX: &str = "_c_";
/// Curator's default node data: `InetAddress.getLocalHost().getHostAddress()`.
pub const LOCAL_ADDRESS: &[u8] = b"127.0.0.1";

/// `StandardLockInternalsDriver.standardFixForSorting`: the text after the last `lock_name`,
/// or the whole name when it has none.
pub fn standard_fix_for_sorting<'a>(name: &'a str, lock_name: &str) -> &'a str {
    match name.rfind(lock_name) {
        Some(i) => &name[i + lock_name.len()..],
        None => name,
    }
}

/// `ProtectedUtils.isProtectedZNode`, and the rest of a lock node's name as Curator reads it:
/// `_c_` + a 36-character UUID + `-` + `lock_name` + the ten digits of the sequence.
pub fn is_curator_node(name: &str, lock_name: &str) -> bool {
    let prefix_len = PROTECTED_PREFIX.len() + 36 + 1;
    if name.len() <= prefix_len
        || !name.starts_with(PROTECTED_PREFIX)
        || name.as_bytes()[prefix_len - 1] != b'-'
        || Uuid::parse_str(&name[PROTECTED_PREFIX.len()..prefix_len - 1]).is_err()
    {
        return false;
    }
    let rest = &name[prefix_len..];
    let Some(digits) = rest.strip_prefix(lock_name) else {
        return false;
    };
    digits.len() == 10 && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Which recipe's driver decides (`StandardLockInternalsDriver` or the read-write lock's
/// `SortingLockInternalsDriver`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// `InterProcessMutex` (and the semaphore's `locks` mutex): `maxLeases` 1.
    Mutex,
    /// `InterProcessReadWriteLock.WriteLock`: `maxLeases` 1, sorted by the rw driver.
    Write,
    /// `InterProcessReadWriteLock.ReadLock`: the reader's `getsTheLock`.
    Read,
}

impl Driver {
    fn lock_name(self) -> &'static str {
        match self {
            Driver::Mutex => LOCK_NAME,
            Driver::Write => WRITE_LOCK_NAME,
            Driver::Read => READ_LOCK_NAME,
        }
    }

    /// `fixForSorting`.
    fn fix_for_sorting(self, name: &str) -> &str {
        match self {
            Driver::Mutex => standard_fix_for_sorting(name, LOCK_NAME),
            Driver::Write | Driver::Read => standard_fix_for_sorting(
                standard_fix_for_sorting(name, READ_LOCK_NAME),
                WRITE_LOCK_NAME,
            ),
        }
    }

    /// `getsTheLock`: `Ok(None)` when ours holds, else the node to watch; `NoNode` when our
    /// node is not among the children (`validateOurIndex`).
    fn gets_the_lock(self, children: &[String], ours: &str) -> Result<Option<String>, zk::Error> {
        match self {
            Driver::Mutex | Driver::Write => {
                let index = children
                    .iter()
                    .position(|c| c == ours)
                    .ok_or(zk::Error::NoNode)?;
                // maxLeases is 1: hold at index 0, else watch children[index - 1].
                Ok(index.checked_sub(1).map(|i| children[i].clone()))
            }
            Driver::Read => {
                let mut first_write = usize::MAX;
                let mut our_index = None;
                for (index, node) in children.iter().enumerate() {
                    if node.contains(WRITE_LOCK_NAME) {
                        first_write = first_write.min(index);
                    } else if node.starts_with(ours) {
                        our_index = Some(index);
                        break;
                    }
                }
                let index = our_index.ok_or(zk::Error::NoNode)?;
                Ok((index >= first_write).then(|| children[first_write].clone()))
            }
        }
    }
}

/// A Curator client, as far as its lock recipes go: one raw ZooKeeper session. Dropping it
/// closes the session (its ephemeral nodes go: a crash).
#[derive(Debug)]
pub struct Curator {
    zk: zk::Client,
}

impl Curator {
    /// Opens a session to `connect_string`.
    pub async fn connect(connect_string: &str) -> Curator {
        let zk = zk::Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .connect(connect_string)
            .await
            .expect("curator connect");
        Curator { zk }
    }

    /// The raw session.
    pub fn zk(&self) -> &zk::Client {
        &self.zk
    }

    /// `InterProcessMutex.acquire()`: the full path of our node once it holds.
    pub async fn mutex(&self, path: &str) -> String {
        self.attempt_lock(path, Driver::Mutex, None)
            .await
            .expect("curator mutex")
            .expect("no deadline")
    }

    /// `InterProcessMutex.acquire(time, unit)`: `None` when `wait` passed first.
    pub async fn mutex_for(&self, path: &str, wait: Duration) -> Option<String> {
        self.attempt_lock(path, Driver::Mutex, Some(Instant::now() + wait))
            .await
            .expect("curator mutex")
    }

    /// `readLock().acquire()`.
    pub async fn read(&self, path: &str) -> String {
        self.attempt_lock(path, Driver::Read, None)
            .await
            .expect("curator read lock")
            .expect("no deadline")
    }

    /// `writeLock().acquire()`.
    pub async fn write(&self, path: &str) -> String {
        self.attempt_lock(path, Driver::Write, None)
            .await
            .expect("curator write lock")
            .expect("no deadline")
    }

    /// `readLock()` or `writeLock().acquire(time, unit)`.
    pub async fn rw_for(&self, path: &str, write: bool, wait: Duration) -> Option<String> {
        let driver = if write { Driver::Write } else { Driver::Read };
        self.attempt_lock(path, driver, Some(Instant::now() + wait))
            .await
            .expect("curator rw lock")
    }

    /// `release()` of any of them, and a lease's `close()`: deletes the node, `NoNode` ignored.
    pub async fn release(&self, node: &str) {
        match self.zk.delete(node, None).await {
            Ok(()) | Err(zk::Error::NoNode) => {}
            Err(err) => panic!("curator release {node}: {err}"),
        }
    }

    /// `InterProcessSemaphoreV2(path, max_leases).acquire()`: the lease node's full path.
    pub async fn lease(&self, path: &str, max_leases: usize) -> String {
        self.lease_for_inner(path, max_leases, None)
            .await
            .expect("no deadline")
    }

    /// `acquire(time, unit)`: `None` when `wait` passed first.
    pub async fn lease_for(&self, path: &str, max_leases: usize, wait: Duration) -> Option<String> {
        self.lease_for_inner(path, max_leases, Some(Instant::now() + wait))
            .await
    }

    /// `internalAcquire1Lease`.
    async fn lease_for_inner(
        &self,
        path: &str,
        max_leases: usize,
        deadline: Option<Instant>,
    ) -> Option<String> {
        let locks = format!("{path}/locks");
        let leases = format!("{path}/leases");
        let mutex = self
            .attempt_lock(&locks, Driver::Mutex, deadline)
            .await
            .expect("curator semaphore mutex")?;
        let lease = self
            .create_protected(&leases, LEASE_BASE_NAME)
            .await
            .expect("curator create lease");
        let name = lease[leases.len() + 1..].to_owned();
        let mut held = false;
        loop {
            let (children, _, watcher) = self
                .zk
                .get_and_watch_children(&leases)
                .await
                .expect("curator list leases");
            assert!(children.contains(&name), "our lease {lease} is gone");
            if children.len() <= max_leases {
                held = true;
                break;
            }
            if !wait_until(watcher, deadline).await {
                break;
            }
        }
        if !held {
            self.release(&lease).await;
        }
        // `finally { lock.release(); }`: the mutex is held while waiting, released after.
        self.release(&mutex).await;
        held.then_some(lease)
    }

    /// `StandardLockInternalsDriver.createsTheLock`: a protected EPHEMERAL_SEQUENTIAL node
    /// `<dir>/_c_<uuid>-<lock_name>`, its parents made as containers when missing.
    async fn create_protected(&self, dir: &str, lock_name: &str) -> Result<String, zk::Error> {
        let path = format!("{dir}/{PROTECTED_PREFIX}{}-{lock_name}", Uuid::new_v4());
        let mode = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let container = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());
        loop {
            match self.zk.create(&path, LOCAL_ADDRESS, &mode).await {
                Ok((_, sequence)) => return Ok(format!("{path}{sequence}")),
                Err(zk::Error::NoNode) => self.zk.mkdir(dir, &container).await?,
                Err(err) => return Err(err),
            }
        }
    }

    /// `LockInternals.getSortedChildren`: every child, sorted by `fixForSorting`.
    async fn sorted_children(&self, dir: &str, driver: Driver) -> Result<Vec<String>, zk::Error> {
        let mut children = match self.zk.list_children(dir).await {
            Ok(children) => children,
            Err(zk::Error::NoNode) => Vec::new(),
            Err(err) => return Err(err),
        };
        children.sort_by(|a, b| driver.fix_for_sorting(a).cmp(driver.fix_for_sorting(b)));
        Ok(children)
    }

    /// `LockInternals.attemptLock` and `internalLockLoop`: `Ok(None)` when the deadline passed
    /// first (our node deleted then).
    async fn attempt_lock(
        &self,
        dir: &str,
        driver: Driver,
        deadline: Option<Instant>,
    ) -> Result<Option<String>, zk::Error> {
        let ours = self.create_protected(dir, driver.lock_name()).await?;
        let name = &ours[dir.len() + 1..];
        loop {
            let children = self.sorted_children(dir, driver).await?;
            let Some(watch) = driver.gets_the_lock(&children, name)? else {
                return Ok(Some(ours));
            };
            // getData, not exists: no watch is left on a node that is already gone.
            let watcher = match self.zk.get_and_watch_data(&format!("{dir}/{watch}")).await {
                Ok((_, _, watcher)) => watcher,
                Err(zk::Error::NoNode) => continue,
                Err(err) => return Err(err),
            };
            if !wait_until(watcher, deadline).await {
                self.release(&ours).await;
                return Ok(None);
            }
        }
    }
}

/// Waits for a watch to fire: `false` when the deadline passed first.
async fn wait_until(watcher: zk::OneshotWatcher, deadline: Option<Instant>) -> bool {
    match deadline {
        None => {
            watcher.changed().await;
            true
        }
        Some(deadline) => tokio::time::timeout_at(deadline, watcher.changed())
            .await
            .is_ok(),
    }
}
