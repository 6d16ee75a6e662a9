//! The fair (FIFO) distributed lock of keylatch. (Being built.)
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

use keylatch_core::{Client, LuaScript};

/// Every script of this crate, for [`Client::preload`].
pub static SCRIPTS: &[&LuaScript] = &[];

/// A fair lock. (Being built.)
#[derive(Clone, Debug)]
pub struct FairLock {
    _client: Client,
    _name: String,
}

impl FairLock {
    /// A handle on the fair lock `name`.
    pub fn new(client: &Client, name: &str) -> FairLock {
        FairLock {
            _client: client.clone(),
            _name: name.to_owned(),
        }
    }
}
