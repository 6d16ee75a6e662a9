//! Commands on a Redis Cluster: each goes to the node that owns its key's slot, and keylatch
//! follows the cluster's answers itself (redis-rs's automatic retries are off for commands, so
//! that a script never runs twice behind keylatch's back):
//!
//! - `MOVED` (the slot has a new owner; the command did not run): sent again to that node;
//! - `ASK` (the slot is migrating and the key is already on the target): sent to the target
//!   after `ASKING`;
//! - `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`, or no connection to the slot's node (a failover
//!   in progress): sent again after a back-off, within the response timeout;
//! - `NOSCRIPT` (a new node, or a promoted replica that never saw the script): the script is
//!   loaded on that node and the call sent again, in one pipeline.
//!
//! A connection lost after sending is an ambiguous outcome, as on one server.

use std::collections::HashMap;
use std::time::Duration;

use deadpool_redis::redis::{
    self, Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value,
    cluster_async::ClusterConnection,
    cluster_routing::{
        MultipleNodeRoutingInfo, ResponsePolicy, Route, RoutingInfo, SingleNodeRoutingInfo,
        SlotAddr,
    },
};
use tokio::time::Instant;

use crate::connection::script::LuaScript;
pub(crate) use crate::connection::slots::{Node, SlotMap, slot, slot_map};

/// How many redirections (`MOVED`, `ASK`) one call follows before it gives up.
const MAX_REDIRECTIONS: usize = 8;

/// Where a call goes next.
#[derive(Clone, Debug)]
enum Target {
    /// The primary of a slot, as redis-rs's slot map says.
    Slot(Route),
    /// A node named by a `MOVED`.
    Node(Node),
    /// A node named by an `ASK`: `ASKING` first.
    Ask(Node),
}

/// What the cluster's answer to one attempt asks for.
enum Next {
    Done(Vec<Value>),
    Reload,
    Go(Target),
    Later(Target),
    Fail(RedisError),
}

fn server_kind(err: &RedisError) -> Option<ServerErrorKind> {
    match err.kind() {
        ErrorKind::Server(kind) => Some(kind),
        _ => None,
    }
}

/// Whether `err` is a redirection or a cluster state in which the command did not run.
pub(crate) fn is_redirection(err: &RedisError) -> bool {
    matches!(
        server_kind(err),
        Some(
            ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown
        )
    ) || err.kind() == ErrorKind::ClusterConnectionNotFound
}

fn is_noscript(value: &Value) -> bool {
    matches!(value, Value::ServerError(err) if err.code() == "NOSCRIPT")
}

/// Runs `cmds` as one pipeline on the primary of `key`'s slot, following the cluster's answers
/// (see the module's docs), and returns each command's reply. When `script` is given and the
/// node answers `NOSCRIPT` to the first command, the script is loaded there and the pipeline
/// sent again. Gives up after the response timeout with the last cluster error (the command
/// did not run); a connection error is returned as it came (the outcome is unknown).
pub(crate) async fn run(
    conn: &mut ClusterConnection,
    key: &str,
    cmds: &[Cmd],
    script: Option<(&'static LuaScript, bool)>,
    budget: Duration,
    on_redirect: &(dyn Fn() + Sync),
) -> RedisResult<Vec<Value>> {
    let deadline = Instant::now() + budget;
    let mut backoff =
        keylatch_core::Backoff::new(Duration::from_millis(5), Duration::from_millis(100));
    let mut target = Target::Slot(Route::with_key(key.as_bytes(), SlotAddr::Master));
    let mut reload = false;
    let mut redirections = 0;
    loop {
        let outcome = send(conn, &target, cmds, script.filter(|_| reload)).await;
        let next = match outcome {
            Ok(values)
                if !reload && script.is_some() && values.first().is_some_and(is_noscript) =>
            {
                Next::Reload
            }
            Ok(values) => Next::Done(values),
            Err(err) => match server_kind(&err) {
                Some(ServerErrorKind::Moved) => match redirect(&err) {
                    Some(node) => Next::Go(Target::Node(node)),
                    None => Next::Fail(err),
                },
                Some(ServerErrorKind::Ask) => match redirect(&err) {
                    Some(node) => Next::Go(Target::Ask(node)),
                    None => Next::Fail(err),
                },
                _ if is_redirection(&err) => {
                    // The slot has no reachable owner right now: back off, then ask
                    // redis-rs's slot map again (refreshed meanwhile).
                    if Instant::now() >= deadline {
                        Next::Fail(err)
                    } else {
                        Next::Later(Target::Slot(Route::with_key(
                            key.as_bytes(),
                            SlotAddr::Master,
                        )))
                    }
                }
                _ => Next::Fail(err),
            },
        };
        match next {
            Next::Done(values) => return Ok(values),
            Next::Fail(err) => return Err(err),
            Next::Reload => {
                tracing::debug!(target: "keylatch::connection", key, "NOSCRIPT on a cluster node: script reloaded");
                keylatch_core::telemetry::round_trip();
                reload = true;
            }
            Next::Go(next) => {
                on_redirect();
                redirections += 1;
                if redirections > MAX_REDIRECTIONS {
                    return Err(RedisError::from((
                        ErrorKind::Server(ServerErrorKind::TryAgain),
                        "too many redirections",
                    )));
                }
                tracing::debug!(target: "keylatch::connection", key, target = ?next, "cluster redirection");
                target = next;
            }
            Next::Later(next) => {
                on_redirect();
                let pause = backoff
                    .next_delay()
                    .min(deadline.saturating_duration_since(Instant::now()));
                tokio::time::sleep(pause).await;
                target = next;
            }
        }
    }
}

fn redirect(err: &RedisError) -> Option<Node> {
    err.redirect_node()
        .and_then(|(address, _)| Node::parse(address))
}

/// One attempt: the pipeline (with `SCRIPT LOAD` first when reloading, and `ASKING` first after
/// an `ASK`), to `target`. The replies of those extra commands are left out.
async fn send(
    conn: &mut ClusterConnection,
    target: &Target,
    cmds: &[Cmd],
    load: Option<(&'static LuaScript, bool)>,
) -> RedisResult<Vec<Value>> {
    let mut pipe = redis::pipe();
    let mut offset = 0;
    if matches!(target, Target::Ask(_)) {
        pipe.cmd("ASKING");
        offset += 1;
    }
    if let Some((script, sharded)) = load {
        pipe.add_command(script.load_cmd(sharded));
        offset += 1;
    }
    for cmd in cmds {
        pipe.add_command(cmd.clone());
    }
    let route = match target {
        Target::Slot(route) => SingleNodeRoutingInfo::SpecificNode(*route),
        Target::Node(node) | Target::Ask(node) => node.routing(),
    };
    conn.route_pipeline(pipe, offset, cmds.len(), route).await
}

/// Runs idempotent script calls grouped per primary: one pipeline per node, all nodes at
/// once. A node's pipeline refused as a whole by a redirection (its slots moved) falls back to
/// one call at a time through [`run`], which follows it within the same round. On `NOSCRIPT`,
/// the node's scripts are loaded and its pipeline sent again. Each call gets its own outcome.
pub(crate) async fn run_batch(
    conn: &ClusterConnection,
    map: &SlotMap,
    calls: &[(String, Cmd, &'static LuaScript)],
    sharded: bool,
    budget: Duration,
    on_redirect: &(dyn Fn() + Sync),
    pipelines: &std::sync::atomic::AtomicU64,
) -> Vec<RedisResult<Value>> {
    let mut groups: HashMap<Option<Node>, Vec<usize>> = HashMap::new();
    for (index, (key, _, _)) in calls.iter().enumerate() {
        let node = map.node_for(slot(key.as_bytes())).cloned();
        groups.entry(node).or_default().push(index);
    }
    let mut results: Vec<Option<RedisResult<Value>>> = (0..calls.len()).map(|_| None).collect();
    let runs = groups.into_iter().map(|(node, indices)| {
        let mut conn = conn.clone();
        async move {
            let outcome = match &node {
                Some(node) => {
                    node_batch(&mut conn, node, calls, &indices, sharded, pipelines).await
                }
                None => None,
            };
            match outcome {
                Some(replies) => indices.into_iter().zip(replies).collect::<Vec<_>>(),
                None => {
                    // Redirected, or a slot the map does not know: one call at a time, and
                    // the map is read again before the next batch.
                    on_redirect();
                    let mut replies = Vec::with_capacity(indices.len());
                    for index in indices {
                        pipelines.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let (key, cmd, script) = &calls[index];
                        let reply = run(
                            &mut conn,
                            key,
                            std::slice::from_ref(cmd),
                            Some((*script, sharded)),
                            budget,
                            on_redirect,
                        )
                        .await
                        .and_then(|mut values| {
                            values.pop().map_or_else(
                                || {
                                    Err(RedisError::from((
                                        ErrorKind::UnexpectedReturnType,
                                        "no reply",
                                    )))
                                },
                                Value::extract_error,
                            )
                        });
                        replies.push((index, reply));
                    }
                    replies
                }
            }
        }
    });
    for replies in futures_util::future::join_all(runs).await {
        for (index, reply) in replies {
            results[index] = Some(reply);
        }
    }
    results
        .into_iter()
        .map(|reply| {
            reply.unwrap_or_else(|| {
                Err(RedisError::from((
                    ErrorKind::UnexpectedReturnType,
                    "no reply",
                )))
            })
        })
        .collect()
}

/// One node's pipeline; `None` when the node redirected it (the caller goes call by call).
async fn node_batch(
    conn: &mut ClusterConnection,
    node: &Node,
    calls: &[(String, Cmd, &'static LuaScript)],
    indices: &[usize],
    sharded: bool,
    pipelines: &std::sync::atomic::AtomicU64,
) -> Option<Vec<RedisResult<Value>>> {
    let mut scripts: Vec<&'static LuaScript> = Vec::new();
    for &index in indices {
        let script = calls[index].2;
        if !scripts.iter().any(|s| std::ptr::eq(*s, script)) {
            scripts.push(script);
        }
    }
    for reload in [false, true] {
        let mut pipe = redis::pipe();
        if reload {
            keylatch_core::telemetry::round_trip();
            tracing::debug!(target: "keylatch::connection", node = ?node, "NOSCRIPT on a cluster node: scripts reloaded");
            for script in &scripts {
                pipe.add_command(script.load_cmd(sharded));
            }
        }
        let offset = pipe.len();
        pipelines.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for &index in indices {
            pipe.add_command(calls[index].1.clone());
        }
        match conn
            .route_pipeline(pipe, offset, indices.len(), node.routing())
            .await
        {
            Ok(values) => {
                if !reload && values.iter().any(is_noscript) {
                    continue;
                }
                return Some(values.into_iter().map(Value::extract_error).collect());
            }
            Err(err) if is_redirection(&err) => return None,
            Err(err) => {
                return Some(indices.iter().map(|_| Err(err.clone())).collect());
            }
        }
    }
    None
}

/// Loads scripts on every primary.
pub(crate) async fn load_everywhere(
    conn: &mut ClusterConnection,
    scripts: &[&'static LuaScript],
    sharded: bool,
) -> RedisResult<()> {
    for script in scripts {
        conn.route_command(
            script.load_cmd(sharded),
            RoutingInfo::MultiNode((
                MultipleNodeRoutingInfo::AllMasters,
                Some(ResponsePolicy::AllSucceeded),
            )),
        )
        .await?;
    }
    Ok(())
}
