//! The distributed semaphores of keylatch. (Being built.)
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

use keylatch_core::{Client, LuaScript};

/// Every script of this crate, for [`Client::preload`].
pub static SCRIPTS: &[&LuaScript] = &[];

/// A counting semaphore. (Being built.)
#[derive(Clone, Debug)]
pub struct Semaphore {
    _client: Client,
    _name: String,
}

impl Semaphore {
    /// A handle on the semaphore `name`.
    pub fn new(client: &Client, name: &str) -> Semaphore {
        Semaphore {
            _client: client.clone(),
            _name: name.to_owned(),
        }
    }
}

/// A semaphore whose permits have ids and leases. (Being built.)
#[derive(Clone, Debug)]
pub struct PermitExpirableSemaphore {
    _client: Client,
    _name: String,
}

impl PermitExpirableSemaphore {
    /// A handle on the permit-expirable semaphore `name`.
    pub fn new(client: &Client, name: &str) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore {
            _client: client.clone(),
            _name: name.to_owned(),
        }
    }
}
