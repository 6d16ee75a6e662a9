//! Permit counts: the limits, the checks of a count or a change, a script's refusal, a count
//! read back.
//!
//! May import: the core's errors only.

use keylatch_core::{Error, Result};

/// The largest permit count a semaphore holds: Java's `Integer.MAX_VALUE`, so that Redisson
/// clients can read every count keylatch writes. Larger counts are refused with
/// [`Error::InvalidPermits`].
pub const MAX_PERMITS: u64 = i32::MAX as u64;

/// How many permit ids one call of the permit-expirable semaphore hands out at most.
pub const MAX_PERMITS_PER_CALL: u32 = 1000;

/// Checks a permit count: at least 1, at most [`MAX_PERMITS`].
pub(crate) fn check_permits(permits: u64) -> Result<()> {
    if permits == 0 {
        return Err(Error::InvalidPermits {
            reason: "the permit count is zero",
        });
    }
    if permits > MAX_PERMITS {
        return Err(Error::InvalidPermits {
            reason: "the permit count is larger than 2147483647",
        });
    }
    Ok(())
}

/// Checks a change of the permit count: not zero, at most [`MAX_PERMITS`] either way.
pub(crate) fn check_delta(delta: i64) -> Result<()> {
    if delta == 0 {
        return Err(Error::InvalidPermits {
            reason: "the change is zero",
        });
    }
    if delta.unsigned_abs() > MAX_PERMITS {
        return Err(Error::InvalidPermits {
            reason: "the change is larger than 2147483647",
        });
    }
    Ok(())
}

/// The error for a change refused by a script (`-1`: over the maximum, `-2`: below zero).
pub(crate) fn refused(code: i64) -> Error {
    Error::InvalidPermits {
        reason: if code == -1 {
            "the count would exceed 2147483647"
        } else {
            "the count would fall below zero"
        },
    }
}

/// Parses a count read with `GET`; `None` means missing (0). A negative count (Redisson's
/// `addPermits` can leave one) reads as 0.
pub(crate) fn parse_count(value: Option<String>, key: &str) -> Result<u64> {
    let Some(text) = value else { return Ok(0) };
    let count: i64 = text.trim().parse().map_err(|_| Error::WrongType {
        key: key.to_owned(),
    })?;
    Ok(u64::try_from(count).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_checked() {
        assert!(check_permits(0).is_err());
        assert!(check_permits(1).is_ok());
        assert!(check_permits(MAX_PERMITS).is_ok());
        assert!(check_permits(MAX_PERMITS + 1).is_err());
        assert!(check_delta(0).is_err());
        assert!(check_delta(-1).is_ok());
        assert!(check_delta(i64::MIN).is_err());
        assert!(check_delta(MAX_PERMITS as i64 + 1).is_err());
        assert_eq!(parse_count(None, "k").unwrap(), 0);
        assert_eq!(parse_count(Some("7".into()), "k").unwrap(), 7);
        assert_eq!(parse_count(Some("-3".into()), "k").unwrap(), 0);
        assert!(matches!(
            parse_count(Some("seven".into()), "k"),
            Err(Error::WrongType { .. })
        ));
    }
}
