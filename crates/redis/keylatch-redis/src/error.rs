//! redis-rs's errors as keylatch's: what each Redis reply or failure means for a lock.

use deadpool_redis::redis::{ErrorKind, RedisError, ServerErrorKind};
use keylatch_core::{Error, Result, StoreError};

/// A redis-rs error as keylatch's [`Error`]: credentials refused, a permission denied, out
/// of memory, a replica's refusal, a timeout, a broken connection, or any other server error
/// (its source, a [`StoreError`], downcasts to `redis::RedisError`).
pub fn from_redis(err: RedisError) -> Error {
    match err.kind() {
        ErrorKind::AuthenticationFailed => Error::Auth(StoreError::new(err)),
        ErrorKind::Server(ServerErrorKind::NoPerm) => Error::NoPermission {
            what: denied(&err),
            source: StoreError::new(err),
        },
        _ if err.code() == Some("NOPERM") => Error::NoPermission {
            what: denied(&err),
            source: StoreError::new(err),
        },
        _ if err.code() == Some("WRONGPASS") || err.code() == Some("NOAUTH") => {
            Error::Auth(StoreError::new(err))
        }
        _ if err.code() == Some("OOM") => Error::OutOfMemory(StoreError::new(err)),
        ErrorKind::Server(ServerErrorKind::ReadOnly) => Error::ReadOnly(StoreError::new(err)),
        _ if err.code() == Some("READONLY") => Error::ReadOnly(StoreError::new(err)),
        _ if err.is_timeout() => Error::Timeout {
            after: std::time::Duration::ZERO,
        },
        _ if err.is_io_error() || err.is_connection_dropped() => {
            Error::Connection(StoreError::new(err))
        }
        _ => Error::Store(StoreError::new(err)),
    }
}

/// As [`from_redis`], naming `key` when the error is about its type (`WRONGTYPE`).
pub fn from_redis_key(err: RedisError, key: &str) -> Error {
    if err.code() == Some("WRONGTYPE") || err.detail().is_some_and(|d| d.contains("WRONGTYPE")) {
        return Error::WrongType {
            key: key.to_owned(),
        };
    }
    from_redis(err)
}

/// A pool's error as keylatch's: the server's own error as [`from_redis`], the pool's as
/// [`Error::Pool`].
pub fn from_pool(err: deadpool_redis::PoolError) -> Error {
    match err {
        deadpool_redis::PoolError::Backend(e) => from_redis(e),
        other => Error::Pool(StoreError::new(other)),
    }
}

/// `?` for redis-rs results in code that returns keylatch's: `conn.get(k).await.store()?`.
pub trait RedisResultExt<T> {
    /// The result with its error converted by [`from_redis`].
    ///
    /// # Errors
    /// The converted error.
    fn store(self) -> Result<T>;
}

impl<T> RedisResultExt<T> for std::result::Result<T, RedisError> {
    fn store(self) -> Result<T> {
        self.map_err(from_redis)
    }
}

/// What a `NOPERM` error denied, from Redis's message ("this user has no permissions to run
/// the 'evalsha' command", "… to access one of the keys used as arguments", "No permissions to
/// access a channel").
fn denied(err: &RedisError) -> String {
    let text = err.to_string();
    if let Some(start) = text.find("to run the '") {
        let rest = &text[start + "to run the '".len()..];
        if let Some(end) = rest.find('\'') {
            return format!("the command '{}'", &rest[..end]);
        }
    }
    let text = text.to_ascii_lowercase();
    if text.contains("access a key") || text.contains("the keys") {
        return "a key".to_owned();
    }
    if text.contains("access a channel") || text.contains("the channels") {
        return "a channel".to_owned();
    }
    "a command, key or channel".to_owned()
}
