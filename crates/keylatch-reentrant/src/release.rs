//! How a reentrant hold is released.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::hold::{Extension, HoldExtend};
use keylatch_core::{Error, HoldRelease, OwnerId, Renewal, Result, lease_millis, validate_lease};
use keylatch_redis::redis::Value;
use keylatch_redis::{Client, RENEW_HASH_HOLDS};

use crate::scripts::{EXTEND, RELEASE, RELEASE_IF_COUNT};

/// Releases holds of one lock name.
#[derive(Debug)]
pub(crate) struct ReentrantRelease {
    pub(crate) client: Client,
    pub(crate) name: Arc<str>,
    /// The derived names, made once per handle (`String`s, not `Arc<str>`s: no copy).
    pub(crate) channel: String,
    pub(crate) token_key: String,
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
        validate_lease(how.duration())?;
        let call = EXTEND
            .call()
            .key(&*self.name)
            .arg(lease_millis(how.duration()))
            .arg(owner.wire_form().as_str())
            .arg(if matches!(how, Extension::By(_)) {
                "1"
            } else {
                "0"
            });
        match self.client.eval::<i64>(&call).await? {
            -1 => Ok(None),
            -2 => Err(Error::NoTtl {
                key: self.name.to_string(),
            }),
            left => {
                let left = Duration::from_millis(u64::try_from(left).unwrap_or(0));
                // A sum past the longest lease a hold may have is refused before it is sent;
                // this only guards a reply out of range.
                Ok(Some(left))
            }
        }
    }

    fn watchdog_renewal(&self) -> Option<(Renewal, Duration)> {
        Some((
            RENEW_HASH_HOLDS.renewal(),
            self.client.config().watchdog_timeout,
        ))
    }
}
