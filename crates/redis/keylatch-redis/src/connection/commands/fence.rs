//! Fencing a connection given up on, and the checks of a connection just opened.
//!
//! A request whose reply does not come within the response timeout may still be on its way:
//! after a partition heals, TCP retransmits what it sent meanwhile. The client gives up on the
//! connection (it is dropped and replaced) and undoes what the request may have done over the
//! new connection. Redis orders the requests of one connection, not of two: the late request
//! could run after its undo, which then found nothing to undo, and take a hold, queue a waiter
//! or take permits for a caller that has given up on it. So the first thing sent on a slot's
//! new connection is `CLIENT KILL ID <id> ADDR <addr>` for the connections of that slot given
//! up on, pipelined with the checks every new connection gets (no extra round trip): from then
//! on nothing more of theirs runs, and what ran before is seen by the undo, which goes over
//! the same slot (every command on one key does). `ADDR` makes the kill miss a connection of a
//! restarted server that got the same id. A server that refuses `CLIENT INFO` or `CLIENT KILL`
//! (an ACL without `@admin`, a proxy) is not fenced: the undo then runs as before, in order
//! only with what already arrived. Not on a Redis Cluster (redis-rs keeps the nodes'
//! connections).
//!
//! May import: the parent `commands` module, `app`, `topology`, `server_changes`,
//! `keylatch-core`.

use std::sync::Mutex;

use deadpool_redis::redis::{self, FromRedisValue, Value};
use keylatch_core::Result;

use super::{Commands, OPEN_RETRIES};
use crate::connection::app::Connection;
use crate::connection::topology::CommandConnection;

/// A connection as its server knows it (`CLIENT INFO`): its id and the client's address; and
/// the server's address, if known (a connection is fenced only on the server it went to).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Identity {
    id: u64,
    addr: String,
    server: Option<String>,
}

impl Identity {
    /// The `id=` and `addr=` fields of a `CLIENT INFO` reply.
    fn parse(info: &str) -> Option<Identity> {
        let field = |name: &str| {
            info.split_ascii_whitespace()
                .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
        };
        Some(Identity {
            id: field("id")?.parse().ok()?,
            addr: field("addr")?.to_owned(),
            server: None,
        })
    }
}

/// What the checks of a new connection found.
pub(super) enum Greeting {
    /// The connection works; who it is on the server, if the server said.
    Ready(Option<Identity>),
    /// It broke meanwhile: open another one.
    Broken(redis::RedisError),
}

impl Commands {
    /// Opens a command connection and checks it (`greet`), fencing first the connections
    /// given up on in `fences` (a slot's); one that breaks meanwhile (a `CLIENT KILL`, a
    /// restart) is replaced at once, a few times at most. If none took the checks, the last
    /// one is handed out unchecked, unless fences are pending: then none is, so that no undo
    /// runs before them.
    pub(super) async fn open_fenced(
        &self,
        fences: &Mutex<Vec<Identity>>,
    ) -> Result<(CommandConnection, Option<Identity>)> {
        let mut opened = self.topology.command_connection().await?;
        if self.topology.is_cluster() {
            return Ok((opened, None));
        }
        let mut broken = None;
        for _ in 0..OPEN_RETRIES {
            let pending = fences.lock().expect("fence lock").clone();
            let address = opened.address.as_deref();
            match self.greet(address, &mut opened.conn, &pending).await {
                Greeting::Ready(identity) => {
                    fences.lock().expect("fence lock").drain(..pending.len());
                    return Ok((opened, identity));
                }
                Greeting::Broken(err) => {
                    broken = Some(err);
                    opened = self.topology.command_connection().await?;
                }
            }
        }
        match broken {
            Some(err) if !fences.lock().expect("fence lock").is_empty() => {
                Err(self.classify(err, ""))
            }
            _ => Ok((opened, None)),
        }
    }

    /// Checks a connection just opened, in one round trip: the server's run id when its
    /// `address` is known (see `note_run_id`), who the connection is (`CLIENT INFO`), and the
    /// kills of `fences` (the slot's connections given up on) that went to the same server.
    pub(super) async fn greet(
        &self,
        address: Option<&str>,
        conn: &mut Connection,
        fences: &[Identity],
    ) -> Greeting {
        keylatch_core::telemetry::round_trip();
        let fences: Vec<&Identity> = fences
            .iter()
            .filter(|fence| fence.server.as_deref() == address)
            .collect();
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        if address.is_some() {
            pipe.cmd("INFO").arg("server");
        }
        pipe.cmd("CLIENT").arg("INFO");
        for fence in &fences {
            pipe.cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(fence.id)
                .arg("ADDR")
                .arg(&fence.addr);
        }
        let replies: Vec<redis::RedisResult<Value>> = match pipe.query_async(conn).await {
            Ok(replies) => replies,
            Err(err) if err.is_io_error() || err.is_connection_dropped() => {
                return Greeting::Broken(err);
            }
            Err(err) => {
                tracing::debug!(target: "keylatch::connection", error = %err, "the checks of a new connection were refused");
                return Greeting::Ready(None);
            }
        };
        let mut replies = replies.into_iter();
        if let Some(address) = address {
            let eof = || std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into();
            let info = replies
                .next()
                .unwrap_or_else(|| Err(eof()))
                .and_then(|value| String::from_redis_value(value).map_err(Into::into));
            if let Err(err) = self.note_run_id(address, info) {
                return Greeting::Broken(err);
            }
        }
        let identity = match replies.next() {
            Some(Ok(value)) => String::from_redis_value(value)
                .ok()
                .and_then(|info| Identity::parse(&info))
                .map(|identity| Identity {
                    server: address.map(str::to_owned),
                    ..identity
                }),
            _ => None,
        };
        for (fence, reply) in fences.iter().zip(replies) {
            match reply {
                Ok(Value::Int(killed)) => {
                    tracing::debug!(target: "keylatch::connection", id = fence.id, killed, "a connection given up on was fenced");
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::debug!(target: "keylatch::connection", id = fence.id, error = %err, "a connection given up on could not be fenced");
                }
            }
        }
        if identity.is_none() {
            tracing::debug!(target: "keylatch::connection", "CLIENT INFO refused: this connection cannot be fenced if it is given up on");
        }
        Greeting::Ready(identity)
    }
}

#[cfg(test)]
mod tests {
    use super::Identity;

    #[test]
    fn reads_the_id_and_the_address() {
        let info = "id=7 addr=127.0.0.1:50312 laddr=127.0.0.1:6379 fd=9 name= age=0\n";
        assert_eq!(
            Identity::parse(info),
            Some(Identity {
                id: 7,
                addr: "127.0.0.1:50312".to_owned(),
                server: None,
            })
        );
        assert_eq!(Identity::parse("laddr=1.2.3.4:5 id=x addr=a"), None);
        assert_eq!(Identity::parse("id=3"), None);
    }
}
