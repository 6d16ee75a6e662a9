//! TLS for `zk+tls://` (ZooKeeper's `secureClientPort`): the CA and client certificate files
//! of a [`ZkConfig`](crate::ZkConfig), read and checked at connect into [`TlsMaterial`], then
//! handed to zookeeper-client's rustls support; and, when a TLS connection fails, one handshake
//! of our own that tells a refused certificate or a plaintext port from an unreachable server
//! (zookeeper-client retries until its deadline and keeps only "connection lost").
//!
//! May import: keylatch-core, zookeeper-client, rustls (no other file of this crate).

use std::path::{Path, PathBuf};
#[cfg(feature = "tls")]
use std::sync::Arc;
#[cfg(feature = "tls")]
use std::time::Duration;

use keylatch_core::secrecy::SecretString;
use keylatch_core::{Error, Result};
#[cfg(feature = "tls")]
use keylatch_core::{StoreError, secrecy::ExposeSecret};

/// The TLS files of a ZooKeeper client, as configured (paths only: nothing secret to show).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TlsPaths {
    /// PEM CA certificates the server's certificate is verified against.
    pub(crate) ca_file: Option<PathBuf>,
    /// A PEM client certificate and its private key (for `ssl.clientAuth=need`).
    pub(crate) client_cert: Option<(PathBuf, PathBuf)>,
}

/// The contents of the TLS files, checked. (No `Debug`: it holds the private key.) Never made
/// without the `tls` feature.
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub(crate) struct TlsMaterial {
    ca: String,
    identity: Option<(String, SecretString)>,
}

fn read(field: &'static str, path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::TlsFile {
        field,
        path: path.to_owned(),
        source,
    })
}

/// Reads and checks the TLS files for a URL: `None` for `zk://` (which takes no TLS files).
///
/// # Errors
/// [`Error::InvalidConfig`] for TLS files with `zk://`, `zk+tls://` without the `tls`
/// feature or without a CA, or a file without the PEM it should hold; [`Error::TlsFile`]
/// for a file that cannot be read; [`Error::InvalidUrl`] for a host that is no TLS server
/// name (`url` is the redacted URL).
pub(crate) fn load(
    paths: &TlsPaths,
    url_tls: bool,
    hosts: &str,
    url: &str,
) -> Result<Option<TlsMaterial>> {
    let invalid = |field, reason| Err(Error::InvalidConfig { field, reason });
    if !url_tls {
        if *paths != TlsPaths::default() {
            return invalid(
                "tls",
                "TLS files are set but the URL is zk:// (use zk+tls://)",
            );
        }
        return Ok(None);
    }
    if !cfg!(feature = "tls") {
        return invalid(
            "url",
            "TLS (zk+tls://) needs the `tls` feature of keylatch-zookeeper (`zookeeper-tls` of \
             keylatch), which this build leaves out",
        );
    }
    let Some(ca_file) = &paths.ca_file else {
        return invalid(
            "tls.ca_file",
            "zk+tls:// needs the CA to verify the server's certificate against",
        );
    };
    let material = TlsMaterial {
        ca: read("tls.ca_file", ca_file)?,
        identity: match &paths.client_cert {
            None => None,
            Some((cert, key)) => Some((
                read("tls.cert_file", cert)?,
                SecretString::from(read("tls.key_file", key)?),
            )),
        },
    };
    #[cfg(feature = "tls")]
    {
        material.check()?;
        check_hosts(hosts, url)?;
    }
    let _ = (hosts, url);
    Ok(Some(material))
}

#[cfg(feature = "tls")]
fn check_hosts(hosts: &str, url: &str) -> Result<()> {
    for host in hosts.split(',') {
        let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
        if rustls::pki_types::ServerName::try_from(name).is_err() {
            return Err(Error::InvalidUrl {
                url: url.to_owned(),
                source: StoreError::new(crate::url::UrlError::server_name()),
            });
        }
    }
    Ok(())
}

/// Installs rustls's process-wide crypto provider (ring) if none is installed yet:
/// zookeeper-client's TLS asks rustls for the process default.
#[cfg(feature = "tls")]
pub(crate) fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may have installed one meanwhile: either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(feature = "tls")]
impl TlsMaterial {
    /// zookeeper-client's TLS options.
    pub(crate) fn options(
        &self,
    ) -> std::result::Result<zookeeper_client::TlsOptions, zookeeper_client::Error> {
        let options = zookeeper_client::TlsOptions::new().with_pem_ca(&self.ca)?;
        match &self.identity {
            None => Ok(options),
            Some((cert, key)) => options.with_pem_identity(cert, key.expose_secret()),
        }
    }

    fn check(&self) -> Result<()> {
        let invalid = |field, reason| Err(Error::InvalidConfig { field, reason });
        if zookeeper_client::TlsOptions::new()
            .with_pem_ca(&self.ca)
            .is_err()
        {
            return invalid("tls.ca_file", "no PEM CA certificate in it");
        }
        if self.options().is_err() {
            return invalid(
                "tls.key_file",
                "the client certificate and key are no PEM certificate and private key",
            );
        }
        Ok(())
    }

    /// A rustls configuration like zookeeper-client's, for [`diagnose`].
    fn rustls_config(&self) -> Option<Arc<rustls::ClientConfig>> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.ca.as_bytes()) {
            roots.add(cert.ok()?).ok()?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .ok()?
            .with_root_certificates(roots);
        let config = match &self.identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .ok()?;
                let key = PrivateKeyDer::from_pem_slice(key.expose_secret().as_bytes()).ok()?;
                builder.with_client_auth_cert(chain, key).ok()?
            }
        };
        Some(Arc::new(config))
    }
}

/// Why a TLS handshake with a ZooKeeper server failed (the source of an [`Error::Connect`]).
#[cfg(feature = "tls")]
#[derive(Debug, thiserror::Error)]
#[error("the server did not answer the TLS handshake (a plaintext port?)")]
pub(crate) struct NotTls;

/// After a failed `zk+tls://` connect: one TLS handshake per host (each bounded by
/// `timeout`) that says why — the server's certificate (or ours) was refused
/// ([`Error::TlsVerification`]), or the server speaks no TLS ([`Error::Connect`] with
/// [`NotTls`]). `None` when no handshake says more than the connect's own error.
#[cfg(feature = "tls")]
pub(crate) async fn diagnose(
    material: Arc<TlsMaterial>,
    hosts: String,
    timeout: Duration,
    url: String,
) -> Option<Error> {
    let probed = tokio::task::spawn_blocking(move || {
        let config = material.rustls_config()?;
        hosts
            .split(',')
            .find_map(|host| probe(&config, host, timeout))
    });
    match probed.await.ok()? {
        Some(Probe::Refused(err)) => Some(Error::TlsVerification {
            url,
            source: StoreError::new(err),
        }),
        Some(Probe::NotTls) => Some(Error::Connect {
            url,
            source: StoreError::new(NotTls),
        }),
        None => None,
    }
}

#[cfg(feature = "tls")]
enum Probe {
    Refused(rustls::Error),
    NotTls,
}

/// One handshake with `host` (`name:port`): `None` when it succeeds, cannot be made, or fails
/// for another reason.
#[cfg(feature = "tls")]
fn probe(config: &Arc<rustls::ClientConfig>, host: &str, timeout: Duration) -> Option<Probe> {
    use std::io::ErrorKind;
    use std::net::{TcpStream, ToSocketAddrs};
    let (name, port) = host.rsplit_once(':')?;
    let server = rustls::pki_types::ServerName::try_from(name.to_owned()).ok()?;
    let addr = (name, port.parse::<u16>().ok()?)
        .to_socket_addrs()
        .ok()?
        .next()?;
    let mut socket = TcpStream::connect_timeout(&addr, timeout).ok()?;
    socket.set_read_timeout(Some(timeout)).ok()?;
    socket.set_write_timeout(Some(timeout)).ok()?;
    let mut tls = rustls::ClientConnection::new(config.clone(), server).ok()?;
    while tls.is_handshaking() {
        let Err(err) = tls.complete_io(&mut socket) else {
            continue;
        };
        if let Some(err) = err
            .get_ref()
            .and_then(|e| e.downcast_ref::<rustls::Error>())
        {
            return classify(err);
        }
        return match err.kind() {
            ErrorKind::UnexpectedEof
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted => Some(Probe::NotTls),
            _ => None,
        };
    }
    None
}

#[cfg(feature = "tls")]
fn classify(err: &rustls::Error) -> Option<Probe> {
    use rustls::AlertDescription as Alert;
    match err {
        rustls::Error::InvalidCertificate(_)
        | rustls::Error::NoCertificatesPresented
        | rustls::Error::AlertReceived(
            Alert::BadCertificate
            | Alert::CertificateRequired
            | Alert::UnknownCA
            | Alert::CertificateUnknown
            | Alert::CertificateExpired
            | Alert::CertificateRevoked
            | Alert::UnsupportedCertificate,
        ) => Some(Probe::Refused(err.clone())),
        rustls::Error::InvalidMessage(_) => Some(Probe::NotTls),
        _ => None,
    }
}
