//! Why a hold was lost: [`LossReason`], set once beside the hold's state.
//!
//! May import: nothing of the crate (a leaf of `hold/`).

use std::fmt;
use std::time::Duration;

/// Why a hold was lost, as far as this client can tell (see
/// [`LockGuard::loss_reason`](crate::LockGuard::loss_reason)).
///
/// ```
/// use std::time::Duration;
/// use keylatch_core::LossReason;
///
/// let why = LossReason::RenewalFailed { for_: Duration::from_millis(1500) };
/// assert_eq!(why.to_string(), "no renewal succeeded for 1.5s before the lease ended");
/// assert_eq!(LossReason::Gone.to_string(), "the server no longer has it");
/// assert_eq!(
///     LossReason::ServerRestarted.to_string(),
///     "the server restarted and lost it"
/// );
/// assert_eq!(
///     LossReason::Revoked.to_string(),
///     "another client asked for it (revoked)"
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LossReason {
    /// A fixed lease ran out (nothing renews such a hold).
    LeaseExpired,
    /// The store no longer has the hold, or it is now another owner's: deleted, force-unlocked,
    /// expired on the server, or found missing by an extension, with no restart or failover
    /// seen since it was last confirmed.
    Gone,
    /// The server restarted and lost it (no persistence, or the hold was not yet persisted):
    /// the watchdog found it gone, and the server behind the connection had a new run id
    /// since the hold was last confirmed. Seen when a connection is reopened.
    ServerRestarted,
    /// A failover moved the primary and the new one does not have it: the replica promoted
    /// had not acknowledged the hold. The watchdog found it gone after the primary's address
    /// changed (Sentinel) or its slot's primary did (Cluster) since the hold was last
    /// confirmed.
    PrimaryChanged,
    /// No renewal succeeded before the local deadline (the server did not answer, or refused).
    RenewalFailed {
        /// How long renewals had been failing when the hold was taken as lost.
        for_: Duration,
    },
    /// The watchdog stopped renewing: the hold reached its maximum total hold time
    /// (`AcquireOptions::with_max_hold`).
    MaxHoldReached,
    /// The client shut down while the hold was live.
    ClientShutdown,
    /// The store's session ended (ZooKeeper: expired, closed or refused).
    SessionExpired,
    /// The client was disconnected from the store longer than its bound (ZooKeeper; a zero
    /// bound, the default, as soon as the connection is lost).
    Disconnected {
        /// How long the client had been disconnected (zero: lost on disconnection).
        for_: Duration,
    },
    /// Another client asked the holder to let go (ZooKeeper: Curator's revocation, a
    /// `Revoker.attemptRevoke` on the node of a lock made revocable). Unlike the other
    /// reasons, the store still has the hold: it passes on once the guard is released, so
    /// release it, as for every loss.
    Revoked,
}

impl fmt::Display for LossReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LossReason::LeaseExpired => f.write_str("the lease ran out"),
            LossReason::Gone => f.write_str("the server no longer has it"),
            LossReason::ServerRestarted => f.write_str("the server restarted and lost it"),
            LossReason::PrimaryChanged => {
                f.write_str("a failover moved the primary and the new one does not have it")
            }
            LossReason::RenewalFailed { for_ } => write!(
                f,
                "no renewal succeeded for {for_:.1?} before the lease ended"
            ),
            LossReason::MaxHoldReached => f.write_str("the maximum hold time was reached"),
            LossReason::ClientShutdown => f.write_str("the client shut down"),
            LossReason::SessionExpired => f.write_str("the session ended"),
            LossReason::Disconnected { for_ } if for_.is_zero() => {
                f.write_str("the connection was lost (the session may expire)")
            }
            LossReason::Disconnected { for_ } => {
                write!(f, "disconnected for {for_:.1?}")
            }
            LossReason::Revoked => f.write_str("another client asked for it (revoked)"),
        }
    }
}
