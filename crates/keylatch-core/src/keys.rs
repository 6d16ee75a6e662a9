//! Key naming (Redisson's conventions) and the validation of names and leases.

use std::time::Duration;

use crate::error::{Error, Result};

/// The longest lock name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 1024;

/// The longest lease accepted: 30 days. A longer lease is almost certainly a unit mistake.
pub const MAX_LEASE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Checks a lock name: non-empty, at most [`MAX_NAME_LEN`] bytes, and without `{` or `}`.
///
/// Redisson reads braces as a cluster hash tag and then uses the name as it is in derived keys:
/// the names `x` and `{x}` would share a fair lock's queue or a semaphore's permits. Names with
/// braces are accepted only with [`Config::hash_tagged_names`](crate::Config::hash_tagged_names)
/// (see [`validate_name_with`]).
///
/// # Errors
/// [`Error::InvalidName`].
pub fn validate_name(name: &str) -> Result<()> {
    validate_name_with(name, false)
}

/// As [`validate_name`]; `hash_tags` accepts names with `{` or `}`.
///
/// # Errors
/// [`Error::InvalidName`].
pub fn validate_name_with(name: &str, hash_tags: bool) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidName {
            reason: "the name is empty",
        });
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::InvalidName {
            reason: "the name is longer than 1024 bytes",
        });
    }
    if !hash_tags && name.contains(['{', '}']) {
        return Err(Error::InvalidName {
            reason: "braces make a hash tag that shares keys with another name (enable Config::hash_tagged_names for a Redisson application's own tagged names)",
        });
    }
    Ok(())
}

/// Checks a lease: at least one millisecond and at most [`MAX_LEASE`].
///
/// # Errors
/// [`Error::InvalidLease`].
pub fn validate_lease(lease: Duration) -> Result<()> {
    if lease < Duration::from_millis(1) {
        return Err(Error::InvalidLease {
            lease,
            reason: "a lease must be at least 1ms",
        });
    }
    if lease > MAX_LEASE {
        return Err(Error::InvalidLease {
            lease,
            reason: "a lease must be at most 30 days",
        });
    }
    Ok(())
}

/// A lease in whole milliseconds, rounded up so that a sub-millisecond remainder never shortens
/// it.
pub fn lease_millis(lease: Duration) -> u64 {
    let ms = lease.as_millis();
    let rounded = if lease.subsec_nanos().is_multiple_of(1_000_000) {
        ms
    } else {
        ms + 1
    };
    u64::try_from(rounded).unwrap_or(u64::MAX)
}

/// `prefix:{name}`, or `prefix:name` when `name` already carries a hash tag; Redisson's
/// `prefixName`. Keeps every key of one primitive in one cluster slot.
pub fn prefixed(prefix: &str, name: &str) -> String {
    let tagged = name.contains('{');
    let mut key = String::with_capacity(prefix.len() + name.len() + 3);
    key.push_str(prefix);
    key.push(':');
    if tagged {
        key.push_str(name);
    } else {
        key.push('{');
        key.push_str(name);
        key.push('}');
    }
    key
}

/// `{name}:suffix`, or `name:suffix` when `name` already carries a hash tag; Redisson's
/// `suffixName`.
pub fn suffixed(name: &str, suffix: &str) -> String {
    let tagged = name.contains('{');
    let mut key = String::with_capacity(name.len() + suffix.len() + 3);
    if tagged {
        key.push_str(name);
    } else {
        key.push('{');
        key.push_str(name);
        key.push('}');
    }
    key.push(':');
    key.push_str(suffix);
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naming_follows_redisson() {
        assert_eq!(
            prefixed("redisson_lock__channel", "job"),
            "redisson_lock__channel:{job}"
        );
        assert_eq!(
            prefixed("redisson_lock_queue", "a{b}"),
            "redisson_lock_queue:a{b}"
        );
        assert_eq!(suffixed("sem", "timeout"), "{sem}:timeout");
        assert_eq!(suffixed("{sem}x", "timeout"), "{sem}x:timeout");
    }

    #[test]
    fn names_and_leases_are_checked() {
        assert!(validate_name("").is_err());
        assert!(validate_name(&"x".repeat(MAX_NAME_LEN + 1)).is_err());
        assert!(validate_name(&"x".repeat(MAX_NAME_LEN)).is_ok());
        for aliasing in ["{x}", "a{b}", "a}b", "{", "}"] {
            assert!(validate_name(aliasing).is_err(), "{aliasing}");
            assert!(validate_name_with(aliasing, true).is_ok(), "{aliasing}");
        }
        assert!(validate_lease(Duration::ZERO).is_err());
        assert!(validate_lease(Duration::from_micros(999)).is_err());
        assert!(validate_lease(MAX_LEASE + Duration::from_secs(1)).is_err());
        assert!(validate_lease(Duration::from_millis(1)).is_ok());
        assert_eq!(lease_millis(Duration::from_micros(1500)), 2);
        assert_eq!(lease_millis(Duration::from_millis(300)), 300);
    }
}
