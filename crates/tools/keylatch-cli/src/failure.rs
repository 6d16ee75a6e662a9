//! Exit codes and the error that carries one.

use std::fmt::Write;

/// Bad arguments (sysexits `EX_USAGE`).
pub const EX_USAGE: u8 = 64;
/// Redis cannot be reached (`EX_UNAVAILABLE`).
pub const EX_UNAVAILABLE: u8 = 69;
/// Anything else that went wrong (`EX_SOFTWARE`).
pub const EX_SOFTWARE: u8 = 70;
/// The lock was not acquired within `--wait` (`EX_TEMPFAIL`).
pub const EX_TEMPFAIL: u8 = 75;
/// The lock was lost while the command ran.
pub const EX_LOST: u8 = 76;
/// Redis refused the credentials, or denied a command, key or channel to the user
/// (`EX_NOPERM`).
pub const EX_NOPERM: u8 = 77;

/// A failure: the message for stderr and the exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl From<keylatch::Error> for Failure {
    fn from(err: keylatch::Error) -> Failure {
        use keylatch::Error as E;
        let code = match &err {
            E::InvalidName { .. }
            | E::InvalidLease { .. }
            | E::InvalidConfig { .. }
            | E::InvalidUrl { .. }
            | E::InvalidSentinelUrl { .. }
            | E::InvalidClusterUrl { .. }
            | E::TlsFile { .. }
            | E::InvalidPermits { .. }
            | E::InvalidCount { .. }
            | E::Codec { .. }
            | E::Unsupported { .. } => EX_USAGE,
            E::Connect { .. }
            | E::Connection(_)
            | E::Timeout { .. }
            | E::Pool(_)
            | E::ReadOnly(_)
            | E::NotReplicated { .. }
            | E::NoQuorum { .. }
            | E::ClusterUnavailable(_)
            | E::TlsVerification { .. } => EX_UNAVAILABLE,
            E::Auth(_) | E::NoPermission { .. } => EX_NOPERM,
            _ => EX_SOFTWARE,
        };
        // The message, then its causes.
        let mut message = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(cause) = source {
            let text = cause.to_string();
            // Some causes repeat their own source in their message: print each text once.
            if !message.contains(&text) {
                let _ = write!(message, ": {text}");
            }
            source = cause.source();
        }
        Failure { code, message }
    }
}
