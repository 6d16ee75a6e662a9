//! A standalone ZooKeeper server that serves clients over TLS only: `secureClientPort` and no
//! `clientPort`, Netty's connection factory, its certificate and CA read as PEM
//! (`ssl.keyStore.type=PEM`, ZooKeeper 3.8), and Debian's Netty jars that the server jar's
//! manifest leaves out (`netty-codec`, `netty-resolver`) added to the class path.

use super::*;
use crate::{ClientAuth, TlsFiles};

/// Netty jars the TLS handler needs beyond those the server jar's manifest lists (without
/// them every handshake fails with `NoClassDefFoundError: io/netty/handler/codec/…`).
pub(super) const NETTY_JARS: [&str; 2] = [
    "/usr/share/java/netty-codec.jar",
    "/usr/share/java/netty-resolver.jar",
];
/// The server's certificate and key in one PEM file (its `ssl.keyStore`), in its directory.
const KEY_STORE: &str = "server.pem";
/// The CA its clients' certificates are checked against (its `ssl.trustStore`).
const TRUST_STORE: &str = "ca.crt";

/// The `zoo.cfg` lines of a TLS-only server on `port`.
pub(super) fn config(dir: &Path, port: u16, auth: ClientAuth) -> String {
    let client_auth = match auth {
        ClientAuth::No => "none",
        ClientAuth::Optional => "want",
        ClientAuth::Required => "need",
    };
    format!(
        "secureClientPort={port}\n\
         secureClientPortAddress={HOST}\n\
         serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
         ssl.keyStore.location={}\n\
         ssl.keyStore.type=PEM\n\
         ssl.trustStore.location={}\n\
         ssl.trustStore.type=PEM\n\
         ssl.clientAuth={client_auth}\n",
        dir.join(KEY_STORE).display(),
        dir.join(TRUST_STORE).display(),
    )
}

/// Whether the log written since `from` shows the server bound to `port` and serving.
pub(super) fn serving(dir: &Path, from: u64, port: u16) -> bool {
    let Ok(log) = fs::read(dir.join(LOG_FILE)) else {
        return false;
    };
    let from = usize::try_from(from).unwrap_or(usize::MAX).min(log.len());
    let log = String::from_utf8_lossy(&log[from..]);
    // Netty binds, then the server loads its data and starts its request processors.
    log.contains(&format!("bound to port {port}")) && log.contains("PrepRequestProcessor")
}

impl ZooKeeperServer {
    /// Starts a standalone server that serves clients over TLS only, with the server
    /// certificate of `tls` (for `127.0.0.1` and `localhost`), and waits until it serves. Its
    /// [`port`](Self::port) is the secure port; there is no plain one, so four-letter words
    /// and [`mode`](Self::mode) get no answer. [`restart`](Self::restart), [`pause`](Self::pause)
    /// and [`kill`](Self::kill) work as for a plain server (it keeps copies of the files).
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::NotFound`] if ZooKeeper or Debian's Netty jars are not installed; as
    /// [`start`](Self::start) otherwise.
    pub fn start_tls(tls: &TlsFiles, auth: ClientAuth) -> io::Result<ZooKeeperServer> {
        if !zookeeper_available() {
            return Err(not_installed());
        }
        if let Some(jar) = NETTY_JARS.iter().find(|jar| !Path::new(jar).is_file()) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{jar} is missing: ZooKeeper's TLS port needs Netty (Debian's libnetty-java)"
                ),
            ));
        }
        let mut key_store = fs::read_to_string(tls.server_key_file())?;
        key_store.push_str(&fs::read_to_string(tls.server_cert_file())?);
        let mut last_err = None;
        for _ in 0..START_ATTEMPTS {
            let port = reserve_free_port()?;
            let mut server = Self::create(port, None, &[], vec![port])?;
            server.secure = Some(auth);
            crate::tls::write_secret(&server.dir.join(KEY_STORE), &key_store)?;
            fs::copy(tls.ca_file(), server.dir.join(TRUST_STORE))?;
            server.write_config(&[])?;
            match launch(&server.dir, server.main_class()) {
                Ok(launched) => {
                    server.adopt(launched);
                    return Ok(server);
                }
                Err(LaunchError::PortTaken(e)) => last_err = Some(e),
                Err(LaunchError::Fatal(e)) => return Err(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("could not start ZooKeeper")))
    }
}
