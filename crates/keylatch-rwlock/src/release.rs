//! How read and write holds are released (the [`HoldRelease`] of their guards).

use std::sync::Arc;

use async_trait::async_trait;
use keylatch_core::{Error, HoldRelease, OwnerId, Result};
use keylatch_redis::Client;
use keylatch_redis::redis::Value;

use crate::scripts::{READ_RELEASE, WRITE_RELEASE};

/// Which side of the lock a hold is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Read,
    Write,
}

/// Releases the holds of one side of one lock name.
#[derive(Debug)]
pub(crate) struct Release {
    pub(crate) side: Side,
    pub(crate) client: Client,
    pub(crate) name: Arc<str>,
    pub(crate) channel: Arc<str>,
}

/// The hash field of an owner's write hold: `<owner id>:write`.
pub(crate) fn write_field(owner: OwnerId) -> String {
    format!("{owner}:write")
}

/// `'any'`, or the count the owner must have for the release to happen.
fn condition(expected: Option<u64>) -> String {
    expected.map_or_else(|| "any".to_owned(), |n| n.to_string())
}

fn settle(reply: Value, name: &str, what: &'static str) -> Result<()> {
    match reply {
        Value::Nil => Err(Error::NotHeld {
            name: name.to_owned(),
        }),
        Value::Int(-1..=1) => Ok(()),
        _ => Err(Error::UnexpectedReply { what }),
    }
}

impl Release {
    async fn run(&self, owner: OwnerId, expected: Option<u64>) -> Result<()> {
        let (script, field, what) = match self.side {
            Side::Read => (&READ_RELEASE, owner.to_string(), "rwlock_read_release"),
            Side::Write => (&WRITE_RELEASE, write_field(owner), "rwlock_write_release"),
        };
        let call = script
            .call()
            .key(&*self.name)
            .key(&*self.channel)
            .arg(field)
            .arg(condition(expected));
        let reply = self.client.eval_value(&call).await?;
        settle(reply, &self.name, what)
    }
}

#[async_trait]
impl HoldRelease for Release {
    async fn release(&self, owner: OwnerId) -> Result<()> {
        self.run(owner, None).await
    }

    async fn release_if_count(&self, owner: OwnerId, expected: u64) -> Result<()> {
        match self.run(owner, Some(expected)).await {
            Err(Error::NotHeld { .. }) => Ok(()),
            other => other,
        }
    }
}
