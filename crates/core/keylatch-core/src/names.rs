//! The validation every store shares: lock names and leases.

use std::time::Duration;

use crate::error::{Error, Result};

/// The longest lock name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 1024;

/// The longest lease accepted: 30 days. A longer lease is almost certainly a unit mistake.
pub const MAX_LEASE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Checks what every store requires of a lock name: non-empty, at most [`MAX_NAME_LEN`] bytes.
/// A store adds its own rules (Redis: no hash-tag braces).
///
/// # Errors
/// [`Error::InvalidName`].
pub fn validate_name_length(name: &str) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_leases_are_checked() {
        assert!(validate_name_length("").is_err());
        assert!(validate_name_length(&"x".repeat(MAX_NAME_LEN + 1)).is_err());
        assert!(validate_name_length(&"x".repeat(MAX_NAME_LEN)).is_ok());
        assert!(validate_lease(Duration::ZERO).is_err());
        assert!(validate_lease(Duration::from_micros(999)).is_err());
        assert!(validate_lease(MAX_LEASE + Duration::from_secs(1)).is_err());
        assert!(validate_lease(Duration::from_millis(1)).is_ok());
        assert_eq!(lease_millis(Duration::from_micros(1500)), 2);
        assert_eq!(lease_millis(Duration::from_millis(300)), 300);
    }
}
