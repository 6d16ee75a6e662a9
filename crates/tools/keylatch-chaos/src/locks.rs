//! The lock of each workload and a hold of it, behind one interface for the worker: which
//! lock a worker takes next (a read or write side, a set of names) is drawn from its seed.

use std::sync::Arc;
use std::time::Duration;

use keylatch::{
    Client, DistributedLock, FairLock, LockGuard, MultiGuard, MultiLock, ReadLock, RedLock,
    RedLockGuard, ReentrantLock, Semaphore, SemaphorePermit, WriteLock,
};

use crate::history::Mode;

/// The lock every worker contends for (and the prefix of the `multilock` workload's names).
pub const LOCK: &str = "klc-lock";

/// How many names the `multilock` workload draws its sets from.
const MULTI_NAMES: usize = 4;

/// The lock of a workload.
pub enum Lock {
    /// `reentrant`.
    One(ReentrantLock),
    /// `fair`.
    Fair(FairLock),
    /// `redlock`.
    Red(RedLock),
    /// `semaphore`.
    Sem(Semaphore),
    /// `rwlock`: both sides of one read-write lock (fencing on the write side).
    Rw(ReadLock, WriteLock),
    /// `multilock`: reentrant locks `klc-lock-0` … `klc-lock-3`, taken 2 or 3 at a time.
    Multi(Vec<ReentrantLock>),
}

/// What one acquisition takes: the side of a read-write lock, the names of a multi-lock.
#[derive(Debug, Clone, Default)]
pub struct Choice {
    /// Read or write (`rwlock`).
    pub mode: Option<Mode>,
    /// The names taken (`multilock`).
    pub names: Option<Vec<String>>,
}

/// A hold of any of them.
pub enum Guard {
    /// A lock's, or one side's of a read-write lock.
    One(LockGuard),
    /// A RedLock's.
    Red(RedLockGuard),
    /// A semaphore's permit.
    Sem(SemaphorePermit),
    /// Every part of a multi-lock.
    Multi(MultiGuard),
}

impl Lock {
    /// Whether the lock grants in arrival order (the fair lock).
    pub fn fifo(&self) -> bool {
        matches!(self, Lock::Fair(_))
    }

    /// The lock of `workload` on `clients` (the first one, or all for a RedLock).
    ///
    /// # Errors
    /// No client, or a RedLock that cannot be built.
    ///
    /// # Cancel safety
    /// Cancel safe: a semaphore's permits are set up again by any later call.
    pub async fn new(
        workload: crate::Workload,
        clients: &[Client],
        permits: u32,
    ) -> Result<Lock, String> {
        let client = clients.first().ok_or("no lock server")?;
        Ok(match workload {
            crate::Workload::Reentrant => Lock::One(client.lock(LOCK).with_fencing(true)),
            crate::Workload::Fair => Lock::Fair(client.fair_lock(LOCK).with_fencing(true)),
            crate::Workload::Redlock => Lock::Red(
                RedLock::new(
                    clients
                        .iter()
                        .map(|c| Arc::new(c.lock(LOCK)) as Arc<dyn DistributedLock>),
                )
                .map_err(|e| e.to_string())?,
            ),
            crate::Workload::Semaphore => {
                let sem = client.semaphore(LOCK).with_permits(permits);
                // Only the first worker's call sets it; a lost one is set up again by acquires.
                let _ = sem.try_set_permits(permits).await;
                Lock::Sem(sem)
            }
            crate::Workload::Rwlock => {
                let rw = client.rw_lock(LOCK);
                Lock::Rw(rw.read_lock(), rw.write_lock().with_fencing(true))
            }
            crate::Workload::Multilock => Lock::Multi(
                (0..MULTI_NAMES)
                    .map(|i| client.lock(&format!("{LOCK}-{i}")))
                    .collect(),
            ),
        })
    }

    /// Draws what the next acquisition takes: a side (readers two times in three), a set of
    /// two or three names.
    pub fn choose(&self, rng: &mut fastrand::Rng) -> Choice {
        match self {
            Lock::Rw(..) => Choice {
                mode: Some(if rng.u8(0..3) < 2 {
                    Mode::Read
                } else {
                    Mode::Write
                }),
                names: None,
            },
            Lock::Multi(locks) => {
                let mut names: Vec<String> = locks.iter().map(|l| l.name().to_owned()).collect();
                rng.shuffle(&mut names);
                names.truncate(rng.usize(2..=3));
                names.sort();
                Choice {
                    mode: None,
                    names: Some(names),
                }
            }
            _ => Choice::default(),
        }
    }

    /// Takes what `choice` says within `wait`, held for `lease` (`None`: the watchdog mode,
    /// renewed until released; on ZooKeeper, which refuses a fixed lease, while the session
    /// lasts).
    ///
    /// # Errors
    /// The primitive's errors.
    ///
    /// # Cancel safety
    /// As the primitive's acquire.
    pub async fn try_lock_for(
        &self,
        choice: &Choice,
        wait: Duration,
        lease: Option<Duration>,
    ) -> keylatch::Result<Option<Guard>> {
        Ok(match self {
            Lock::One(l) => l.try_lock_for(wait, lease).await?.map(Guard::One),
            Lock::Fair(l) => l.try_lock_for(wait, lease).await?.map(Guard::One),
            Lock::Red(l) => l.try_lock_for(wait, lease).await?.map(Guard::Red),
            Lock::Sem(l) => l.try_acquire_for(wait, lease).await?.map(Guard::Sem),
            Lock::Rw(read, write) => match choice.mode {
                Some(Mode::Read) => read.try_lock_for(wait, lease).await?,
                _ => write.try_lock_for(wait, lease).await?,
            }
            .map(Guard::One),
            Lock::Multi(locks) => {
                let names = choice.names.as_deref().unwrap_or_default();
                let parts = locks
                    .iter()
                    .filter(|l| names.iter().any(|n| n == l.name()))
                    .map(|l| Arc::new(l.clone()) as Arc<dyn DistributedLock>);
                MultiLock::new(parts)?
                    .try_lock_for(wait, lease)
                    .await?
                    .map(Guard::Multi)
            }
        })
    }
}

impl Guard {
    /// The fencing token, if the hold has one.
    pub fn fencing_token(&self) -> Option<u64> {
        match self {
            Guard::One(g) => g.fencing_token(),
            Guard::Red(_) | Guard::Sem(_) | Guard::Multi(_) => None,
        }
    }

    /// The owner of the hold, if it names one.
    pub fn owner(&self) -> Option<String> {
        match self {
            Guard::One(g) => Some(g.owner_id().to_string()),
            Guard::Multi(g) => g.guards().first().map(|g| g.owner_id().to_string()),
            Guard::Red(_) | Guard::Sem(_) => None,
        }
    }

    /// Whether the guard says the hold is lost (its local deadline passed without a renewal,
    /// or the watchdog found it gone): what a careful user checks before acting on the hold.
    pub fn is_lost(&self) -> bool {
        let until = match self {
            Guard::One(g) => g.valid_until(),
            Guard::Red(g) => g.valid_until(),
            Guard::Sem(g) => g.valid_until(),
            Guard::Multi(g) => g.valid_until(),
        };
        until.is_none_or(|u| u <= tokio::time::Instant::now())
    }

    /// Completes when the library signals the hold lost (see `LockGuard::lost`).
    pub fn lost(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        match self {
            Guard::One(g) => Box::pin(g.lost()),
            Guard::Red(g) => Box::pin(g.lost()),
            Guard::Sem(g) => Box::pin(g.lost()),
            Guard::Multi(g) => Box::pin(g.lost()),
        }
    }

    /// Releases the hold.
    ///
    /// # Errors
    /// The primitive's release errors.
    ///
    /// # Cancel safety
    /// As the primitive's release.
    pub async fn unlock(self) -> keylatch::Result<()> {
        match self {
            Guard::One(g) => g.unlock().await,
            Guard::Red(g) => g.unlock().await,
            Guard::Sem(g) => g.release().await,
            Guard::Multi(g) => g.unlock().await,
        }
    }
}
