//! The facade's client: `Client::connect(url)` and `client.lock(name)`.

use std::ops::Deref;

use keylatch_core::{Config, LuaScript, Result};
use keylatch_fair::FairLock;
use keylatch_reentrant::ReentrantLock;
use keylatch_rwlock::RwLock;
use keylatch_semaphore::{PermitExpirableSemaphore, Semaphore};

/// A connection to Redis, and the factory of every keylatch primitive. Cheap to clone.
///
/// It dereferences to [`keylatch_core::Client`] for the lower-level parts (stats, the hub,
/// the watchdog).
///
/// ```no_run
/// # async fn demo() -> keylatch::Result<()> {
/// let client = keylatch::Client::connect("redis://127.0.0.1:6379").await?;
/// let guard = client.lock("nightly-report").lock().await?;
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    core: keylatch_core::Client,
}

/// Every script of every primitive, preloaded at connect.
fn all_scripts() -> Vec<&'static LuaScript> {
    let mut scripts = keylatch_reentrant::SCRIPTS.to_vec();
    scripts.extend_from_slice(keylatch_fair::SCRIPTS);
    scripts.extend_from_slice(keylatch_rwlock::SCRIPTS);
    scripts.extend_from_slice(keylatch_semaphore::SCRIPTS);
    scripts
}

impl Client {
    /// Connects to `url` with the default configuration.
    ///
    /// # Errors
    /// [`Error::InvalidUrl`](crate::Error::InvalidUrl), [`Error::Connect`](crate::Error::Connect)
    /// (naming the URL), [`Error::Auth`](crate::Error::Auth).
    pub async fn connect(url: &str) -> Result<Client> {
        let mut config = Config::default();
        config.url = url.to_owned();
        Client::connect_with(config).await
    }

    /// Connects with the URL from `KEYLATCH_REDIS_URL`, else `REDIS_URL`, else
    /// `redis://127.0.0.1:6379`.
    ///
    /// # Errors
    /// As [`connect`](Client::connect).
    pub async fn connect_from_env() -> Result<Client> {
        Client::connect_with(Config::from_env()).await
    }

    /// Connects with a full configuration.
    ///
    /// # Errors
    /// As [`connect`](Client::connect), and [`Error::InvalidConfig`](crate::Error::InvalidConfig).
    pub async fn connect_with(config: Config) -> Result<Client> {
        let core = keylatch_core::Client::connect(config).await?;
        core.preload(&all_scripts()).await?;
        Ok(Client { core })
    }

    /// The reentrant lock `name` (see [`ReentrantLock`]).
    pub fn lock(&self, name: &str) -> ReentrantLock {
        ReentrantLock::new(&self.core, name)
    }

    /// The fair (FIFO) lock `name` (see [`FairLock`]).
    pub fn fair_lock(&self, name: &str) -> FairLock {
        FairLock::new(&self.core, name)
    }

    /// The read-write lock `name` (see [`RwLock`]).
    pub fn rw_lock(&self, name: &str) -> RwLock {
        RwLock::new(&self.core, name)
    }

    /// The counting semaphore `name` (see [`Semaphore`]).
    pub fn semaphore(&self, name: &str) -> Semaphore {
        Semaphore::new(&self.core, name)
    }

    /// The permit-expirable semaphore `name` (see [`PermitExpirableSemaphore`]).
    pub fn permit_expirable_semaphore(&self, name: &str) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(&self.core, name)
    }

    /// The lower-level client.
    pub fn core(&self) -> &keylatch_core::Client {
        &self.core
    }
}

impl Deref for Client {
    type Target = keylatch_core::Client;

    fn deref(&self) -> &keylatch_core::Client {
        &self.core
    }
}

impl From<keylatch_core::Client> for Client {
    fn from(core: keylatch_core::Client) -> Self {
        Client { core }
    }
}
