//! What the plain semaphore's handle and its permits share, and the helpers both semaphores
//! use (wake-up mode, unexpected replies).

use std::sync::Arc;

use keylatch_core::Error;
use keylatch_redis::{Client, WakeMode};

use crate::request::Requests;

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) name: Arc<str>,
    pub(crate) channel: Arc<str>,
    pub(crate) requests: Requests,
}

/// How a waiter for `permits` permits is woken. Each message carries the count now available,
/// so waiters for one permit are woken as many as the count allows (a release of one permit
/// wakes one waiter, not all of them; the others keep sleeping instead of running their acquire
/// script for nothing). A counted wake-up that reached a waiter for several permits could be
/// wasted on it while a waiter for one sleeps on, so such a waiter asks for every message to
/// wake everyone, as long as it waits.
pub(crate) fn wake_mode(permits: u32) -> WakeMode {
    if permits == 1 {
        WakeMode::Counted
    } else {
        WakeMode::All
    }
}

/// A reply keylatch does not understand.
pub(crate) fn unexpected(what: &'static str) -> Error {
    Error::UnexpectedReply { what }
}
