//! The command path on a Redis Cluster: a call (or a few commands) routed to the primary of
//! its key's slot, following redirections, and batches grouped per node (see `cluster.rs`).
//!
//! May import: the parent `commands` module, `cluster`, `script`, `keylatch-core`.

use std::sync::atomic::Ordering;

use deadpool_redis::redis::{self, Value};

use super::Commands;
use crate::connection::cluster;
use crate::connection::script::{LuaScript, ScriptCall};
use keylatch_core::{Error, Result};

/// The cluster path.
impl Commands {
    /// Runs `cmds` on the primary of `key`'s slot, following redirections (see
    /// [`cluster::run`]); each command's reply.
    pub(super) async fn cluster_run(
        &self,
        index: usize,
        key: &str,
        cmds: &[redis::Cmd],
        script: Option<&'static LuaScript>,
    ) -> Result<Vec<Value>> {
        let (generation, mut conn) = self.connection(index).await?;
        let Some(cluster) = conn.as_cluster() else {
            return Err(Error::Closed);
        };
        let redirections = &self.redirections;
        let topology = &self.topology;
        let on_redirect = || {
            redirections.fetch_add(1, Ordering::Relaxed);
            topology.set_slot_map(None);
        };
        let outcome = cluster::run(
            cluster,
            key,
            cmds,
            script.map(|s| (s, self.sharded)),
            self.response_timeout,
            &on_redirect,
        )
        .await;
        outcome.map_err(|e| self.map_error(e, key, index, generation))
    }

    /// One script call on a cluster.
    pub(super) async fn cluster_eval(&self, call: &ScriptCall) -> Result<Value> {
        let key = call.first_key();
        let index = self.pick(key);
        let mut replies = self
            .cluster_run(
                index,
                key,
                &[call.evalsha_cmd(self.sharded)],
                Some(call.script()),
            )
            .await?;
        replies
            .pop()
            .ok_or(Error::UnexpectedReply {
                what: call.script().name(),
            })?
            .extract_error()
            .map_err(|e| crate::error::from_redis_key(e, key))
    }

    /// Idempotent calls on a cluster: one pipeline per primary (see [`cluster::run_batch`]).
    pub(super) async fn cluster_batch(&self, calls: &[ScriptCall]) -> Result<Vec<Result<Value>>> {
        let index = self.pick("");
        let (generation, mut conn) = self.connection(index).await?;
        let Some(cluster) = conn.as_cluster() else {
            return Err(Error::Closed);
        };
        let map = match self.topology.slot_map() {
            Some(map) => map,
            None => {
                keylatch_core::telemetry::round_trip();
                let map = cluster::slot_map(cluster)
                    .await
                    .map_err(|e| self.map_error(e, "", index, generation))?;
                self.topology.set_slot_map(Some(map.clone()));
                map
            }
        };
        let calls: Vec<(String, redis::Cmd, &'static LuaScript)> = calls
            .iter()
            .map(|call| {
                (
                    call.first_key().to_owned(),
                    call.evalsha_cmd(self.sharded),
                    call.script(),
                )
            })
            .collect();
        let redirections = &self.redirections;
        let topology = &self.topology;
        let on_redirect = || {
            redirections.fetch_add(1, Ordering::Relaxed);
            topology.set_slot_map(None);
        };
        let replies = cluster::run_batch(
            cluster,
            &map,
            &calls,
            self.sharded,
            self.response_timeout,
            &on_redirect,
            &self.batch_pipelines,
        )
        .await;
        let lost_node = replies.iter().any(|r| {
            r.as_ref()
                .is_err_and(|e| e.is_io_error() || e.is_connection_dropped())
        });
        if lost_node {
            // A node is unreachable (killed, failing over): the map is read again.
            topology.set_slot_map(None);
        }
        if topology.slot_map().is_none() && replies.iter().any(Result::is_ok) {
            // Redirected (a failover, a slot that moved): the map is read again now, so the
            // slots that moved are recorded before the replies are told (a hold a promoted
            // replica never had is lost as `PrimaryChanged`). Only after a redirection.
            keylatch_core::telemetry::round_trip();
            if let Ok(map) = cluster::slot_map(cluster).await {
                topology.set_slot_map(Some(map));
            }
        }
        Ok(replies
            .into_iter()
            .zip(&calls)
            .map(|(reply, (key, _, _))| {
                reply.map_err(|e| self.map_error(e, key, index, generation))
            })
            .collect())
    }

    /// On a cluster, the hash slot of `key` (calls that share one may be batched); `None`
    /// elsewhere.
    pub(crate) fn slot_of(&self, key: &str) -> Option<u16> {
        self.topology
            .is_cluster()
            .then(|| cluster::slot(key.as_bytes()))
    }

    /// How many primaries the last slot map named (0 before one was read).
    pub(crate) fn cluster_nodes(&self) -> usize {
        self.topology.slot_map().map_or(0, |map| map.nodes().len())
    }
}
