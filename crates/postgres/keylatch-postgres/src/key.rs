//! [`AdvisoryKey`]: which PostgreSQL advisory lock a keylatch lock is, and the SQL that takes,
//! tries and releases it.
//!
//! May import: tokio-postgres (nothing of the crate: a leaf).

use std::fmt;

use tokio_postgres::types::ToSql;

/// The advisory lock a keylatch lock takes on the server.
///
/// PostgreSQL has two key spaces for advisory locks: one `bigint`, or two `integer`s (the two
/// do not overlap). A name maps to the `bigint` key the server itself computes with
/// `hashtextextended(name, 0)`, so a `psql` session takes the same lock with
///
/// ```sql
/// SELECT pg_advisory_lock(hashtextextended('invoices', 0));
/// ```
///
/// (`hashtextextended` is PostgreSQL's text hash, available since PostgreSQL 11; under a
/// deterministic collation, the default, it depends only on the text's bytes in the server's
/// encoding, so clients of one database agree on it.) An application that
/// already uses `pg_advisory_lock(a, b)` or `pg_advisory_lock(n)` names that lock exactly
/// with [`Pair`](AdvisoryKey::Pair) or [`Int64`](AdvisoryKey::Int64).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AdvisoryKey {
    /// `hashtextextended(name, 0)`: the key of a lock named by text (the default).
    Hashed(String),
    /// The `bigint` key given directly: `pg_advisory_lock(n)`.
    Int64(i64),
    /// The two `integer` keys given directly: `pg_advisory_lock(a, b)` (in `pg_locks`,
    /// `classid = a`, `objid = b`, `objsubid = 2`).
    Pair(i32, i32),
}

impl AdvisoryKey {
    /// The key's parameters, for the advisory-lock calls and
    /// [`pg_locks_filter`](Self::pg_locks_filter).
    pub fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        match self {
            AdvisoryKey::Hashed(name) => vec![name],
            AdvisoryKey::Int64(n) => vec![n],
            AdvisoryKey::Pair(a, b) => vec![a, b],
        }
    }

    /// `pg_advisory_lock(<key>)` etc.: the call of `function` on this key, its parameters
    /// numbered from `$first`.
    pub(crate) fn call(&self, function: &str, first: usize) -> String {
        match self {
            AdvisoryKey::Hashed(_) => format!("{function}(hashtextextended(${first}::text, 0))"),
            AdvisoryKey::Int64(_) => format!("{function}(${first}::int8)"),
            AdvisoryKey::Pair(..) => format!("{function}(${first}::int4, ${}::int4)", first + 1),
        }
    }

    /// The `pg_locks` condition that selects this key's advisory locks, its parameters numbered
    /// from `$first` (for inspection and tests).
    pub fn pg_locks_filter(&self, first: usize) -> String {
        match self {
            AdvisoryKey::Hashed(_) | AdvisoryKey::Int64(_) => {
                let key = match self {
                    AdvisoryKey::Hashed(_) => format!("hashtextextended(${first}::text, 0)"),
                    _ => format!("${first}::int8"),
                };
                format!(
                    "locktype = 'advisory' AND objsubid = 1 AND \
                     ((classid::int8 << 32) | objid::int8) = {key}"
                )
            }
            AdvisoryKey::Pair(..) => format!(
                "locktype = 'advisory' AND objsubid = 2 AND classid = ${first}::int4::oid \
                 AND objid = ${}::int4::oid",
                first + 1
            ),
        }
    }
}

/// Which advisory lock mode a hold takes: exclusive (a lock, a write side) or shared (a read
/// side: shared holders exclude exclusive ones only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Mode {
    Exclusive,
    Shared,
}

impl Mode {
    /// `pg_advisory_lock` or `pg_advisory_lock_shared`, etc.: `base` in this mode.
    pub(crate) fn function(self, base: &str) -> String {
        match self {
            Mode::Exclusive => base.to_owned(),
            Mode::Shared => format!("{base}_shared"),
        }
    }
}

impl fmt::Display for AdvisoryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdvisoryKey::Hashed(name) => write!(f, "hashtextextended({name:?}, 0)"),
            AdvisoryKey::Int64(n) => write!(f, "{n}"),
            AdvisoryKey::Pair(a, b) => write!(f, "({a}, {b})"),
        }
    }
}
