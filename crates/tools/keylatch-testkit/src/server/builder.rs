//! The options of a server to start: persistence, replication, TLS, ACL users, extra
//! arguments.

use super::*;

/// Options for a [`RedisServer`]; made by [`RedisServer::builder`].
#[derive(Debug, Clone, Default)]
pub struct RedisServerBuilder {
    pub(super) enable_debug: bool,
    pub(super) args: Vec<String>,
    pub(super) tls: Option<TlsSettings>,
    pub(super) password: Option<Secret>,
    pub(super) config_lines: Vec<Secret>,
    pub(super) sentinel: bool,
    /// For a Redis Cluster node: its cluster configuration file (in its directory).
    pub(super) cluster_config_file: Option<String>,
}

impl RedisServerBuilder {
    /// Allows the `DEBUG` command (passes `--enable-debug-command yes`,
    /// which Redis 7+ needs; older servers refuse to start with it).
    pub fn enable_debug(mut self, yes: bool) -> Self {
        self.enable_debug = yes;
        self
    }

    /// Appends one extra raw command-line argument for `redis-server`, e.g.
    /// `.arg("--maxmemory").arg("64mb")`. It comes after the testkit's own
    /// arguments, so it can override them (but don't change the port or bind
    /// address: the testkit must be able to reach the server).
    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.args.push(a.into());
        self
    }

    /// Serves TLS only, on the certificates of `files` (`--tls-port`, plaintext port
    /// off). The testkit reaches the server through a unix socket in its directory;
    /// [`RedisServer::url`] is a `rediss://` URL. `files` must outlive the server.
    pub fn tls(mut self, files: &TlsFiles, auth: ClientAuth) -> Self {
        self.tls = Some(TlsSettings {
            cert: files.server_cert_file(),
            key: files.server_key_file(),
            ca: files.ca_file(),
            auth,
        });
        self
    }

    /// Requires `password` for the default user (`requirepass`), and uses it to log in
    /// to a primary (`masterauth`). It goes to the server in a configuration file that
    /// only this user can read, never on the command line; [`RedisServer::cli`] logs
    /// in with it.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(Secret(password.into()));
        self
    }

    /// Adds one line to the server's configuration file (for settings that must not
    /// show in the process arguments, or that a sentinel rewrites, such as
    /// `sentinel monitor …`).
    pub fn config_line(mut self, line: impl Into<String>) -> Self {
        self.config_lines.push(Secret(line.into()));
        self
    }

    /// Runs the process as a Redis Sentinel (`--sentinel`); its monitors come from
    /// [`config_line`](Self::config_line).
    pub fn sentinel(mut self, yes: bool) -> Self {
        self.sentinel = yes;
        self
    }

    /// Makes the server fit to be a Redis Cluster node whose cluster configuration file is
    /// `config_file` (the caller passes `--cluster-enabled` etc. with [`arg`](Self::arg)):
    /// its port is below 55536 with `port + 10000` (the cluster bus) free and reserved too,
    /// and [`RedisServer::restart`] keeps `config_file`, so the node keeps its identity.
    pub(crate) fn cluster_node(mut self, config_file: impl Into<String>) -> Self {
        self.cluster_config_file = Some(config_file.into());
        self
    }

    /// Reserves a free port for a server of these options.
    pub(super) fn reserve_port(&self) -> io::Result<u16> {
        if self.cluster_config_file.is_some() {
            reserve_free_cluster_port()
        } else {
            reserve_free_port()
        }
    }

    /// Releases what [`reserve_port`](Self::reserve_port) reserved.
    pub(super) fn release_port(&self, port: u16) {
        release_port(port);
        if self.cluster_config_file.is_some() {
            release_port(port + CLUSTER_BUS_OFFSET);
        }
    }

    /// Starts the server on a free loopback port and waits until it answers
    /// `PING`.
    ///
    /// Retries with a new port a few times if the port was taken meanwhile.
    /// Fails with [`io::ErrorKind::NotFound`] if `redis-server` is not
    /// installed, and with an error quoting the server's log if it does not
    /// come up within 10 seconds.
    pub fn start(self) -> io::Result<RedisServer> {
        start_with(self, &server_program())
    }

    /// Whether the server needs a configuration file in its directory.
    pub(super) fn needs_config_file(&self) -> bool {
        self.password.is_some() || !self.config_lines.is_empty() || self.sentinel
    }

    /// Writes the configuration file, unless it exists (a sentinel rewrites its own).
    pub(super) fn write_config_file(&self, dir: &Path) -> io::Result<()> {
        let path = dir.join(CONFIG_FILE);
        if !self.needs_config_file() || path.exists() {
            return Ok(());
        }
        let mut text = String::new();
        if let Some(Secret(password)) = &self.password {
            let quoted = quote(password);
            text.push_str(&format!("requirepass {quoted}\nmasterauth {quoted}\n"));
        }
        for Secret(line) in &self.config_lines {
            text.push_str(line);
            text.push('\n');
        }
        write_secret(&path, &text)
    }

    /// How the testkit reaches a server of these options on `port`.
    pub(super) fn target(&self, port: u16, dir: &Path) -> Target {
        if self.tls.is_some() {
            Target::Unix(dir.join(UNIX_SOCKET))
        } else {
            Target::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        }
    }

    pub(super) fn command_args(&self, port: u16, dir: &Path) -> Vec<String> {
        let mut args = Vec::new();
        if self.needs_config_file() {
            args.push(dir.join(CONFIG_FILE).to_string_lossy().into_owned());
        }
        if self.sentinel {
            args.push("--sentinel".to_owned());
        }
        let port = port.to_string();
        let dir_text = dir.to_string_lossy();
        let log = dir.join(LOG_FILE);
        let socket = dir.join(UNIX_SOCKET);
        let mut pairs: Vec<(&str, std::borrow::Cow<'_, str>)> = Vec::new();
        match &self.tls {
            None => pairs.push(("--port", port.as_str().into())),
            Some(tls) => {
                pairs.extend([
                    ("--port", "0".into()),
                    ("--tls-port", port.as_str().into()),
                    ("--tls-cert-file", tls.cert.to_string_lossy()),
                    ("--tls-key-file", tls.key.to_string_lossy()),
                    ("--tls-ca-cert-file", tls.ca.to_string_lossy()),
                    ("--tls-auth-clients", tls.auth.redis_value().into()),
                    ("--unixsocket", socket.to_string_lossy()),
                    ("--unixsocketperm", "700".into()),
                ]);
            }
        }
        pairs.push(("--bind", HOST.into()));
        if !self.sentinel {
            // A sentinel has no data set to save.
            pairs.extend([("--save", "".into()), ("--appendonly", "no".into())]);
        }
        pairs.extend([
            ("--dir", dir_text),
            ("--daemonize", "no".into()),
            ("--logfile", log.to_string_lossy()),
        ]);
        for (name, value) in pairs {
            args.extend([name.to_owned(), value.into_owned()]);
        }
        if self.enable_debug {
            args.extend(["--enable-debug-command".to_owned(), "yes".to_owned()]);
        }
        args.extend(self.args.iter().cloned());
        args
    }
}
