//! The session watcher: a task per client that follows the ZooKeeper session's state and
//! marks every hold of the client lost when the session expires, is closed or is refused, or
//! (by [`DisconnectLoss`]) as soon as the connection is lost (the default: Curator's
//! SUSPENDED, session fate unknown) or when a disconnection lasts longer than a bound —
//! Curator's simulated LOST. Nodes of holds taken as lost while the session may still live are deleted once it
//! reconnects, so they block no one. After an expiry it opens a new session ([`Reopen`]), as
//! Curator does after LOST, so the client's later acquisitions work again.
//!
//! May import: keylatch-core, zookeeper-client, `session`, `tls`.

use std::sync::{Arc, Weak};
use std::time::Duration;

use keylatch_core::LossReason;
use keylatch_core::secrecy::{ExposeSecret, SecretString};
use tokio::sync::oneshot;
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::session::Shared;

/// When the holds of a disconnected client are taken as lost.
///
/// zookeeper-client declares the connection lost when no reply came for its connection
/// timeout `c` (the configured connection timeout when at most 3/5 of the negotiated session
/// timeout `T`, else `2T/5`), checked every `c/8` (`T/20` in the second case): at the latest
/// `9c/8 ≤ 27T/40` after the last reply. The server expires the session no earlier than `T`
/// after the last request it received, so [`OnDisconnect`](DisconnectLoss::OnDisconnect)
/// marks holds lost at least `13T/40` minus one round trip before another session can be
/// granted the lock. The other policies may signal loss after that instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum DisconnectLoss {
    /// As soon as the connection is lost (Curator's SUSPENDED, treated as lost as Curator's
    /// `StandardConnectionStateErrorPolicy` does): before the ensemble can expire the session
    /// and hand the lock on. A hold never survives a reconnection; its node is deleted once
    /// the session is back. The default.
    #[default]
    OnDisconnect,
    /// After a disconnection as long as the negotiated session timeout. Not safe: by then
    /// the server may have expired the session and handed the lock on (keylatch's default
    /// before [`OnDisconnect`](DisconnectLoss::OnDisconnect)).
    AfterSessionTimeout,
    /// After a disconnection this long: a hold survives a reconnection within the bound.
    /// Safe only while the bound plus the detection time stays under the session timeout
    /// (`bound < 13T/40` minus a round trip, see above); a longer bound is logged as unsafe
    /// at connect.
    After(Duration),
    /// Only when the session is known ended (expired or closed): Curator's
    /// `SessionConnectionStateErrorPolicy`. Not safe: loss is signalled after the server
    /// may have handed the lock on.
    OnlyOnExpiry,
}

impl DisconnectLoss {
    /// How long a disconnection lasts before holds are lost; `None` for only on expiry.
    fn bound(self, session_timeout: Duration) -> Option<Duration> {
        match self {
            DisconnectLoss::OnDisconnect => Some(Duration::ZERO),
            DisconnectLoss::AfterSessionTimeout => Some(session_timeout),
            DisconnectLoss::After(bound) => Some(bound),
            DisconnectLoss::OnlyOnExpiry => None,
        }
    }
}

/// The latest instant after the last reply at which zookeeper-client declares the
/// connection lost, for a negotiated `session_timeout` and a configured `connection_timeout`
/// (its `calc_tick_timeout`: the no-reply limit is 8 ticks, checked once a tick).
pub(crate) fn detection_bound(session_timeout: Duration, connection_timeout: Duration) -> Duration {
    let limit = if connection_timeout.is_zero() || connection_timeout > session_timeout * 3 / 5 {
        session_timeout * 8 / 20
    } else {
        connection_timeout
    };
    limit + limit / 8
}

/// Logs once at connect when `policy` may signal loss after the server could have expired
/// the session (and handed the lock on).
pub(crate) fn warn_if_unsafe(
    policy: DisconnectLoss,
    session_timeout: Duration,
    connection_timeout: Duration,
) {
    let detection = detection_bound(session_timeout, connection_timeout);
    let unsafe_ = match policy.bound(session_timeout) {
        None => true,
        Some(bound) => detection + bound >= session_timeout,
    };
    if unsafe_ {
        tracing::warn!(
            target: "keylatch::zookeeper",
            ?policy,
            ?session_timeout,
            ?detection,
            "disconnect-loss policy may signal loss after the session could expire and the lock pass on"
        );
    }
}

/// How to open a session like the client's first one: its hosts, timeouts, credentials and
/// chroot. (No `Debug`: it holds the password.)
#[derive(Clone)]
pub(crate) struct Reopen {
    /// The connect string.
    pub(crate) hosts: String,
    /// The session timeout asked for.
    pub(crate) session_timeout: Duration,
    /// The bound on one connection attempt.
    pub(crate) connection_timeout: Duration,
    /// Digest credentials (`user:password`).
    pub(crate) digest: Option<SecretString>,
    /// The chroot, created when missing.
    pub(crate) chroot: Option<String>,
    /// The ACLs the chroot is created with.
    pub(crate) acls: zk::Acls<'static>,
    /// The CA and client certificate of a `zk+tls://` URL (every host is then a TLS port).
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(crate) tls: Option<Arc<crate::tls::TlsMaterial>>,
}

impl Reopen {
    /// A new session, without its chroot applied.
    pub(crate) async fn connect(&self) -> Result<zk::Client, zk::Error> {
        let mut connector = zk::Client::connector()
            .with_session_timeout(self.session_timeout)
            .with_connection_timeout(self.connection_timeout);
        if let Some(digest) = &self.digest {
            connector = connector.with_auth("digest", digest.expose_secret().as_bytes());
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            crate::tls::install_crypto_provider();
            return connector
                .with_tls(tls.options()?)
                .secure_connect(&self.hosts)
                .await;
        }
        connector.connect(&self.hosts).await
    }

    /// A new session, its chroot created when missing and applied.
    async fn open(&self) -> Result<zk::Client, zk::Error> {
        let client = self.connect().await?;
        let Some(chroot) = &self.chroot else {
            return Ok(client);
        };
        let options = zk::CreateMode::Persistent.with_acls(self.acls);
        client.mkdir(chroot, &options).await?;
        // The chroot was accepted by the first session.
        client
            .chroot(chroot.as_str())
            .map_err(|_| zk::Error::BadArguments(&"invalid chroot"))
    }
}

/// Starts the watcher. It ends when the session is closed or refused, or `stop` is dropped
/// (the client is); after an expiry it opens a new session and follows that one.
pub(crate) fn spawn(
    shared: Weak<Shared>,
    mut states: zk::StateWatcher,
    policy: DisconnectLoss,
    session_timeout: Duration,
    reopen: Reopen,
    mut stop: oneshot::Receiver<()>,
) {
    let bound = policy.bound(session_timeout);
    tokio::spawn(async move {
        let mut disconnected_at: Option<Instant> = None;
        loop {
            let limit = disconnected_at
                .zip(bound)
                .map(|(since, bound)| since + bound);
            let expiry = async {
                match limit {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                state = states.changed() => match state {
                    zk::SessionState::Disconnected => {
                        if bound == Some(Duration::ZERO) {
                            // Curator's SUSPENDED: lost now, before the session can expire.
                            bound_passed(&shared, Duration::ZERO);
                        } else {
                            disconnected_at.get_or_insert_with(Instant::now);
                        }
                    }
                    zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                        disconnected_at = None;
                    }
                    zk::SessionState::Expired => {
                        let Some(owner) = shared.upgrade() else { return };
                        owner.next_epoch();
                        let nodes = owner.lose_all(LossReason::SessionExpired);
                        tracing::warn!(target: "keylatch::zookeeper", holds = nodes.len(), "session expired: holds lost; opening a new session");
                        drop(owner);
                        disconnected_at = None;
                        match reopened(&shared, &reopen, &mut stop).await {
                            Some(next) => states = next,
                            None => return,
                        }
                    }
                    zk::SessionState::Closed | zk::SessionState::AuthFailed => {
                        if let Some(shared) = shared.upgrade() {
                            let nodes = shared.lose_all(LossReason::SessionExpired);
                            if !nodes.is_empty() {
                                tracing::warn!(target: "keylatch::zookeeper", ?state, holds = nodes.len(), "session ended: holds lost");
                            }
                        }
                        return;
                    }
                },
                () = expiry => {
                    // Once per disconnection.
                    let since = disconnected_at.take();
                    bound_passed(&shared, since.map_or(Duration::ZERO, |at| at.elapsed()));
                }
                _ = &mut stop => return,
            }
        }
    });
}

/// Opens a new session and puts it in place, trying again (with a back-off) until it is
/// open: its state watcher. `None` when the client was shut down or dropped meanwhile.
async fn reopened(
    shared: &Weak<Shared>,
    reopen: &Reopen,
    stop: &mut oneshot::Receiver<()>,
) -> Option<zk::StateWatcher> {
    let mut tries = 0u32;
    loop {
        let opened = tokio::select! {
            opened = reopen.open() => opened,
            _ = &mut *stop => return None,
        };
        match opened {
            Ok(client) => {
                let states = client.state_watcher();
                let owner = shared.upgrade()?;
                if !owner.replace_client(client) {
                    return None;
                }
                tracing::info!(target: "keylatch::zookeeper", session = owner.client().ok()?.session_id().0, "new session after an expiry");
                return Some(states);
            }
            Err(err) => {
                tracing::warn!(target: "keylatch::zookeeper", error = %err, "a new session could not be opened yet");
                tries += 1;
                let pause = keylatch_core::Backoff::nth(
                    Duration::from_millis(100),
                    Duration::from_secs(5),
                    tries - 1,
                );
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    _ = &mut *stop => return None,
                }
            }
        }
    }
}

/// A disconnection outlasted the bound: every hold is lost, and its node is deleted once the
/// session is back (if it comes back).
fn bound_passed(shared: &Weak<Shared>, for_: Duration) {
    let Some(shared) = shared.upgrade() else {
        return;
    };
    let holds = shared.lose_all_and_free(LossReason::Disconnected { for_ });
    if holds == 0 {
        return;
    }
    if for_.is_zero() {
        tracing::warn!(target: "keylatch::zookeeper", holds, "connection lost, the session may expire: holds lost");
    } else {
        tracing::warn!(target: "keylatch::zookeeper", holds, ?for_, "disconnected longer than the bound: holds lost");
    }
}
