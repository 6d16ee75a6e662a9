//! `keylatch queue offer|take|inspect|transfer`: the delayed queue from the shell. Imports
//! `cli` (its arguments), `failure` (exit codes), `run` (the signal handling) and
//! `queue_agent` (the transfer agent).

use std::io::Write;
use std::time::Duration;

use keylatch::queue::{Bytes, Codec, DelayedQueue, Kryo5, KryoScalar, Long, Utf8};
use keylatch::redis::{self, Value};
use keylatch::{Client, Config};
use serde_json::json;

use crate::cli::{QueueCodec, QueueCommand};
use crate::failure::{EX_SOFTWARE, EX_TEMPFAIL, EX_USAGE, Failure};

/// Runs one queue command and returns its exit code. The client is shut down before it
/// returns, whatever the outcome (a take's undo, if one is due, runs before).
pub async fn queue(config: Config, command: QueueCommand) -> Result<u8, Failure> {
    let client = Client::connect_with(config).await?;
    let outcome = run(&client, command).await;
    let _ = client.shutdown().await;
    outcome
}

async fn run(client: &Client, command: QueueCommand) -> Result<u8, Failure> {
    match command {
        QueueCommand::Offer {
            name,
            value,
            delay,
            codec,
        } => {
            let due = match codec {
                QueueCodec::Bytes => {
                    offer::<Bytes>(client, &name, &value.into_bytes(), delay).await?
                }
                QueueCodec::String => offer::<Utf8>(client, &name, &value, delay).await?,
                QueueCodec::Long => {
                    let n = value.trim().parse::<i64>().map_err(|_| {
                        Failure::new(
                            EX_USAGE,
                            format!("{value:?} is not a 64-bit integer (--codec long)"),
                        )
                    })?;
                    offer::<Long>(client, &name, &n, delay).await?
                }
                QueueCodec::Kryo => {
                    offer::<Kryo5>(client, &name, &KryoScalar::String(value), delay).await?
                }
            };
            println!("{}", humantime::format_rfc3339_millis(due));
            Ok(0)
        }
        QueueCommand::Take { name, wait, codec } => {
            let taken = tokio::select! {
                taken = take(client, &name, wait, codec) => taken?,
                code = crate::run::interruption() => return Ok(code),
            };
            let Some(bytes) = taken else {
                return Err(Failure::new(
                    EX_TEMPFAIL,
                    format!(
                        "nothing was due in queue {name:?} within {}",
                        humantime::format_duration(wait.unwrap_or_default())
                    ),
                ));
            };
            let mut out = std::io::stdout().lock();
            let written = out.write_all(&bytes).and_then(|()| out.flush());
            written.map_err(|err| Failure::new(EX_SOFTWARE, format!("stdout: {err}")))?;
            Ok(0)
        }
        QueueCommand::Inspect { name, json } => {
            inspect(client, &name, json).await?;
            Ok(0)
        }
        QueueCommand::Transfer { names, max_sleep } => {
            crate::queue_agent::transfer(client, &names, max_sleep).await
        }
    }
}

async fn offer<C: Codec>(
    client: &Client,
    name: &str,
    value: &C::Value,
    delay: Duration,
) -> Result<std::time::SystemTime, Failure> {
    let queue = client.delayed_queue::<C>(name)?;
    Ok(queue.offer(value, delay).await?)
}

/// The taken value as `take` prints it: bytes as they are, text and numbers with a newline.
async fn take(
    client: &Client,
    name: &str,
    wait: Option<Duration>,
    codec: QueueCodec,
) -> Result<Option<Vec<u8>>, Failure> {
    async fn one<C: Codec>(
        queue: DelayedQueue<C>,
        wait: Option<Duration>,
    ) -> keylatch::Result<Option<C::Value>> {
        match wait {
            Some(wait) if wait.is_zero() => queue.poll().await,
            Some(wait) => queue.poll_for(wait).await,
            None => queue.take().await.map(Some),
        }
    }
    let line = |text: String| format!("{text}\n").into_bytes();
    let queue = client.delayed_queue::<Bytes>(name)?;
    Ok(match codec {
        QueueCodec::Bytes => one(queue, wait).await?,
        QueueCodec::String => one(queue.with_codec::<Utf8>(), wait).await?.map(line),
        QueueCodec::Long => one(queue.with_codec::<Long>(), wait)
            .await?
            .map(|n| line(n.to_string())),
        QueueCodec::Kryo => {
            one(queue.with_codec::<Kryo5>(), wait)
                .await?
                .map(|value| match value {
                    KryoScalar::String(text) => line(text),
                    KryoScalar::Integer(n) => line(n.to_string()),
                    KryoScalar::Long(n) => line(n.to_string()),
                })
        }
    })
}

/// How many clients are subscribed to `channel` on the node of its slot: `PUBSUB NUMSUB`
/// (classic pub/sub: Redisson's transfer tasks, keylatch off a cluster) and `PUBSUB
/// SHARDNUMSUB` (sharded pub/sub: keylatch's agents and waiting takes on a cluster; 0 where
/// the server has no sharded pub/sub).
async fn subscribers(client: &Client, channel: &str) -> Result<(u64, u64), Failure> {
    let redis = client
        .as_redis()
        .ok_or_else(|| Failure::new(EX_USAGE, "the delayed queue needs Redis"))?;
    let count = |reply: Value| match reply {
        Value::Array(items) => Ok(items.get(1).and_then(as_count).unwrap_or(0)),
        _ => Err(Failure::new(EX_SOFTWARE, "PUBSUB: unexpected reply")),
    };
    let mut cmd = redis::cmd("PUBSUB");
    cmd.arg("NUMSUB").arg(channel);
    let classic = count(redis.query(&cmd, channel).await?)?;
    let mut cmd = redis::cmd("PUBSUB");
    cmd.arg("SHARDNUMSUB").arg(channel);
    let sharded = match redis.query::<Value>(&cmd, channel).await {
        Ok(reply) => count(reply)?,
        Err(_) => 0,
    };
    Ok((classic, sharded))
}

fn as_count(value: &Value) -> Option<u64> {
    match value {
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

async fn inspect(client: &Client, name: &str, as_json: bool) -> Result<(), Failure> {
    let queue = client.delayed_queue::<Bytes>(name)?;
    let counts = queue.counts().await?;
    let (tasks, sharded) = subscribers(client, queue.channel()).await?;
    let overdue_ms = counts
        .oldest_overdue
        .map(|age| u64::try_from(age.as_millis()).unwrap_or(u64::MAX));
    if as_json {
        let report = json!({
            "name": name,
            "primitive": "delayed_queue",
            "backlog": counts.delayed,
            "due_now": counts.due,
            "ready": counts.ready,
            "oldest_overdue_ms": overdue_ms,
            "processing": counts.processing,
            "retrying": counts.retrying,
            "dead_letters": counts.dead,
            "channel": queue.channel(),
            "channel_subscribers": tasks,
            "sharded_subscribers": sharded,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
        return Ok(());
    }
    println!("delayed queue {name:?}");
    println!("  backlog (delayed): {}", counts.delayed);
    println!("  due now, not moved yet: {}", counts.due);
    println!("  ready in the list: {}", counts.ready);
    match counts.oldest_overdue {
        Some(_) => println!(
            "  oldest overdue element: due {} ago",
            humantime::format_duration(Duration::from_millis(overdue_ms.unwrap_or_default()))
        ),
        None if counts.delayed > 0 => println!("  oldest overdue element: none overdue"),
        None => {}
    }
    if counts.processing + counts.retrying + counts.dead > 0 {
        println!(
            "  reliable takes: {} processing, {} waiting for another delivery, {} dead letters",
            counts.processing, counts.retrying, counts.dead
        );
    }
    println!(
        "  subscribers of {} (Redisson transfer tasks, keylatch agents and waiting takes): \
         {tasks}, sharded {sharded}",
        queue.channel()
    );
    Ok(())
}
