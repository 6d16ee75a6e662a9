//! Lock names to znode paths: a name starting with `/` is the path itself, any other name
//! goes under the client's base path; both are checked against ZooKeeper's path rules.
//!
//! May import: keylatch-core only.

use keylatch_core::names::validate_name_length;
use keylatch_core::{Error, Result};

/// Checks a znode path: absolute, no empty, `.` or `..` segment, no trailing `/`, no control
/// characters, not under ZooKeeper's own `/zookeeper`.
///
/// # Errors
/// [`Error::InvalidName`].
pub(crate) fn check_path(path: &str) -> Result<()> {
    let invalid = |reason| Err(Error::InvalidName { reason });
    if !path.starts_with('/') {
        return invalid("a znode path must start with /");
    }
    if path == "/" {
        return invalid("the root znode cannot be a lock");
    }
    for segment in path[1..].split('/') {
        match segment {
            "" => return invalid("a znode path has an empty segment (// or a trailing /)"),
            "." | ".." => return invalid("a znode path has a . or .. segment"),
            _ => {}
        }
    }
    if path.chars().any(|c| {
        c.is_control()
            || ('\u{e000}'..='\u{f8ff}').contains(&c)
            || ('\u{fff0}'..='\u{ffff}').contains(&c)
    }) {
        return invalid("a znode path has a character ZooKeeper refuses");
    }
    if path == "/zookeeper" || path.starts_with("/zookeeper/") {
        return invalid("/zookeeper is reserved by ZooKeeper");
    }
    Ok(())
}

/// The znode path of the lock `name` under `base` (itself a checked path).
///
/// # Errors
/// [`Error::InvalidName`].
pub(crate) fn lock_path(base: &str, name: &str) -> Result<String> {
    validate_name_length(name)?;
    let path = if name.starts_with('/') {
        name.to_owned()
    } else {
        format!("{base}/{name}")
    };
    check_path(&path)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_checked_paths() {
        assert_eq!(
            lock_path("/keylatch", "orders").unwrap(),
            "/keylatch/orders"
        );
        assert_eq!(lock_path("/keylatch", "a/b").unwrap(), "/keylatch/a/b");
        assert_eq!(lock_path("/keylatch", "/x/y").unwrap(), "/x/y");
        for bad in [
            "",
            "/",
            "a//b",
            "a/",
            "/a/../b",
            "./a",
            "a\0b",
            "/zookeeper/q",
            "\u{1}",
        ] {
            assert!(
                matches!(lock_path("/keylatch", bad), Err(Error::InvalidName { .. })),
                "{bad:?}"
            );
        }
        assert!(lock_path("/keylatch", &"x".repeat(2000)).is_err());
    }
}
