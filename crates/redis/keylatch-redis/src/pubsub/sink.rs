//! The hub's side of its connection: subscribe and unsubscribe on one server or on every
//! node of a cluster.

use deadpool_redis::redis;

/// The sending half of the hub's connection: a pub/sub connection to one server, or a RESP3
/// cluster connection (redis-rs keeps one connection per node, and sends each subscription
/// to the node that owns its channel's slot).
#[derive(Clone)]
pub(super) enum Sink {
    Classic(redis::aio::PubSubSink),
    Cluster {
        conn: redis::cluster_async::ClusterConnection,
        /// `SSUBSCRIBE` rather than `SUBSCRIBE`.
        sharded: bool,
    },
}

/// Names of one kind: channels (`false`) or patterns (`true`).
pub(super) fn of_kind(names: &[(String, bool)], pattern: bool) -> Vec<&str> {
    names
        .iter()
        .filter(|(_, p)| *p == pattern)
        .map(|(name, _)| name.as_str())
        .collect()
}

impl Sink {
    /// Subscribes to channels and patterns (`(name, is_pattern)`).
    pub(super) async fn subscribe(&mut self, names: &[(String, bool)]) -> redis::RedisResult<()> {
        let channels = of_kind(names, false);
        let patterns = of_kind(names, true);
        match self {
            Sink::Classic(sink) => {
                if !channels.is_empty() {
                    sink.subscribe(channels).await?;
                }
                if !patterns.is_empty() {
                    sink.psubscribe(patterns).await?;
                }
                Ok(())
            }
            Sink::Cluster { .. } if !patterns.is_empty() => Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "no pattern subscriptions on a Redis Cluster",
            ))),
            Sink::Cluster { conn, sharded } => {
                // One command per channel: channels of different slots live on different
                // nodes (and a sharded one must name channels of one slot).
                let sharded = *sharded;
                let calls = channels.iter().map(|channel| {
                    let mut conn = conn.clone();
                    async move {
                        if sharded {
                            conn.ssubscribe(channel).await
                        } else {
                            conn.subscribe(channel).await
                        }
                    }
                });
                futures_util::future::join_all(calls)
                    .await
                    .into_iter()
                    .collect::<redis::RedisResult<Vec<()>>>()
                    .map(|_| ())
            }
        }
    }

    /// Unsubscribes from channels and patterns (`(name, is_pattern)`).
    pub(super) async fn unsubscribe(&mut self, names: &[(String, bool)]) -> redis::RedisResult<()> {
        let channels = of_kind(names, false);
        let patterns = of_kind(names, true);
        match self {
            Sink::Classic(sink) => {
                if !channels.is_empty() {
                    sink.unsubscribe(channels).await?;
                }
                if !patterns.is_empty() {
                    sink.punsubscribe(patterns).await?;
                }
                Ok(())
            }
            Sink::Cluster { conn, sharded } => {
                let sharded = *sharded;
                let calls = channels.iter().map(|channel| {
                    let mut conn = conn.clone();
                    async move {
                        if sharded {
                            conn.sunsubscribe(channel).await
                        } else {
                            conn.unsubscribe(channel).await
                        }
                    }
                });
                futures_util::future::join_all(calls)
                    .await
                    .into_iter()
                    .collect::<redis::RedisResult<Vec<()>>>()
                    .map(|_| ())
            }
        }
    }
}
