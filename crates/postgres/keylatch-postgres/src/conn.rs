//! [`HeldConn`]: a pooled connection taken out of the pool while its session may hold an
//! advisory lock or wait for one. Dropped armed (an acquisition cancelled mid-request, a hold
//! whose session failed), it is never given back to the pool: its request is cancelled and the
//! connection closed in the background, so the server ends the session and frees whatever it
//! held or waited for.
//!
//! May import: keylatch-core, tokio-postgres, deadpool-postgres.

use std::fmt;

use deadpool_postgres::Object;
use keylatch_core::Background;
use tokio_postgres::{CancelToken, NoTls};

/// A connection out of the pool for an acquisition or a hold.
pub(crate) struct HeldConn {
    conn: Option<Object>,
    cancel: CancelToken,
    armed: bool,
    background: Background,
}

impl fmt::Debug for HeldConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldConn")
            .field("armed", &self.armed)
            .finish_non_exhaustive()
    }
}

impl HeldConn {
    /// Armed: dropped before [`give_back`](Self::give_back), it is discarded.
    pub(crate) fn new(conn: Object, background: Background) -> HeldConn {
        let cancel = conn.cancel_token();
        HeldConn {
            conn: Some(conn),
            cancel,
            armed: true,
            background,
        }
    }

    /// The session's client.
    pub(crate) fn client(&self) -> &tokio_postgres::Client {
        self.conn.as_ref().expect("a held connection")
    }

    /// `sql` prepared on this connection, from its statement cache after the first time (a
    /// statement sent as text would be prepared on every call: one more round trip).
    pub(crate) async fn prepared(
        &self,
        sql: &str,
    ) -> Result<tokio_postgres::Statement, tokio_postgres::Error> {
        self.conn
            .as_ref()
            .expect("a held connection")
            .prepare_cached(sql)
            .await
    }

    /// Whether the connection is closed (its session ended).
    pub(crate) fn is_closed(&self) -> bool {
        self.client().is_closed()
    }

    /// Returns the connection to the pool: its session holds and waits for nothing.
    pub(crate) fn give_back(mut self) {
        self.armed = false;
    }
}

impl Drop for HeldConn {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if !self.armed {
            // Back to the pool.
            drop(conn);
            return;
        }
        // Out of the pool for good: dropping the client closes the connection, and the server
        // ends the session (a session blocked in a lock wait notices at the cancel, or at the
        // next `client_connection_check_interval`).
        let client = Object::take(conn);
        let cancel = self.cancel.clone();
        self.background.spawn(async move {
            let cancelled =
                tokio::time::timeout(std::time::Duration::from_secs(5), cancel.cancel_query(NoTls))
                    .await;
            if !matches!(cancelled, Ok(Ok(()))) {
                tracing::debug!(target: "keylatch::postgres", "cancel request of a discarded connection failed");
            }
            drop(client);
            Ok(())
        });
    }
}
