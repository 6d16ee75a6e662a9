//! The multi-value lock's scripts and how its holds are released (all values of an owner at
//! once). Imports `keylatch-core` and `keylatch-redis` only.

use std::sync::Arc;

use async_trait::async_trait;
use keylatch_core::{Error, HoldRelease, OwnerId, Result};
use keylatch_redis::redis::Value;
use keylatch_redis::{Client, LuaScript, ScriptCall};

pub(crate) static MV_ACQUIRE: LuaScript = LuaScript::taking(
    "multi_value_acquire",
    include_str!("lua/multi_value_acquire.lua"),
);
pub(crate) static MV_RELEASE: LuaScript = LuaScript::freeing(
    "multi_value_release",
    include_str!("lua/multi_value_release.lua"),
);
pub(crate) static MV_FORCE_UNLOCK: LuaScript = LuaScript::freeing(
    "multi_value_force_unlock",
    include_str!("lua/multi_value_force_unlock.lua"),
);
pub(crate) static MV_IS_LOCKED: LuaScript = LuaScript::freeing(
    "multi_value_is_locked",
    include_str!("lua/multi_value_is_locked.lua"),
);
/// The watchdog's renewal of multi-value holds: every value's `expire_time` field of the
/// owner, and the group key's expiry.
pub(crate) static MV_RENEW: LuaScript = LuaScript::freeing(
    "multi_value_renew",
    include_str!("lua/multi_value_renew.lua"),
);

/// Every script of the multi-value lock, for
/// [`Client::preload`](keylatch_redis::Client::preload).
pub static MULTI_VALUE_SCRIPTS: [&LuaScript; 5] = [
    &MV_ACQUIRE,
    &MV_RELEASE,
    &MV_FORCE_UNLOCK,
    &MV_IS_LOCKED,
    &MV_RENEW,
];

/// Releases the holds of one value set of one group.
#[derive(Debug)]
pub(crate) struct MultiValueRelease {
    pub(crate) client: Client,
    pub(crate) group: Arc<str>,
    pub(crate) channel: String,
    pub(crate) fields: Arc<[String]>,
}

impl MultiValueRelease {
    /// The release call; `expected` is the hold count an undo requires (`None`: any).
    pub(crate) fn call(&self, owner: OwnerId, expected: Option<u64>) -> ScriptCall {
        let mut call = MV_RELEASE
            .call()
            .key(&*self.group)
            .key(&*self.channel)
            .arg(crate::scripts::UNLOCK_MESSAGE)
            .arg(owner.wire_form().as_str())
            .arg(expected.map(|count| count.to_string()).unwrap_or_default());
        for field in self.fields.iter() {
            call = call.arg(field.as_str());
        }
        call
    }
}

#[async_trait]
impl HoldRelease for MultiValueRelease {
    async fn release(&self, owner: OwnerId) -> Result<()> {
        match self.client.eval_value(&self.call(owner, None)).await? {
            Value::Nil => Err(Error::NotHeld {
                name: self.group.to_string(),
            }),
            Value::Int(0 | 1) => Ok(()),
            _ => Err(Error::UnexpectedReply {
                what: "multi_value_release",
            }),
        }
    }

    async fn release_if_count(&self, owner: OwnerId, expected: u64) -> Result<()> {
        let _ = self
            .client
            .eval_value(&self.call(owner, Some(expected)))
            .await?;
        Ok(())
    }
}
