//! Holds: the guard every lock returns ([`LockGuard`]) and the undo of a request whose outcome
//! is unknown ([`UndoGuard`]); the registry of a client's live holds, their state and loss
//! ([`WatchdogRegistry`], [`HoldKey`], [`HoldState`]); how a primitive releases a hold
//! ([`HoldRelease`]); and the background-work handle guards receive instead of the client
//! ([`Background`]).
//!
//! May import: the crate's error, owner, backoff and telemetry modules. Knows no store: a
//! store's renewal task drives the registry through [`WatchdogRegistry::due_renewals`] and
//! [`WatchdogRegistry::renewed`].

pub(crate) mod background;
pub(crate) mod extend;
pub(crate) mod guard;
pub(crate) mod guard_lease;
pub(crate) mod handle;
pub(crate) mod key;
pub(crate) mod reason;
pub(crate) mod registry;
pub(crate) mod release;
pub(crate) mod renew;
pub(crate) mod schedule;
pub(crate) mod shared;

pub use background::{Acquisition, Background};
pub use extend::{Extension, HoldExtend};
pub use guard::{LockGuard, UndoGuard};
pub use handle::HoldHandle;
pub use key::{HoldKey, HoldState, HoldWatch};
pub use reason::LossReason;
pub use registry::{WatchdogRegistry, WatchdogStats, WeakRegistry};
pub use release::{HoldRelease, ReleaseTicket};
pub use renew::{RenewWith, Renewal, RenewalGroup, RenewalOutcome};
pub use shared::PendingWork;
