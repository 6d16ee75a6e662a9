//! What the read lock, the write lock and the `RwLock` handle share: the client, the key names
//! and the plain queries.

use std::sync::Arc;
use std::time::Duration;

use keylatch_core::{Owner, Result, UndoGuard};
use keylatch_redis::redis::{self, Value};
use keylatch_redis::{Client, ScriptCall, prefixed, suffixed};

use crate::release::{Release, Side};
use crate::scripts::FORCE_UNLOCK;

/// One read-write lock name and everything derived from it.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) client: Client,
    /// The hash `name`.
    pub(crate) name: Arc<str>,
    /// `redisson_rwlock:{name}`.
    pub(crate) channel: Arc<str>,
    /// `{name}:write_intent`: waiting writers → deadline (server time, ms).
    pub(crate) intent_key: Arc<str>,
    /// `redisson_lock_token:{name}`: the write side's fencing counter.
    pub(crate) token_key: Arc<str>,
    pub(crate) read_release: Arc<Release>,
    pub(crate) write_release: Arc<Release>,
}

impl Shared {
    pub(crate) fn new(client: &Client, name: &str) -> Arc<Shared> {
        let name: Arc<str> = Arc::from(name);
        let channel: Arc<str> = prefixed("redisson_rwlock", &name).into();
        Arc::new(Shared {
            client: client.clone(),
            intent_key: suffixed(&name, "write_intent").into(),
            token_key: prefixed("redisson_lock_token", &name).into(),
            read_release: Arc::new(Release {
                side: Side::Read,
                client: client.clone(),
                name: name.clone(),
                channel: channel.clone(),
            }),
            write_release: Arc::new(Release {
                side: Side::Write,
                client: client.clone(),
                name: name.clone(),
                channel: channel.clone(),
            }),
            name,
            channel,
        })
    }

    /// The owner id `owner` resolves to now, as a hash field.
    pub(crate) fn field(&self, owner: Owner) -> String {
        self.client.owner_id(owner).to_string()
    }

    /// Sends an acquire whose effect `undo` reverts if its outcome is unknown.
    pub(crate) async fn send(&self, call: &ScriptCall, undo: UndoGuard) -> Result<Value> {
        match self.client.eval_value(call).await {
            Ok(reply) => {
                undo.disarm();
                Ok(reply)
            }
            Err(err) if err.is_ambiguous() => {
                // If the undo fails too it goes on in the background, and the next attempt
                // waits for it (`settled`), so a retry never races it.
                let _ = undo.run_now().await;
                Err(err)
            }
            Err(err) => {
                undo.disarm();
                Err(err)
            }
        }
    }

    /// The lock's `mode` field: `read`, `write`, or `None` when free.
    pub(crate) async fn mode(&self) -> Result<Option<String>> {
        self.client.validate_name(&self.name)?;
        self.client
            .query(redis::cmd("HGET").arg(&*self.name).arg("mode"), &self.name)
            .await
    }

    /// The count in hash field `field` (0 when absent).
    pub(crate) async fn count(&self, field: &str) -> Result<u64> {
        self.client.validate_name(&self.name)?;
        let count: Option<u64> = self
            .client
            .query(redis::cmd("HGET").arg(&*self.name).arg(field), &self.name)
            .await?;
        Ok(count.unwrap_or(0))
    }

    /// The hash's PTTL.
    pub(crate) async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.client.validate_name(&self.name)?;
        self.client.remaining_ttl(&self.name).await
    }

    /// Releases every hold in `which` mode (`read`, `write` or `any`).
    pub(crate) async fn force_unlock(&self, which: &str) -> Result<bool> {
        self.client.validate_name(&self.name)?;
        let call = FORCE_UNLOCK
            .call()
            .key(&*self.name)
            .key(&*self.channel)
            .arg(which);
        let released: i64 = self.client.eval(&call).await?;
        Ok(released == 1)
    }
}
