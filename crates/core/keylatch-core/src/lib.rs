//! The store-independent core of [keylatch](https://docs.rs/keylatch): distributed locks for
//! async Rust in the Redisson family.
//!
//! **Who this crate is for.** Applications depend on the `keylatch` facade, which re-exports
//! what they need from here. This crate is for the store layers (`keylatch-redis`) and the
//! primitive crates built on them, and for anyone writing another store or primitive:
//!
//! - [`DistributedLock`] and [`AcquireOptions`]: the shared, object-safe lock trait, and the
//!   parts of the wait loop every store shares ([`lock`]).
//! - [`LockGuard`], [`HoldRelease`] and the hold registry ([`hold`]): the guard every lock
//!   returns, its `lost()`, and the background-work handle guards receive.
//! - [`Owner`] and [`OwnerId`]: who holds a reentrant hold (`<client-uuid>:<owner-number>`).
//! - [`Error`]: one error type for every crate and store; a store's own errors are kept as
//!   [`StoreError`] sources.
//! - [`SecretUrl`] and [`redact_url`]: connection URLs that never show their passwords.
//! - [`telemetry`]: the metric names every store records.
//!
//! It depends on no store's client library.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod backoff;
mod error;
pub mod hold;
pub mod lock;
pub mod names;
mod owner;
mod secret;
mod settings;
pub mod telemetry;

pub use backoff::Backoff;
pub use error::{Error, Result, StoreError, UnfinishedRelease};
pub use hold::{
    Acquisition, Background, HoldHandle, HoldKey, HoldRelease, HoldState, HoldWatch, LockGuard,
    LossReason, PendingWork, ReleaseTicket, Renewal, UndoGuard, WatchdogRegistry, WatchdogStats,
};
pub use lock::{
    AcquireOptions, Attempt, DistributedLock, TRANSIENT_RETRIES, deadline_after, jitter, retrying,
    unbounded,
};
pub use names::{MAX_LEASE, MAX_NAME_LEN, lease_millis, validate_lease};
pub use owner::{Owner, OwnerId, OwnerIdText, ParseOwnerIdError};
/// The `secrecy` crate, whose `SecretString` holds passwords.
pub use secrecy;
pub use secret::{SecretUrl, redact_url};
pub use settings::HoldSettings;
