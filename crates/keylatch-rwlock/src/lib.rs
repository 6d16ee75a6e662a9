//! The distributed read-write lock of keylatch. (Being built.)
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

use keylatch_core::{Client, LuaScript};

/// Every script of this crate, for [`Client::preload`].
pub static SCRIPTS: &[&LuaScript] = &[];

/// A read-write lock. (Being built.)
#[derive(Clone, Debug)]
pub struct RwLock {
    _client: Client,
    _name: String,
}

impl RwLock {
    /// A handle on the read-write lock `name`.
    pub fn new(client: &Client, name: &str) -> RwLock {
        RwLock {
            _client: client.clone(),
            _name: name.to_owned(),
        }
    }
}
