//! Test certificates for TLS servers, generated on the spot (no files from elsewhere).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// A private certificate authority with a server certificate (for `localhost`,
/// `127.0.0.1` and `::1`) and a client certificate it signed, written as PEM files
/// to a temporary directory that is removed on drop.
///
/// Keep it alive for as long as servers or clients use its files.
///
/// ```no_run
/// use keylatch_testkit::{ClientAuth, RedisServer, TlsFiles};
///
/// let tls = TlsFiles::generate()?;
/// let server = RedisServer::builder().tls(&tls, ClientAuth::Optional).start()?;
/// assert!(server.url().starts_with("rediss://"));
/// println!("CA file: {}", tls.ca_file().display());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct TlsFiles {
    dir: tempfile::TempDir,
}

const CA: &str = "ca.crt";
const SERVER_CERT: &str = "server.crt";
const SERVER_KEY: &str = "server.key";
const CLIENT_CERT: &str = "client.crt";
const CLIENT_KEY: &str = "client.key";

impl TlsFiles {
    /// Generates a new CA and the two certificates it signs.
    pub fn generate() -> io::Result<TlsFiles> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("keylatch-tls-{}-", std::process::id()))
            .tempdir()?;
        let ca_key = KeyPair::generate().map_err(cert_error)?;
        let mut ca_params = CertificateParams::new(Vec::new()).map_err(cert_error)?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "keylatch test CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca_params, ca_key).map_err(cert_error)?;
        write_secret(&dir.path().join(CA), &ca.pem())?;

        for (cert, key, name, usage) in [
            (
                SERVER_CERT,
                SERVER_KEY,
                "keylatch test server",
                ExtendedKeyUsagePurpose::ServerAuth,
            ),
            (
                CLIENT_CERT,
                CLIENT_KEY,
                "keylatch test client",
                ExtendedKeyUsagePurpose::ClientAuth,
            ),
        ] {
            let leaf_key = KeyPair::generate().map_err(cert_error)?;
            let mut params = CertificateParams::new(vec![
                "localhost".to_owned(),
                "127.0.0.1".to_owned(),
                "::1".to_owned(),
            ])
            .map_err(cert_error)?;
            params.distinguished_name.push(DnType::CommonName, name);
            params.key_usages = vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyEncipherment,
            ];
            params.extended_key_usages = vec![usage];
            params.use_authority_key_identifier_extension = true;
            let leaf = params.signed_by(&leaf_key, &ca).map_err(cert_error)?;
            write_secret(&dir.path().join(cert), &leaf.pem())?;
            write_secret(&dir.path().join(key), &leaf_key.serialize_pem())?;
        }
        Ok(TlsFiles { dir })
    }

    /// The CA certificate that signed both certificates (PEM).
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join(CA)
    }

    /// The server's certificate (PEM).
    pub fn server_cert_file(&self) -> PathBuf {
        self.dir.path().join(SERVER_CERT)
    }

    /// The server's private key (PEM).
    pub fn server_key_file(&self) -> PathBuf {
        self.dir.path().join(SERVER_KEY)
    }

    /// A client certificate, for mutual TLS (PEM).
    pub fn client_cert_file(&self) -> PathBuf {
        self.dir.path().join(CLIENT_CERT)
    }

    /// The client certificate's private key (PEM).
    pub fn client_key_file(&self) -> PathBuf {
        self.dir.path().join(CLIENT_KEY)
    }
}

/// Whether a TLS server asks its clients for a certificate (`tls-auth-clients`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// Clients need no certificate.
    No,
    /// A client certificate is checked when one is sent.
    Optional,
    /// Mutual TLS: a client without a certificate signed by the CA is refused.
    Required,
}

impl ClientAuth {
    pub(crate) fn redis_value(self) -> &'static str {
        match self {
            ClientAuth::No => "no",
            ClientAuth::Optional => "optional",
            ClientAuth::Required => "yes",
        }
    }
}

fn cert_error(e: rcgen::Error) -> io::Error {
    io::Error::other(format!("cannot generate a test certificate: {e}"))
}

/// Writes `text` to `path`, readable by this user only.
pub(crate) fn write_secret(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write;
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(text.as_bytes())
}
