//! Key naming (Redisson's conventions) and the Redis rules for names (no hash-tag braces).

use keylatch_core::names::validate_name_length;
use keylatch_core::{Error, Result};

/// Checks a lock name: non-empty, at most [`MAX_NAME_LEN`](keylatch_core::MAX_NAME_LEN) bytes, and without `{` or `}`.
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
    validate_name_length(name)?;
    if !hash_tags && name.contains(['{', '}']) {
        return Err(Error::InvalidName {
            reason: "braces make a hash tag that shares keys with another name (enable Config::hash_tagged_names for a Redisson application's own tagged names)",
        });
    }
    Ok(())
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
    use keylatch_core::MAX_NAME_LEN;

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
    fn braces_are_refused_unless_asked_for() {
        assert!(validate_name("").is_err());
        assert!(validate_name(&"x".repeat(MAX_NAME_LEN + 1)).is_err());
        for aliasing in ["{x}", "a{b}", "a}b", "{", "}"] {
            assert!(validate_name(aliasing).is_err(), "{aliasing}");
            assert!(validate_name_with(aliasing, true).is_ok(), "{aliasing}");
        }
    }
}
