//! Owner identity: who holds a reentrant hold.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use uuid::Uuid;

/// Numbers for threads outside any tokio task start here.
const THREAD_BASE: u64 = 1 << 62;
/// Numbers from [`Owner::unique`] start here.
const UNIQUE_BASE: u64 = 1 << 63;

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);
static NEXT_UNIQUE: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD_NUMBER: u64 = THREAD_BASE | NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

/// Who a lock handle acquires for. Reentrancy is per owner, as Redisson's is per thread.
///
/// The default, [`Owner::CurrentTask`], is resolved when an acquire starts: the current tokio
/// task (unique within the process for the task's life), or the current thread outside any
/// task (the future given to `block_on`, such as the body of `#[tokio::main]`, is not a task:
/// it runs as its thread). So one lock handle shared by many tasks still excludes them from each other, while
/// one task may lock the same name again (reentrancy). Futures joined inside one task
/// (`join!`, `select!`) share that task's identity.
///
/// A guard remembers the owner it acquired for, so it may be unlocked or dropped from another
/// task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Owner {
    /// The current tokio task, or the current thread outside a task.
    #[default]
    CurrentTask,
    /// An explicit owner number, shared by whoever uses it (for example several tasks working
    /// on one job). Prefer [`Owner::unique`], which never collides with task numbers.
    Explicit(u64),
}

impl Owner {
    /// A fresh owner number that no task, thread or other `unique` call in this process uses.
    pub fn unique() -> Owner {
        Owner::Explicit(UNIQUE_BASE | NEXT_UNIQUE.fetch_add(1, Ordering::Relaxed))
    }

    /// The owner number this resolves to now.
    pub fn number(self) -> u64 {
        match self {
            Owner::Explicit(n) => n,
            Owner::CurrentTask => current_number(),
        }
    }

    /// The full owner id for a client.
    pub fn resolve(self, client: Uuid) -> OwnerId {
        OwnerId {
            client,
            number: self.number(),
        }
    }
}

fn current_number() -> u64 {
    match tokio::task::try_id() {
        // A task id is a process-wide counter; its text form is that number.
        Some(id) => id
            .to_string()
            .parse::<u64>()
            .unwrap_or_else(|_| THREAD_NUMBER.with(|n| *n)),
        None => THREAD_NUMBER.with(|n| *n),
    }
}

/// A resolved owner: `<client-uuid>:<owner-number>`, the hash field Redisson uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OwnerId {
    client: Uuid,
    number: u64,
}

impl OwnerId {
    /// The client's UUID.
    pub fn client(&self) -> Uuid {
        self.client
    }

    /// The owner number within the client.
    pub fn number(&self) -> u64 {
        self.number
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.client, self.number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tasks_are_distinct_owners() {
        let outside = Owner::CurrentTask.number();
        let a = tokio::spawn(async { (Owner::CurrentTask.number(), Owner::CurrentTask.number()) });
        let b = tokio::spawn(async { Owner::CurrentTask.number() });
        let (a1, a2) = a.await.unwrap();
        let b = b.await.unwrap();
        assert_eq!(a1, a2, "one task is one owner");
        assert_ne!(a1, b, "two tasks are two owners");
        assert!(a1 < THREAD_BASE && b < THREAD_BASE);
        // `block_on`'s future is not a task: it is the thread.
        assert!(outside >= THREAD_BASE);
    }

    #[test]
    fn threads_and_unique_owners_are_distinct() {
        let here = Owner::CurrentTask.number();
        let there = std::thread::spawn(|| Owner::CurrentTask.number())
            .join()
            .unwrap();
        assert_ne!(here, there);
        assert!((THREAD_BASE..UNIQUE_BASE).contains(&here));
        assert_ne!(Owner::unique(), Owner::unique());
        let id = Owner::Explicit(7).resolve(Uuid::nil());
        assert_eq!(id.to_string(), "00000000-0000-0000-0000-000000000000:7");
    }
}
