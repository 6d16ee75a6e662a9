//! What the permit-expirable semaphore's handle and its permits share.

use std::sync::Arc;

use keylatch_redis::Client;

use crate::request::Requests;
use crate::scripts::EXP_RELEASE;

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) name: Arc<str>,
    pub(crate) timeout_key: Arc<str>,
    pub(crate) total_key: Arc<str>,
    pub(crate) channel: Arc<str>,
    pub(crate) requests: Requests,
}

impl Shared {
    /// The release script for `ids`: idempotent.
    pub(crate) fn release_call(&self, ids: &[impl AsRef<str>]) -> keylatch_redis::ScriptCall {
        let mut call = EXP_RELEASE
            .call()
            .key(&*self.name)
            .key(&*self.timeout_key)
            .key(&*self.channel);
        for id in ids {
            call = call.arg(id.as_ref());
        }
        call
    }
}
