//! How read and write holds are released and their leases changed (the [`HoldRelease`] and
//! [`HoldExtend`] of their guards).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keylatch_core::hold::{Extension, HoldExtend};
use keylatch_core::{Error, HoldRelease, OwnerId, Renewal, Result, lease_millis, validate_lease};
use keylatch_redis::Client;
use keylatch_redis::redis::Value;

use crate::scripts::{
    READ_EXTEND, READ_RELEASE, READ_RENEW, WRITE_EXTEND, WRITE_RELEASE, WRITE_RENEW,
};

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

#[async_trait]
impl HoldExtend for Release {
    /// One script call: a write hold's lease is the hash's expiry (never set below the same
    /// owner's own read holds); a read hold's is its per-hold keys', and the hash's expiry
    /// follows the longest read hold of any reader (in write mode it is only lengthened).
    async fn extend(&self, owner: OwnerId, how: Extension) -> Result<Option<Duration>> {
        validate_lease(how.duration())?;
        let by = if matches!(how, Extension::By(_)) {
            "1"
        } else {
            "0"
        };
        let call = match self.side {
            Side::Read => READ_EXTEND
                .call()
                .key(&*self.name)
                .arg(lease_millis(how.duration()))
                .arg(owner.to_string())
                .arg(by),
            Side::Write => WRITE_EXTEND
                .call()
                .key(&*self.name)
                .arg(lease_millis(how.duration()))
                .arg(owner.to_string())
                .arg(write_field(owner))
                .arg(by),
        };
        match self.client.eval::<i64>(&call).await? {
            -1 => Ok(None),
            -2 => Err(Error::NoTtl {
                key: self.name.to_string(),
            }),
            left => Ok(Some(Duration::from_millis(
                u64::try_from(left).unwrap_or(0),
            ))),
        }
    }

    fn watchdog_renewal(&self) -> Option<(Renewal, Duration)> {
        let renewal = match self.side {
            Side::Read => READ_RENEW.renewal(),
            Side::Write => WRITE_RENEW.renewal(),
        };
        Some((renewal, self.client.config().watchdog_timeout))
    }
}
