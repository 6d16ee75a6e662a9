//! Replica acknowledgement of acquisitions ([`Config::replicas`](crate::Config::replicas),
//! [`replicas_mode`](crate::Config::replicas_mode), [`replicas_aof`](crate::Config::replicas_aof)):
//! the acquire script and `WAIT` (or `WAITAOF`) in one pipeline on one connection, so the wait
//! covers exactly that write; what the server behind a connection offers (`WAITAOF`, AOF on,
//! connected replicas), asked once per connection (per hash slot on a cluster) and kept fresh
//! by an `INFO` sent after the wait; and the verdict, [`Error::NotReplicated`], which the
//! caller undoes as it does a lost reply.
//!
//! May import: the parent `commands` module, `config`, `cluster`, `script`, `keylatch-core`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use deadpool_redis::redis::{self, Value};

use super::{Commands, is_noscript};
use crate::connection::cluster;
use crate::connection::config::{Acknowledge, ReplicaMode};
use crate::connection::script::ScriptCall;
use keylatch_core::{Error, Result};

/// What the server behind a connection offers for acknowledgement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ServerFacts {
    /// `WAITAOF` exists (Redis and Valkey 7.2 and later).
    pub(crate) waitaof: bool,
    /// The server runs with `appendonly yes` (`aof_enabled:1`).
    pub(crate) aof: bool,
    /// The replicas it reports connected (`connected_slaves`).
    pub(crate) replicas: u32,
}

impl ServerFacts {
    /// Reads `aof_enabled` and `connected_slaves` from an `INFO` reply, keeping `waitaof`.
    fn update(&mut self, info: &str) {
        for line in info.lines() {
            if let Some(n) = line.trim().strip_prefix("connected_slaves:") {
                self.replicas = n.parse().unwrap_or(0);
            } else if let Some(on) = line.trim().strip_prefix("aof_enabled:") {
                self.aof = on == "1";
            }
        }
    }
}

/// Where facts were read: a command connection (its slot and generation), or on a cluster
/// the hash slot of the keys (whose primary answers).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Source {
    Connection(usize, u64),
    Slot(u16),
}

/// The acknowledgement settings and what each connection's server offers.
pub(crate) struct Acknowledger {
    settings: Acknowledge,
    facts: Mutex<HashMap<Source, ServerFacts>>,
}

/// What one acquisition waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Replicas waited for.
    pub(crate) replicas: u32,
    /// `WAITAOF 1 replicas`: the primary's own append-only file too.
    pub(crate) aof: bool,
    /// Every replica must acknowledge ([`ReplicaMode::Count`]); else one is enough.
    pub(crate) every: bool,
}

impl Plan {
    /// The plan for `settings` on a server with `facts` (`None`: not needed, with
    /// [`ReplicaMode::Count`] and no AOF).
    pub(crate) fn new(settings: Acknowledge, facts: Option<ServerFacts>) -> Plan {
        let facts = facts.unwrap_or_default();
        let every = settings.mode == ReplicaMode::Count;
        Plan {
            replicas: if every {
                settings.replicas
            } else {
                facts.replicas
            },
            aof: settings.aof && facts.waitaof && facts.aof,
            every,
        }
    }

    /// `WAIT replicas timeout` or `WAITAOF 1 replicas timeout`.
    fn command(&self, settings: Acknowledge) -> redis::Cmd {
        let millis = u64::try_from(settings.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut cmd = if self.aof {
            let mut cmd = redis::cmd("WAITAOF");
            cmd.arg(1);
            cmd
        } else {
            redis::cmd("WAIT")
        };
        cmd.arg(self.replicas).arg(millis);
        cmd
    }

    /// `Ok` when the reply of the wait meets the plan, else the counts for
    /// [`Error::NotReplicated`]: acknowledged and wanted (both counting the primary's own
    /// file with `WAITAOF`).
    pub(crate) fn verdict(&self, reply: &Value) -> std::result::Result<(), (u32, u32)> {
        let count = |v: &Value| match v {
            Value::Int(n) => u32::try_from(*n).unwrap_or(0),
            _ => 0,
        };
        let (local, acked) = match (self.aof, reply) {
            (true, Value::Array(counts)) if counts.len() == 2 => {
                (count(&counts[0]), count(&counts[1]))
            }
            (false, Value::Int(_)) => (1, count(reply)),
            _ => (0, 0),
        };
        let replicas_met = if self.every {
            acked >= self.replicas
        } else {
            self.replicas == 0 || acked > 0
        };
        if replicas_met && local >= 1 {
            return Ok(());
        }
        let extra = u32::from(self.aof);
        Err((acked + local.min(1) * extra, self.replicas + extra))
    }
}

impl Acknowledger {
    pub(crate) fn new(settings: Acknowledge) -> Acknowledger {
        Acknowledger {
            settings,
            facts: Mutex::default(),
        }
    }

    /// Whether a plan needs to know the server ([`ReplicaMode::AllConnected`] or AOF).
    fn needs_facts(&self) -> bool {
        self.settings.mode == ReplicaMode::AllConnected || self.settings.aof
    }

    fn known(&self, source: Source) -> Option<ServerFacts> {
        self.facts.lock().expect("facts lock").get(&source).copied()
    }

    fn remember(&self, source: Source, facts: ServerFacts) {
        let mut known = self.facts.lock().expect("facts lock");
        if let Source::Connection(index, _) = source {
            // A slot's earlier connections are gone.
            known.retain(|s, _| !matches!(s, Source::Connection(i, _) if *i == index));
        }
        if self.settings.aof && !(facts.waitaof && facts.aof) && !known.contains_key(&source) {
            tracing::warn!(target: "keylatch::connection",
                waitaof = facts.waitaof,
                appendonly = facts.aof,
                "replicas_aof: this server lacks WAITAOF or runs without appendonly; \
                 acquisitions wait with WAIT instead"
            );
        }
        known.insert(source, facts);
    }

    /// Folds the `INFO` sent after an acknowledged acquisition into what is known.
    fn refresh(&self, source: Source, info: Option<&Value>) {
        let Some(Value::BulkString(bytes)) = info else {
            return;
        };
        let mut known = self.facts.lock().expect("facts lock");
        if let Some(facts) = known.get_mut(&source) {
            facts.update(&String::from_utf8_lossy(bytes));
        }
    }
}

/// The probe of what a server offers: `COMMAND INFO WAITAOF` (`[nil]` where it does not
/// exist) and `INFO replication persistence`.
fn probe() -> [redis::Cmd; 2] {
    let mut command = redis::cmd("COMMAND");
    command.arg("INFO").arg("WAITAOF");
    [info(), command]
}

fn info() -> redis::Cmd {
    let mut info = redis::cmd("INFO");
    info.arg("replication").arg("persistence");
    info
}

/// [`ServerFacts`] from the replies of [`probe`].
fn facts_from(replies: &[Value]) -> ServerFacts {
    let mut facts = ServerFacts {
        waitaof: matches!(replies.get(1), Some(Value::Array(a)) if a.first().is_some_and(|c| !matches!(c, Value::Nil))),
        ..ServerFacts::default()
    };
    if let Some(Value::BulkString(bytes)) = replies.first() {
        facts.update(&String::from_utf8_lossy(bytes));
    }
    facts
}

impl Commands {
    /// An acquisition with replica acknowledgement: `EVALSHA` and `WAIT`/`WAITAOF` in one
    /// pipeline on one connection (so the wait covers the script's writes), followed by `INFO`
    /// when the plan depends on the server; on NOSCRIPT `SCRIPT LOAD` + the same again. A
    /// wait that falls short is [`Error::NotReplicated`], which the caller undoes as it does a
    /// lost reply.
    pub(super) async fn eval_acknowledged(
        &self,
        call: &ScriptCall,
        ack: &Acknowledger,
    ) -> Result<Value> {
        let key = call.first_key();
        let index = self.pick(key);
        let settings = ack.settings;
        if self.topology.is_cluster() {
            let source = Source::Slot(cluster::slot(key.as_bytes()));
            let facts = self.cluster_facts(ack, index, key, source).await?;
            let plan = Plan::new(settings, facts);
            let mut cmds = vec![call.evalsha_cmd(self.sharded), plan.command(settings)];
            if facts.is_some() {
                cmds.push(info());
            }
            let replies = self
                .cluster_run(index, key, &cmds, Some(call.script()))
                .await?;
            ack.refresh(source, replies.get(2));
            let mut replies = replies.into_iter();
            let (Some(reply), Some(waited)) = (replies.next(), replies.next()) else {
                return Err(Error::UnexpectedReply { what: "WAIT" });
            };
            let reply = reply
                .extract_error()
                .map_err(|e| crate::error::from_redis_key(e, key))?;
            return judge(key, reply, waited.extract_error(), plan, settings);
        }
        let (generation, mut conn) = self.connection(index).await?;
        let source = Source::Connection(index, generation);
        let mut facts = None;
        if ack.needs_facts() {
            facts = ack.known(source);
            if facts.is_none() {
                keylatch_core::telemetry::round_trip();
                let mut pipe = redis::pipe();
                pipe.ignore_errors();
                for cmd in probe() {
                    pipe.add_command(cmd);
                }
                let replies: Vec<Value> = pipe
                    .query_async::<Vec<redis::RedisResult<Value>>>(&mut conn)
                    .await
                    .map_err(|e| self.map_error(e, key, index, generation))?
                    .into_iter()
                    .map(|r| r.unwrap_or(Value::Nil))
                    .collect();
                let found = facts_from(&replies);
                ack.remember(source, found);
                facts = Some(found);
            }
        }
        let plan = Plan::new(settings, facts);
        let mut replies = Vec::new();
        for reload in [false, true] {
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            if reload {
                self.script_reloads.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(target: "keylatch::connection", script = call.script().name(), "NOSCRIPT: script reloaded");
                keylatch_core::telemetry::round_trip();
                pipe.add_command(call.script().load_cmd(false));
            }
            pipe.add_command(call.evalsha_cmd(false))
                .add_command(plan.command(settings));
            if facts.is_some() {
                pipe.add_command(info());
            }
            replies = pipe
                .query_async::<Vec<redis::RedisResult<Value>>>(&mut conn)
                .await
                .map_err(|e| self.map_error(e, key, index, generation))?;
            if reload && !replies.is_empty() {
                drop(replies.remove(0));
            }
            if !replies
                .first()
                .is_some_and(|r| r.as_ref().is_err_and(is_noscript))
            {
                break;
            }
        }
        ack.refresh(source, replies.get(2).and_then(|r| r.as_ref().ok()));
        let mut replies = replies.into_iter();
        let (Some(reply), Some(waited)) = (replies.next(), replies.next()) else {
            return Err(Error::UnexpectedReply { what: "WAIT" });
        };
        let reply = reply.map_err(|e| self.map_error(e, key, index, generation))?;
        judge(key, reply, waited, plan, settings)
    }

    /// On a cluster: what the primary of `key`'s slot offers, asked once per slot; `None`
    /// when the plan does not depend on it.
    async fn cluster_facts(
        &self,
        ack: &Acknowledger,
        index: usize,
        key: &str,
        source: Source,
    ) -> Result<Option<ServerFacts>> {
        if !ack.needs_facts() {
            return Ok(None);
        }
        if let Some(facts) = ack.known(source) {
            return Ok(Some(facts));
        }
        let replies = self.cluster_run(index, key, &probe(), None).await?;
        let found = facts_from(&replies);
        ack.remember(source, found);
        Ok(Some(found))
    }
}

/// The reply of an acknowledged acquisition, or [`Error::NotReplicated`]. A wait refused by
/// the server (an ACL without `+wait`, `WAITAOF` on a server whose AOF was just turned off)
/// counts as no acknowledgement, so that the acquisition is undone; the reason is logged.
fn judge(
    key: &str,
    reply: Value,
    waited: redis::RedisResult<Value>,
    plan: Plan,
    settings: Acknowledge,
) -> Result<Value> {
    let waited = waited.unwrap_or_else(|err| {
        tracing::warn!(target: "keylatch::connection", key, error = %err, "the replica wait was refused");
        Value::Nil
    });
    match plan.verdict(&waited) {
        Ok(()) => Ok(reply),
        Err((acknowledged, wanted)) => {
            tracing::warn!(target: "keylatch::connection",
                key,
                acknowledged,
                wanted,
                aof = plan.aof,
                "too few replicas acknowledged an acquisition; undoing it"
            );
            Err(Error::NotReplicated {
                acknowledged,
                wanted,
                timeout: settings.timeout,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn settings(replicas: u32, mode: ReplicaMode, aof: bool) -> Acknowledge {
        Acknowledge {
            replicas,
            mode,
            aof,
            timeout: Duration::from_millis(100),
        }
    }

    #[test]
    fn plans_follow_the_mode_and_the_server() {
        let facts = ServerFacts {
            waitaof: true,
            aof: true,
            replicas: 2,
        };
        let count = Plan::new(settings(1, ReplicaMode::Count, false), Some(facts));
        assert_eq!((count.replicas, count.aof, count.every), (1, false, true));
        let all = Plan::new(settings(0, ReplicaMode::AllConnected, true), Some(facts));
        assert_eq!((all.replicas, all.aof, all.every), (2, true, false));
        // No WAITAOF (Redis 7.0), or AOF off: WAIT.
        for facts in [
            ServerFacts {
                waitaof: false,
                ..facts
            },
            ServerFacts {
                aof: false,
                ..facts
            },
        ] {
            assert!(!Plan::new(settings(1, ReplicaMode::Count, true), Some(facts)).aof);
        }
    }

    #[test]
    fn verdicts() {
        let count = Plan {
            replicas: 2,
            aof: false,
            every: true,
        };
        assert_eq!(count.verdict(&Value::Int(2)), Ok(()));
        assert_eq!(count.verdict(&Value::Int(1)), Err((1, 2)));
        assert_eq!(count.verdict(&Value::Nil), Err((0, 2)));
        let all = Plan {
            every: false,
            ..count
        };
        assert_eq!(all.verdict(&Value::Int(1)), Ok(()));
        assert_eq!(all.verdict(&Value::Int(0)), Err((0, 2)));
        let none = Plan { replicas: 0, ..all };
        assert_eq!(none.verdict(&Value::Int(0)), Ok(()));
        let aof = Plan { aof: true, ..count };
        let counts = |l, r| Value::Array(vec![Value::Int(l), Value::Int(r)]);
        assert_eq!(aof.verdict(&counts(1, 2)), Ok(()));
        assert_eq!(aof.verdict(&counts(0, 2)), Err((2, 3)));
        assert_eq!(aof.verdict(&counts(1, 1)), Err((2, 3)));
        assert_eq!(aof.verdict(&Value::Int(2)), Err((0, 3)));
    }

    #[test]
    fn facts_are_read_from_info() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n# Persistence\r\naof_enabled:1\r\n";
        let replies = [
            Value::BulkString(info.as_bytes().to_vec()),
            Value::Array(vec![Value::Array(vec![])]),
        ];
        assert_eq!(
            facts_from(&replies),
            ServerFacts {
                waitaof: true,
                aof: true,
                replicas: 2
            }
        );
        let old = [
            Value::BulkString(b"connected_slaves:0\r\naof_enabled:0".to_vec()),
            Value::Array(vec![Value::Nil]),
        ];
        assert_eq!(facts_from(&old), ServerFacts::default());
    }
}
