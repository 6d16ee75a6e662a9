//! Coalescing: concurrent acquisitions (and releases) on one connection go to Redis together, in one script
//! call that runs each in turn.
//!
//! A connection carries up to [`COALESCE_AFTER`] calls of its own at once. A call that finds
//! that many under way (or others already waiting) waits in the connection's lane. When a call
//! under way finishes and calls are waiting, they leave together: one `EVALSHA` of the
//! script's batch variant ([`LuaScript::batched`]) for each run of calls of one script, in the
//! order they were made, in one pipeline on the same connection as a call of their own would
//! use (so requests on one key still reach Redis in the order they were sent). A lone caller never waits, and no timer is involved:
//! calls wait only for a reply that was coming anyway.
//!
//! Each caller keeps its own result, error and cancellation. The undo armed for a call travels
//! with it: a caller that went away before its call left is dropped from the batch (nothing
//! was sent, nothing to undo); one that went away after gets its undo run in the background
//! when the reply says the call took something, or was lost.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use deadpool_redis::redis::{self, RedisError, Value};
use tokio::sync::oneshot;

use super::{Commands, READONLY_RETRIES, is_noscript};
use crate::connection::script::{LuaScript, ScriptCall};
use keylatch_core::UndoGuard;
use keylatch_core::{Error, Result};

/// How many calls a connection carries at once before acquisitions (and releases of a last
/// guard) on it are coalesced.
pub const COALESCE_AFTER: usize = 16;

/// The most calls one batch carries (the rest leave with the next).
const MOST_PER_BATCH: usize = 128;

/// One connection's calls under way and calls waiting to leave together.
#[derive(Default)]
pub(crate) struct Lane {
    /// Calls (or batches) under way on the connection through this lane.
    under_way: usize,
    waiting: Vec<Waiting>,
}

struct Waiting {
    call: ScriptCall,
    undo: UndoGuard,
    reply: oneshot::Sender<Answer>,
}

type Answer = (Result<Value>, UndoGuard);

/// Coalesced script calls sent, and the calls they carried.
#[derive(Default)]
pub(crate) struct Counters {
    batches: AtomicU64,
    calls: AtomicU64,
}

impl Commands {
    /// (Coalesced script calls sent, calls they carried.)
    pub(crate) fn coalesced(&self) -> (u64, u64) {
        (
            self.coalesced.batches.load(Ordering::Relaxed),
            self.coalesced.calls.load(Ordering::Relaxed),
        )
    }

    /// Runs `call` with `undo` armed for it, coalesced with other callers' calls when the
    /// connection is busy (see the module docs).
    ///
    /// The way is chosen before the future is made, so the future holds only what its way
    /// needs (it is part of every acquisition's).
    pub(crate) fn eval_undoable(
        self: &Arc<Self>,
        call: ScriptCall,
        undo: UndoGuard,
    ) -> impl Future<Output = (Result<Value>, UndoGuard)> + Send + '_ {
        let way = self.way(call, undo);
        async move {
            match way {
                Way::Alone(call, undo) => (self.eval_value(&call).await, undo),
                Way::Turn(turn, call, undo) => {
                    let reply = self.eval_value(&call).await;
                    // Sends the calls that waited meanwhile (also when this future is dropped).
                    drop(turn);
                    (reply, undo)
                }
                Way::Waiting(receiver) => match receiver.await {
                    Ok(answer) => answer,
                    // The batch was dropped unsent (the runtime is shutting down): nothing ran.
                    Err(_) => (Err(Error::Closed), UndoGuard::disarmed()),
                },
            }
        }
    }

    /// How a call goes: alone (no coalescing), on a turn of its own, or waiting in its lane.
    fn way(self: &Arc<Self>, call: ScriptCall, undo: UndoGuard) -> Way {
        if self.lanes.is_empty() || call.script().took().is_none() {
            return Way::Alone(call, undo);
        }
        let index = self.pick(call.first_key());
        let mut lane = self.lanes[index].lock().expect("lane lock");
        if lane.waiting.is_empty() && lane.under_way < COALESCE_AFTER {
            lane.under_way += 1;
            let turn = Turn {
                commands: self.clone(),
                index,
            };
            return Way::Turn(turn, call, undo);
        }
        let (reply, receiver) = oneshot::channel();
        lane.waiting.push(Waiting { call, undo, reply });
        Way::Waiting(receiver)
    }

    /// A call or batch on lane `index` is done: the waiting calls leave together, or the lane
    /// has one fewer under way.
    fn finished(self: &Arc<Self>, index: usize) {
        let batch = {
            let mut lane = self.lanes[index].lock().expect("lane lock");
            if lane.waiting.is_empty() {
                lane.under_way -= 1;
                return;
            }
            take_batch(&mut lane)
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(self.clone().send_batches(index, batch));
            }
            Err(_) => {
                // No runtime to send them on: dropped unsent, their callers see `Closed`.
                for waiting in batch {
                    waiting.undo.disarm();
                }
                self.lanes[index].lock().expect("lane lock").under_way -= 1;
            }
        }
    }

    /// Sends `batch`, answers its callers, and goes on with the calls that waited meanwhile.
    async fn send_batches(self: Arc<Self>, index: usize, mut batch: Vec<Waiting>) {
        loop {
            // A caller that went away before its call left: nothing was sent, nothing to undo.
            let (gone, live): (Vec<Waiting>, Vec<Waiting>) =
                batch.into_iter().partition(|w| w.reply.is_closed());
            for waiting in gone {
                waiting.undo.disarm();
            }
            if !live.is_empty() {
                self.answer(index, live).await;
            }
            let mut lane = self.lanes[index].lock().expect("lane lock");
            if lane.waiting.is_empty() {
                lane.under_way -= 1;
                return;
            }
            batch = take_batch(&mut lane);
        }
    }

    /// Runs the calls of `batch` (one script call per script among them, in one pipeline) and
    /// hands each caller its reply and undo.
    async fn answer(&self, index: usize, batch: Vec<Waiting>) {
        let replies = if let [single] = batch.as_slice() {
            vec![self.eval_value(&single.call).await]
        } else {
            self.run_batch(index, &batch).await
        };
        for (waiting, reply) in batch.into_iter().zip(replies) {
            let took = waiting.call.script().took().expect("a coalescing script");
            let undo_it = match &reply {
                Ok(value) => took(value),
                Err(err) => err.is_ambiguous(),
            };
            if let Err((_, undo)) = waiting.reply.send((reply, waiting.undo)) {
                // The caller went away while the call was under way.
                if !undo_it {
                    undo.disarm();
                }
                // Otherwise the undo, dropped armed, runs in the background: after this reply,
                // so it cannot overtake the call it undoes.
            }
        }
    }

    /// One reply per call of `batch`, in order.
    async fn run_batch(&self, index: usize, batch: &[Waiting]) -> Vec<Result<Value>> {
        // Runs of calls of one script, in the order the calls were made: Redis runs a
        // pipeline in order, so no call overtakes one made before it (a waiter's acquisition
        // must not run before the release it followed, or it would miss both the lock and the
        // release's wake-up).
        let mut groups: Vec<(&'static LuaScript, Vec<usize>)> = Vec::new();
        for (position, waiting) in batch.iter().enumerate() {
            let script = waiting.call.script();
            match groups.last_mut() {
                Some((last, positions)) if std::ptr::eq(*last, script) => positions.push(position),
                _ => groups.push((script, vec![position])),
            }
        }
        let cmds: Vec<redis::Cmd> = groups
            .iter()
            .map(|(script, positions)| batch_cmd(script, positions.iter().map(|&p| &batch[p].call)))
            .collect();
        let scripts: Vec<&'static LuaScript> = groups.iter().map(|(script, _)| *script).collect();
        self.coalesced
            .batches
            .fetch_add(groups.len() as u64, Ordering::Relaxed);
        self.coalesced
            .calls
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let first_key = batch[0].call.first_key();
        let mut replies: Vec<Result<Value>> = (0..batch.len())
            .map(|_| Err(Error::UnexpectedReply { what: "batch" }))
            .collect();
        match self.send_pipeline(index, &cmds, &scripts, first_key).await {
            Ok(values) => {
                for ((script, positions), value) in groups.iter().zip(values) {
                    match value {
                        Ok(Value::Array(items)) if items.len() == positions.len() => {
                            for (&position, item) in positions.iter().zip(items) {
                                let key = batch[position].call.first_key();
                                replies[position] = one_reply(item, key);
                            }
                        }
                        Ok(_) => {
                            for &position in positions {
                                replies[position] = Err(Error::UnexpectedReply {
                                    what: script.name(),
                                });
                            }
                        }
                        Err(err) => {
                            for &position in positions {
                                let key = batch[position].call.first_key();
                                replies[position] = Err(self.classify(err.clone(), key));
                            }
                        }
                    }
                }
            }
            Err(Failure::Redis(err)) => {
                for (position, waiting) in batch.iter().enumerate() {
                    replies[position] = Err(self.classify(err.clone(), waiting.call.first_key()));
                }
            }
            Err(Failure::NoConnection(err)) => {
                // Nothing was sent. Each caller gets the error (or, for one that cannot be
                // copied, its own from a try of its own).
                for (position, waiting) in batch.iter().enumerate() {
                    replies[position] = match copy_of(&err) {
                        Some(copy) => Err(copy),
                        None => self.eval_value(&waiting.call).await,
                    };
                }
            }
        }
        replies
    }

    /// Sends the batch's commands (one per group) in one pipeline on lane `index`'s
    /// connection. A command refused with `NOSCRIPT` (after `SCRIPT FLUSH` or a restart; its
    /// batch script is also loaded lazily) or `READONLY` (a failover) did not run: only those
    /// are sent again, after loading their scripts or moving to the new primary; the others
    /// ran and must not run twice. One reply per command; an error for the whole pipeline
    /// when the connection failed (then the outcome is unknown).
    async fn send_pipeline(
        &self,
        index: usize,
        cmds: &[redis::Cmd],
        scripts: &[&'static LuaScript],
        first_key: &str,
    ) -> std::result::Result<Vec<redis::RedisResult<Value>>, Failure> {
        let mut replies: Vec<Option<redis::RedisResult<Value>>> = vec![None; cmds.len()];
        let mut todo: Vec<usize> = (0..cmds.len()).collect();
        let (mut reloads, mut moves) = (0, 0);
        loop {
            let (generation, mut conn) = match self.connection(index).await {
                Ok(found) => found,
                Err(err) => return Err(Failure::NoConnection(err)),
            };
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for &position in &todo {
                pipe.add_command(cmds[position].clone());
            }
            let sent: Vec<redis::RedisResult<Value>> = match pipe.query_async(&mut conn).await {
                Ok(sent) => sent,
                Err(err) => {
                    let _ = self.map_error(err.clone(), first_key, index, generation);
                    return Err(Failure::Redis(err));
                }
            };
            let mut load: Vec<&'static LuaScript> = Vec::new();
            let (mut again, mut moved) = (Vec::new(), None);
            for (&position, reply) in todo.iter().zip(sent) {
                match reply {
                    Err(err) if is_noscript(&err) && reloads == 0 => {
                        if !load.iter().any(|s| std::ptr::eq(*s, scripts[position])) {
                            load.push(scripts[position]);
                        }
                        again.push(position);
                    }
                    Err(err) if super::is_readonly(&err) && moves < READONLY_RETRIES => {
                        moved = Some(err);
                        again.push(position);
                    }
                    reply => replies[position] = Some(reply),
                }
            }
            if again.is_empty() {
                break;
            }
            if let Some(err) = moved {
                // Moves the connection to the new primary.
                let _ = self.map_error(err, first_key, index, generation);
                moves += 1;
            }
            if !load.is_empty() {
                reloads += 1;
                self.script_reloads.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(target: "keylatch::connection", "NOSCRIPT: batch scripts reloaded");
                keylatch_core::telemetry::round_trip();
                let mut reload = redis::pipe();
                for cmd in load.iter().filter_map(|script| script.batched_load_cmd()) {
                    reload.add_command(cmd).ignore();
                }
                let (generation, mut conn) = match self.connection(index).await {
                    Ok(found) => found,
                    Err(err) => return Err(Failure::NoConnection(err)),
                };
                if let Err(err) = reload.query_async::<()>(&mut conn).await {
                    let _ = self.map_error(err.clone(), first_key, index, generation);
                    return Err(Failure::Redis(err));
                }
            }
            todo = again;
        }
        Ok(replies
            .into_iter()
            .map(|reply| reply.expect("every command answered"))
            .collect())
    }
}

/// Calls waiting in `lane`, up to a batch's worth.
fn take_batch(lane: &mut Lane) -> Vec<Waiting> {
    if lane.waiting.len() <= MOST_PER_BATCH {
        // The next calls to wait find room for as many (no growing step by step).
        let room = lane.waiting.capacity();
        std::mem::replace(&mut lane.waiting, Vec::with_capacity(room))
    } else {
        lane.waiting.drain(..MOST_PER_BATCH).collect()
    }
}

/// Why a batch got no replies.
enum Failure {
    /// The connection failed with the batch under way: its outcome is unknown.
    Redis(RedisError),
    /// No connection could be had: nothing was sent.
    NoConnection(Error),
}

/// A copy of `err`, for the errors a connection can fail with that can be copied.
fn copy_of(err: &Error) -> Option<Error> {
    Some(match err {
        Error::Closed => Error::Closed,
        Error::Connect { url, source } => Error::Connect {
            url: url.clone(),
            source: source.clone(),
        },
        Error::Auth(source) => Error::Auth(source.clone()),
        Error::Timeout { after } => Error::Timeout { after: *after },
        Error::Connection(source) => Error::Connection(source.clone()),
        _ => return None,
    })
}

/// The `EVALSHA` of `script`'s batch variant for `calls`.
fn batch_cmd<'a>(
    script: &'static LuaScript,
    calls: impl Iterator<Item = &'a ScriptCall> + Clone,
) -> redis::Cmd {
    let (keys, args, bytes) = calls.clone().fold((0, 0, 0), |(k, a, b), call| {
        (
            k + call.keys().len(),
            a + call.args().len(),
            b + call.keys().map(<[u8]>::len).sum::<usize>()
                + call.args().map(<[u8]>::len).sum::<usize>(),
        )
    });
    let count = calls.clone().count();
    let mut cmd = redis::Cmd::with_capacity(4 + keys + args + 2 * count, 80 + bytes + 8 * count);
    cmd.arg("EVALSHA").arg(&script.batched().1).arg(keys);
    for call in calls.clone() {
        for key in call.keys() {
            cmd.arg(key);
        }
    }
    cmd.arg(count);
    for call in calls {
        cmd.arg(call.keys().len()).arg(call.args().len());
        for arg in call.args() {
            cmd.arg(arg);
        }
    }
    cmd
}

/// One call's reply within a batch's: an error reply is that call's error, and `false` (a
/// `nil` in the batch's array) is `nil`.
fn one_reply(item: Value, key: &str) -> Result<Value> {
    match item {
        Value::Boolean(false) => Ok(Value::Nil),
        Value::ServerError(err) => Err(crate::error::from_redis_key(RedisError::from(err), key)),
        other => Ok(other),
    }
}

enum Way {
    Alone(ScriptCall, UndoGuard),
    Turn(Turn, ScriptCall, UndoGuard),
    Waiting(oneshot::Receiver<Answer>),
}

/// Ends a call's turn on its lane (see [`Commands::finished`]), also when it is dropped.
struct Turn {
    commands: Arc<Commands>,
    index: usize,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.commands.finished(self.index);
    }
}
