//! The connection settings, from the flags over the environment, and how they reach the
//! processes the CLI starts.

use keylatch::Config;
use keylatch::secrecy::ExposeSecret;

use crate::cli::ConnectionArgs;
use crate::failure::{EX_USAGE, Failure};

/// Variables that carry where Redis is or a password: a child keylatch is given them afresh
/// from the configuration ([`pass_to`]).
pub const SECRET_VARS: [&str; 6] = [
    "KEYLATCH_URL",
    "KEYLATCH_REDIS_URL",
    "REDIS_URL",
    "KEYLATCH_REDIS_PASSWORD",
    "KEYLATCH_SENTINEL_PASSWORD",
    "KEYLATCH_SENTINEL_USERNAME",
];

/// Every variable the client configuration is read from ([`Config::from_env`]): where Redis
/// is, who logs in and how, the TLS files and the client's tuning. A command run under a lock
/// inherits none of them ([`strip_client_vars`]).
pub const CLIENT_VARS: &[&str] = Config::ENV_VARS;

/// Keeps keylatch's own settings out of a command's environment: every variable in
/// [`CLIENT_VARS`] and, so that one added later cannot leak either, every other `KEYLATCH_*`
/// variable keylatch was given. The caller sets what the command is meant to get afterwards.
pub fn strip_client_vars(command: &mut tokio::process::Command) {
    for &var in CLIENT_VARS {
        command.env_remove(var);
    }
    for (name, _) in std::env::vars_os() {
        if name.as_encoded_bytes().starts_with(b"KEYLATCH_") {
            command.env_remove(name);
        }
    }
}

/// The client configuration: [`Config::from_env`], then the flags.
pub fn config(args: &ConnectionArgs) -> Result<Config, Failure> {
    let mut config = Config::from_env();
    if let Some(url) = args.redis.first() {
        if url_has_password(url) {
            eprintln!(
                "keylatch: warning: the password in --redis is visible to every local user \
                 (ps, /proc); use KEYLATCH_REDIS_PASSWORD or --password-file"
            );
        }
        config.url = url.as_str().into();
    }
    for url in args.redis.iter().skip(1) {
        if url_has_password(url) {
            eprintln!(
                "keylatch: warning: the password in --redis is visible to every local user \
                 (ps, /proc); use KEYLATCH_REDIS_PASSWORD or --password-file"
            );
        }
    }
    if args.tls {
        config.url = with_tls(config.url.expose_secret()).into();
    }
    if let Some(user) = &args.user {
        config.username = Some(user.clone());
    }
    if let Some(path) = &args.password_file {
        let text = std::fs::read_to_string(path).map_err(|err| {
            Failure::new(
                EX_USAGE,
                format!("cannot read the password file {}: {err}", path.display()),
            )
        })?;
        let password = text
            .lines()
            .next()
            .unwrap_or_default()
            .trim_end_matches('\r');
        if password.is_empty() {
            return Err(Failure::new(
                EX_USAGE,
                format!("the password file {} is empty", path.display()),
            ));
        }
        config.password = Some(password.into());
    }
    if let Some(path) = &args.cacert {
        config.tls.ca_file = Some(path.clone());
    }
    if let Some(path) = &args.cert {
        config.tls.cert_file = Some(path.clone());
    }
    if let Some(path) = &args.key {
        config.tls.key_file = Some(path.clone());
    }
    if let Some(n) = args.replicas {
        config.replicas = n;
    }
    if let Some(timeout) = args.replicas_timeout {
        config.replicas_timeout = timeout;
    }
    config.tls.insecure |= args.insecure;
    if config.tls.insecure {
        eprintln!(
            "keylatch: warning: --insecure: the server's TLS certificate is not verified; \
             anyone on the network path can impersonate it"
        );
    }
    Ok(config)
}

/// `url` with TLS: `redis://` becomes `rediss://`, `redis+sentinel://` `rediss+sentinel://`,
/// `redis+cluster://` `rediss+cluster://`, `zk://` `zk+tls://`.
fn with_tls(url: &str) -> String {
    for scheme in ["redis://", "redis+sentinel://", "redis+cluster://"] {
        if url.starts_with(scheme) {
            return format!("{}s{}", &scheme[..5], &url[5..]);
        }
    }
    if let Some(rest) = url.strip_prefix("zk://") {
        return format!("zk+tls://{rest}");
    }
    url.to_owned()
}

/// The configuration for each `--redis` URL given (the first one's is `config`): the same
/// settings, another server. For a RedLock.
pub fn configs_per_server(args: &ConnectionArgs, config: &Config) -> Vec<Config> {
    args.redis
        .iter()
        .map(|url| {
            let mut each = config.clone();
            each.url = if args.tls {
                with_tls(url).into()
            } else {
                url.as_str().into()
            };
            each
        })
        .collect()
}

/// Whether a URL carries a password (userinfo or a `password`/`pass` parameter).
fn url_has_password(url: &str) -> bool {
    keylatch::redact_url(url).contains("***")
}

/// Passes the connection settings to a child keylatch process through its environment (never
/// its arguments, which every local user can read).
pub fn pass_to(config: &Config, command: &mut tokio::process::Command) {
    for var in SECRET_VARS {
        command.env_remove(var);
    }
    command.env("KEYLATCH_REDIS_URL", config.url.expose_secret());
    let pairs = [
        ("KEYLATCH_REDIS_USERNAME", config.username.as_deref()),
        (
            "KEYLATCH_REDIS_PASSWORD",
            config.password.as_ref().map(ExposeSecret::expose_secret),
        ),
        (
            "KEYLATCH_SENTINEL_USERNAME",
            config.sentinel_username.as_deref(),
        ),
        (
            "KEYLATCH_SENTINEL_PASSWORD",
            config
                .sentinel_password
                .as_ref()
                .map(ExposeSecret::expose_secret),
        ),
    ];
    for (var, value) in pairs {
        if let Some(value) = value {
            command.env(var, value);
        }
    }
    let files = [
        ("KEYLATCH_TLS_CA", &config.tls.ca_file),
        ("KEYLATCH_TLS_CERT", &config.tls.cert_file),
        ("KEYLATCH_TLS_KEY", &config.tls.key_file),
    ];
    for (var, value) in files {
        if let Some(path) = value {
            command.env(var, path);
        }
    }
    if config.tls.insecure {
        command.arg("--insecure");
    }
    command.env("KEYLATCH_REPLICAS", config.replicas.to_string());
    command.env(
        "KEYLATCH_REPLICAS_TIMEOUT",
        format!("{}ms", config.replicas_timeout.as_millis()),
    );
}
