//! The ZooKeeper side of the facade's handles: a lock name and an owner, turned into
//! keylatch-zookeeper's mutex or read-write lock at each call (so a name ZooKeeper refuses is
//! a typed error there, as on Redis). Without the `zookeeper` feature the types are empty
//! enums: no value of them exists, and `zk://` URLs are refused at connect.
//!
//! May import: keylatch-core, keylatch-zookeeper, keylatch-redis's `Config`, `future.rs`.

#[cfg(feature = "zookeeper")]
pub(crate) use on::*;

#[cfg(not(feature = "zookeeper"))]
pub(crate) use off::*;

#[cfg(feature = "zookeeper")]
mod on {
    use std::fmt;
    use std::sync::Arc;

    use keylatch_core::{
        AcquireOptions, Background, DistributedLock, Error, LockGuard, Owner, Result,
    };
    use keylatch_redis::Config;
    use keylatch_zookeeper::ZkConfig;

    use crate::future::Boxed;

    /// What the facade needs of a ZooKeeper client, behind a trait object for the same reason.
    trait Session: Send + Sync + fmt::Debug {
        fn get(&self) -> &keylatch_zookeeper::ZkClient;
    }

    impl Session for keylatch_zookeeper::ZkClient {
        fn get(&self) -> &keylatch_zookeeper::ZkClient {
            self
        }
    }

    /// A ZooKeeper client, as the facade keeps it.
    #[derive(Clone, Debug)]
    pub(crate) struct ZkClient(Arc<dyn Session>);

    impl ZkClient {
        pub(crate) fn new(client: keylatch_zookeeper::ZkClient) -> ZkClient {
            ZkClient(Arc::new(client))
        }

        pub(crate) fn get(&self) -> &keylatch_zookeeper::ZkClient {
            self.0.get()
        }

        pub(crate) fn shutdown(&self) -> Boxed<'_, Result<()>> {
            Box::pin(self.get().shutdown())
        }

        pub(crate) fn wait_idle(&self) -> Boxed<'_, ()> {
            Box::pin(self.get().wait_idle())
        }

        pub(crate) fn id(&self) -> uuid::Uuid {
            self.get().id()
        }

        pub(crate) fn background(&self) -> &Background {
            self.get().background()
        }
    }

    /// Connects to the ensemble of `config.url`: the session timeout asked for is
    /// `config.watchdog_timeout` (how long a crashed holder keeps its locks, on either store),
    /// the release and shutdown timeouts are `config`'s, the TLS files `config.tls`'s (for
    /// `zk+tls://`), `config.username` and `config.password` the digest credentials over the
    /// URL's (a password without a user name is refused, never dropped), the rest
    /// ZooKeeper's defaults (see [`ZkConfig`]).
    pub(crate) async fn connect(config: &Config) -> Result<ZkClient> {
        let mut zk = ZkConfig::default()
            .with_session_timeout(config.watchdog_timeout)
            .with_release_timeout(config.release_timeout)
            .with_shutdown_timeout(config.shutdown_timeout);
        if let Some(user) = &config.username {
            zk = zk.with_user(user.clone());
        }
        if let Some(password) = &config.password {
            zk = zk.with_password(password.clone());
        }
        let invalid = |field, reason| Err(Error::InvalidConfig { field, reason });
        if config.tls.insecure {
            return invalid(
                "tls.insecure",
                "ZooKeeper's TLS always verifies the server: give its CA in tls.ca_file",
            );
        }
        if let Some(ca) = &config.tls.ca_file {
            zk = zk.with_tls_ca_file(ca);
        }
        match (&config.tls.cert_file, &config.tls.key_file) {
            (Some(cert), Some(key)) => zk = zk.with_tls_client_cert(cert, key),
            (None, None) => {}
            _ => {
                return invalid(
                    "tls",
                    "a client certificate needs both cert_file and key_file",
                );
            }
        }
        let url = config.url.expose_secret().to_owned();
        let connecting: Boxed<'static, Result<keylatch_zookeeper::ZkClient>> =
            Box::pin(async move { keylatch_zookeeper::ZkClient::connect_with(&url, zk).await });
        Ok(ZkClient::new(connecting.await?))
    }

    /// A mutex by name (Curator's `InterProcessMutex`; FIFO by construction, so it backs the
    /// reentrant and the fair lock alike).
    #[derive(Clone, Debug)]
    pub(crate) struct ZkLock {
        client: ZkClient,
        name: Arc<str>,
        owner: Option<Owner>,
        /// Whether the holder's second acquisition re-enters (else it is `AlreadyHeld`).
        reentrant: bool,
        /// An option this store cannot honour, refused at acquire.
        refuse: Option<&'static str>,
    }

    impl ZkLock {
        pub(crate) fn new(client: &ZkClient, name: &str, reentrant: bool) -> ZkLock {
            ZkLock {
                client: client.clone(),
                name: Arc::from(name),
                owner: None,
                reentrant,
                refuse: None,
            }
        }

        pub(crate) fn name(&self) -> &str {
            &self.name
        }

        pub(crate) fn is_reentrant(&self) -> bool {
            self.reentrant
        }

        pub(crate) fn with_owner(&self, owner: Owner) -> ZkLock {
            ZkLock {
                owner: Some(owner),
                ..self.clone()
            }
        }

        /// The same lock, refusing every acquisition with `Unsupported { operation }`.
        pub(crate) fn refusing(&self, operation: &'static str) -> ZkLock {
            ZkLock {
                refuse: Some(operation),
                ..self.clone()
            }
        }

        fn mutex(&self) -> Result<keylatch_zookeeper::ZkMutex> {
            let mut mutex = self.client.get().lock(&self.name)?;
            if !self.reentrant {
                mutex = mutex.non_reentrant();
            }
            Ok(match self.owner {
                Some(owner) => mutex.with_owner(owner),
                None => mutex,
            })
        }

        pub(crate) fn acquire(
            &self,
            options: AcquireOptions,
        ) -> Boxed<'_, Result<Option<LockGuard>>> {
            Box::pin(async move {
                let mutex = self.mutex()?;
                if let Some(operation) = self.refuse {
                    return Err(Error::Unsupported {
                        primitive: "zookeeper mutex",
                        operation,
                        reason: "a ZooKeeper lock has no such mode",
                    });
                }
                mutex.acquire(options).await
            })
        }

        pub(crate) fn is_locked(&self) -> Boxed<'_, Result<bool>> {
            Box::pin(async move { self.mutex()?.is_locked().await })
        }

        pub(crate) fn force_unlock(&self) -> Boxed<'_, Result<bool>> {
            Box::pin(async move { self.mutex()?.force_unlock().await })
        }
    }

    /// A read-write lock by name (Curator's `InterProcessReadWriteLock`).
    #[derive(Clone, Debug)]
    pub(crate) struct ZkRw {
        client: ZkClient,
        name: Arc<str>,
        owner: Option<Owner>,
    }

    impl ZkRw {
        pub(crate) fn new(client: &ZkClient, name: &str) -> ZkRw {
            ZkRw {
                client: client.clone(),
                name: Arc::from(name),
                owner: None,
            }
        }

        pub(crate) fn name(&self) -> &str {
            &self.name
        }

        pub(crate) fn with_owner(&self, owner: Owner) -> ZkRw {
            ZkRw {
                owner: Some(owner),
                ..self.clone()
            }
        }

        pub(crate) fn side(&self, write: bool) -> ZkSide {
            ZkSide {
                rw: self.clone(),
                write,
            }
        }

        /// Whether anyone holds the lock: the first node under its path always holds.
        pub(crate) fn is_locked(&self) -> Boxed<'_, Result<bool>> {
            Box::pin(async move {
                let nodes = self.client.get().contenders(&self.name, 0).await?.nodes;
                Ok(!nodes.is_empty())
            })
        }
    }

    /// One side of a [`ZkRw`].
    #[derive(Clone, Debug)]
    pub(crate) struct ZkSide {
        rw: ZkRw,
        write: bool,
    }

    impl ZkSide {
        pub(crate) fn name(&self) -> &str {
            &self.rw.name
        }

        pub(crate) fn with_owner(&self, owner: Owner) -> ZkSide {
            ZkSide {
                rw: self.rw.with_owner(owner),
                write: self.write,
            }
        }

        fn side(&self) -> Result<keylatch_zookeeper::ZkRwSide> {
            let lock = self.rw.client.get().read_write_lock(&self.rw.name)?;
            let lock = match self.rw.owner {
                Some(owner) => lock.with_owner(owner),
                None => lock,
            };
            Ok(if self.write {
                lock.write_lock()
            } else {
                lock.read_lock()
            })
        }

        pub(crate) fn acquire(
            &self,
            options: AcquireOptions,
        ) -> Boxed<'_, Result<Option<LockGuard>>> {
            Box::pin(async move { self.side()?.acquire(options).await })
        }

        /// Whether the lock is in this side's mode, as on Redis: the first node (the one that
        /// holds) is a reader's for the read side, a writer's for the write side (a writer
        /// that also reads keeps the lock in write mode).
        pub(crate) fn is_locked(&self) -> Boxed<'_, Result<bool>> {
            Box::pin(async move {
                self.side()?;
                let nodes = self
                    .rw
                    .client
                    .get()
                    .contenders(&self.rw.name, 0)
                    .await?
                    .nodes;
                let kind = if self.write { "write" } else { "read" };
                Ok(nodes.first().is_some_and(|first| first.kind == kind))
            })
        }

        pub(crate) fn force_unlock(&self) -> Boxed<'_, Result<bool>> {
            Box::pin(async move { self.side()?.force_unlock().await })
        }
    }
}

#[cfg(not(feature = "zookeeper"))]
mod off {
    use keylatch_core::{AcquireOptions, Error, LockGuard, Owner, Result, StoreError};
    use keylatch_redis::Config;

    macro_rules! empty {
        ($($ty:ident),*) => {$(
            /// No value exists without the `zookeeper` feature.
            #[derive(Clone, Debug)]
            pub(crate) enum $ty {}

            #[allow(clippy::unused_async, dead_code)]
            impl $ty {
                pub(crate) fn name(&self) -> &str {
                    match *self {}
                }
                pub(crate) fn with_owner(&self, _owner: Owner) -> $ty {
                    match *self {}
                }
                pub(crate) async fn acquire(&self, _: AcquireOptions) -> Result<Option<LockGuard>> {
                    match *self {}
                }
                pub(crate) async fn is_locked(&self) -> Result<bool> {
                    match *self {}
                }
                pub(crate) async fn force_unlock(&self) -> Result<bool> {
                    match *self {}
                }
            }
        )*};
    }

    empty!(ZkClient, ZkLock, ZkRw, ZkSide);

    #[allow(dead_code)]
    impl ZkLock {
        pub(crate) fn new(client: &ZkClient, _name: &str, _reentrant: bool) -> ZkLock {
            match *client {}
        }
        pub(crate) fn is_reentrant(&self) -> bool {
            match *self {}
        }
        pub(crate) fn refusing(&self, _operation: &'static str) -> ZkLock {
            match *self {}
        }
    }

    #[allow(dead_code)]
    impl ZkRw {
        pub(crate) fn new(client: &ZkClient, _name: &str) -> ZkRw {
            match *client {}
        }
        pub(crate) fn side(&self, _write: bool) -> ZkSide {
            match *self {}
        }
    }

    #[allow(clippy::unused_async, dead_code)]
    impl ZkClient {
        pub(crate) async fn shutdown(&self) -> Result<()> {
            match *self {}
        }
        pub(crate) async fn wait_idle(&self) {
            match *self {}
        }
        pub(crate) fn id(&self) -> uuid::Uuid {
            match *self {}
        }
        pub(crate) fn background(&self) -> &keylatch_core::Background {
            match *self {}
        }
    }

    /// Why a `zk://` URL is refused without the feature.
    #[derive(Debug, thiserror::Error)]
    #[error("keylatch was built without its `zookeeper` feature")]
    struct NoFeature;

    #[allow(clippy::unused_async)]
    pub(crate) async fn connect(config: &Config) -> Result<ZkClient> {
        Err(Error::InvalidUrl {
            url: config.url.redacted(),
            source: StoreError::new(NoFeature),
        })
    }
}
