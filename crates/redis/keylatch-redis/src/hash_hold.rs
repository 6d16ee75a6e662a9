//! The lease of a hold kept in Redisson's lock layout (a hash per lock, one field per owner
//! with its hold count; the lease is the hash's expiry): changed by one script call that first
//! checks the hold is still the owner's. Shared by the reentrant-family and fair locks, whose
//! guards extend through it.
//!
//! May import: the client, the command path's scripts, the core.

use std::time::Duration;

use keylatch_core::hold::Extension;
use keylatch_core::{Error, OwnerId, Result, lease_millis, validate_lease};

use crate::client::Client;
use crate::connection::script::LuaScript;

/// Changes the lease of an owner's hold on a lock hash (see [`extend_hash_hold`]).
pub static EXTEND_HASH_HOLD: LuaScript =
    LuaScript::freeing("extend_hash_hold", include_str!("lua/extend_hash_hold.lua"));

/// Extends (or sets) the lease of `owner`'s hold on the lock hash `key` as `how` says, in one
/// script call; the lease left afterwards, or `None` when `owner` no longer holds it (nothing
/// changed).
///
/// # Errors
/// [`Error::InvalidLease`] for a duration out of range (nothing sent); [`Error::NoTtl`] when
/// the hash has no expiry to extend; Redis errors.
///
/// # Cancel safety
/// Dropping the future may or may not have changed the lease.
pub async fn extend_hash_hold(
    client: &Client,
    key: &str,
    owner: OwnerId,
    how: Extension,
) -> Result<Option<Duration>> {
    validate_lease(how.duration())?;
    let call = EXTEND_HASH_HOLD
        .call()
        .key(key)
        .arg(lease_millis(how.duration()))
        .arg(owner.wire_form().as_str())
        .arg(if matches!(how, Extension::By(_)) {
            "1"
        } else {
            "0"
        })
        .arg(if client.config().holder_metadata {
            "1"
        } else {
            "0"
        });
    match client.eval::<i64>(&call).await? {
        -1 => Ok(None),
        -2 => Err(Error::NoTtl {
            key: key.to_owned(),
        }),
        left => Ok(Some(Duration::from_millis(
            u64::try_from(left).unwrap_or(0),
        ))),
    }
}
