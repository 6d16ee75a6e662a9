//! TLS settings: which CA to trust, the client certificate, and whether to verify at all. Read
//! by the configuration, used by the transport.

use std::path::PathBuf;

#[cfg(feature = "tls")]
use deadpool_redis::redis;
#[cfg(feature = "tls")]
use keylatch_core::{Error, Result};

/// TLS settings, used for `rediss://` and `rediss+sentinel://` URLs (and, by the facade, for
/// `zk+tls://`: the CA and client certificate of ZooKeeper's TLS port).
///
/// By default the server's certificate is verified against the system's trusted roots. Set
/// [`ca_file`](TlsConfig::ca_file) to verify it against your own CA instead, and
/// [`cert_file`](TlsConfig::cert_file) with [`key_file`](TlsConfig::key_file) for mutual TLS.
/// The environment variables `KEYLATCH_TLS_CA`, `KEYLATCH_TLS_CERT` and `KEYLATCH_TLS_KEY`
/// set them in [`Config::from_env`](crate::Config::from_env).
#[derive(Clone, Default, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
#[non_exhaustive]
pub struct TlsConfig {
    /// A PEM file of the CA certificates to trust instead of the system's roots
    /// (redis-cli's `--cacert`).
    pub ca_file: Option<PathBuf>,
    /// A PEM client certificate, for servers that require one (`--cert`).
    pub cert_file: Option<PathBuf>,
    /// The PEM private key of [`cert_file`](TlsConfig::cert_file) (`--key`).
    pub key_file: Option<PathBuf>,
    /// **Dangerous**: accept any server certificate, unverified (`--insecure`). Anyone on the
    /// path to Redis can then read and change every command, credentials included. For tests
    /// against self-signed servers only.
    pub insecure: bool,
}

impl TlsConfig {
    /// Whether any file is set (a plain `redis://` URL with them is refused).
    pub(crate) fn has_files(&self) -> bool {
        self.ca_file.is_some() || self.cert_file.is_some() || self.key_file.is_some()
    }

    /// Reads the files into redis-rs's certificate set.
    #[cfg(feature = "tls")]
    pub(crate) fn certificates(&self) -> Result<Option<redis::TlsCertificates>> {
        if !self.has_files() {
            return Ok(None);
        }
        let read = |field: &'static str, path: &std::path::Path| {
            std::fs::read(path).map_err(|source| Error::TlsFile {
                field,
                path: path.to_owned(),
                source,
            })
        };
        let client_tls = match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: read("tls.cert_file", cert)?,
                client_key: read("tls.key_file", key)?,
            }),
            (None, None) => None,
            _ => {
                return Err(Error::InvalidConfig {
                    field: "tls",
                    reason: "a client certificate needs both cert_file and key_file",
                });
            }
        };
        let root_cert = self
            .ca_file
            .as_deref()
            .map(|path| read("tls.ca_file", path))
            .transpose()?;
        Ok(Some(redis::TlsCertificates {
            client_tls,
            root_cert,
        }))
    }
}
