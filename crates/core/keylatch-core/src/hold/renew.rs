//! How a hold is kept alive: a fixed lease or the store's watchdog ([`Renewal`], [`RenewWith`]),
//! and what a store's renewal task is asked to renew and reports back ([`RenewalGroup`],
//! [`RenewalOutcome`]).

use std::any::Any;
use std::fmt;
use std::time::Duration;

use crate::hold::key::HoldKey;
use crate::hold::reason::LossReason;

/// How a hold is kept alive.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Renewal {
    /// A fixed lease: nothing renews it.
    Lease,
    /// Renewed by the store's watchdog every third of its lease, the store's way (`RenewWith`;
    /// the Redis layer: a script). Holds renewed the same way with the same lease are renewed
    /// together.
    Watchdog(RenewWith),
}

/// A store's way of renewing holds (the Redis layer: its renewal script), kept by the registry
/// without knowing what it is: compared by identity, and handed back to the store's renewal
/// task, which downcasts it.
#[derive(Clone, Copy)]
pub struct RenewWith(&'static (dyn Any + Send + Sync));

impl RenewWith {
    /// Wraps the store's renewal description.
    pub const fn new(how: &'static (dyn Any + Send + Sync)) -> RenewWith {
        RenewWith(how)
    }

    /// The store's renewal description, if it is a `T`.
    pub fn downcast<T: Any>(&self) -> Option<&'static T> {
        let how: &'static (dyn Any + Send + Sync) = self.0;
        (how as &'static dyn Any).downcast_ref()
    }

    pub(super) fn addr(&self) -> usize {
        std::ptr::from_ref(self.0).cast::<()>() as usize
    }
}

impl PartialEq for RenewWith {
    fn eq(&self, other: &RenewWith) -> bool {
        self.addr() == other.addr()
    }
}

impl Eq for RenewWith {}

impl fmt::Debug for RenewWith {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RenewWith").field(&self.addr()).finish()
    }
}

/// One call's worth of renewals, from [`WatchdogRegistry::due_renewals`](crate::WatchdogRegistry::due_renewals): holds renewed the
/// same way, with the same lease (and, on a store that partitions, in the same partition).
#[derive(Debug)]
pub struct RenewalGroup {
    /// How to renew them.
    pub with: RenewWith,
    /// Their lease.
    pub lease: Duration,
    /// The holds.
    pub holds: Vec<HoldKey>,
}

/// What a renewal found for one hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RenewalOutcome {
    /// Renewed: valid for another lease from when the renewal was sent.
    Renewed,
    /// Gone: the hold is lost ([`LossReason::Gone`]).
    Gone,
    /// Gone, and the store knows why: the hold is lost for this reason (a server that
    /// restarted, a primary that moved).
    Lost(LossReason),
    /// Gone, and not lost: it ended as the store meant it to (a fair lock's waiter that the
    /// lock was handed to).
    Ended,
}
