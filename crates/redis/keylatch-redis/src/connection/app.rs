//! A connection for an application's own commands, whatever the topology.

use deadpool_redis::redis::{
    self, Cmd, RedisFuture, Value,
    aio::{ConnectionLike, MultiplexedConnection},
    cluster_async::ClusterConnection,
};

/// A Redis connection with the client's settings (address, TLS, credentials): to the server
/// or the current primary, or, on a Redis Cluster, to the whole cluster (each command goes to
/// the node that owns its key's slot).
///
/// It implements redis-rs's [`ConnectionLike`], so commands and pipelines run on it as on any
/// redis-rs connection:
///
/// ```no_run
/// # async fn run(client: keylatch::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use keylatch::redis::AsyncCommands;
///
/// let mut redis = client.connection().await?;
/// // redis-rs's own errors: convert with `keylatch::from_redis` where a keylatch error is wanted.
/// let _: () = redis.set("report:last", "done").await?;
/// # Ok(())
/// # }
/// ```
///
/// Cheap to clone: clones share the underlying connection, which carries many requests at once.
#[derive(Clone)]
pub struct Connection {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl Connection {
    pub(crate) fn single(conn: MultiplexedConnection) -> Connection {
        Connection {
            inner: Inner::Single(conn),
        }
    }

    pub(crate) fn cluster(conn: ClusterConnection) -> Connection {
        Connection {
            inner: Inner::Cluster(conn),
        }
    }

    /// Whether this is a connection to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.inner, Inner::Cluster(_))
    }

    /// The cluster connection, on a Redis Cluster.
    pub(crate) fn as_cluster(&mut self) -> Option<&mut ClusterConnection> {
        match &mut self.inner {
            Inner::Cluster(conn) => Some(conn),
            Inner::Single(_) => None,
        }
    }

    /// The connection to one server, when not on a cluster.
    pub fn into_multiplexed(self) -> Option<MultiplexedConnection> {
        match self.inner {
            Inner::Single(conn) => Some(conn),
            Inner::Cluster(_) => None,
        }
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("cluster", &self.is_cluster())
            .finish_non_exhaustive()
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.inner {
            Inner::Single(conn) => conn.req_packed_command(cmd),
            Inner::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.inner {
            Inner::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Inner::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.inner {
            Inner::Single(conn) => conn.get_db(),
            Inner::Cluster(conn) => conn.get_db(),
        }
    }
}
