//! How a reentrant hold is released.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::hold::{Extension, HoldExtend};
use keylatch_core::{Error, HoldRelease, OwnerId, Renewal, Result};
use keylatch_redis::Client;
use keylatch_redis::redis::Value;

use crate::scripts::{RELEASE, RELEASE_IF_COUNT};

/// Releases holds of one lock name.
#[derive(Debug)]
pub(crate) struct ReentrantRelease {
    pub(crate) client: Client,
    pub(crate) name: Arc<str>,
    /// The derived names, made once per handle (`String`s, not `Arc<str>`s: no copy).
    pub(crate) channel: String,
    pub(crate) token_key: String,
    /// `keylatch_meta:{name}`: the holder metadata, deleted with the lock.
    pub(crate) meta_key: String,
    /// The message a full release publishes: `UNLOCK_MESSAGE`, or `""` (the spin lock,
    /// which publishes nothing).
    pub(crate) message: &'static str,
}

impl ReentrantRelease {
    fn call(&self, owner: OwnerId) -> keylatch_redis::ScriptCall {
        RELEASE
            .call()
            .key(&*self.name)
            .key(&*self.channel)
            .key(&*self.meta_key)
            .arg(self.message)
            .arg(owner.wire_form().as_str())
    }

    fn released(&self, reply: Value) -> Result<()> {
        match reply {
            Value::Nil => Err(Error::NotHeld {
                name: self.name.to_string(),
            }),
            Value::Int(0 | 1) => Ok(()),
            _ => Err(Error::UnexpectedReply {
                what: "reentrant_release",
            }),
        }
    }
}

#[async_trait]
impl HoldRelease for ReentrantRelease {
    async fn release(&self, owner: OwnerId) -> Result<()> {
        let reply = self.client.eval_value(&self.call(owner)).await?;
        self.released(reply)
    }

    async fn release_last(&self, owner: OwnerId) -> Result<()> {
        let reply = self.client.eval_coalesced(self.call(owner)).await?;
        self.released(reply)
    }

    async fn release_if_count(&self, owner: OwnerId, expected: u64) -> Result<()> {
        let call = RELEASE_IF_COUNT
            .call()
            .key(&*self.name)
            .key(&*self.channel)
            .key(&*self.meta_key)
            .arg(self.message)
            .arg(owner.wire_form().as_str())
            .arg(expected);
        let _released: i64 = self.client.eval(&call).await?;
        Ok(())
    }
}

#[async_trait]
impl HoldExtend for ReentrantRelease {
    async fn extend(&self, owner: OwnerId, how: Extension) -> Result<Option<Duration>> {
        keylatch_redis::extend_hash_hold(&self.client, &self.name, owner, how).await
    }

    fn watchdog_renewal(&self) -> Option<(Renewal, Duration)> {
        Some((
            keylatch_redis::hash_hold_renewal(&self.client),
            self.client.config().watchdog_timeout,
        ))
    }
}
