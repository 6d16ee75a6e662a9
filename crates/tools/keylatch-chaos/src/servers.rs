//! The servers of a run: a redis-server (or a ZooKeeper JVM) in its namespace that the
//! nemesis may stop, kill and start again, and the helper subcommands the harness runs inside
//! namespaces. Imports the network's nodes and the process helpers.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Child;

use crate::HarnessError;
use crate::net::Node;
use crate::procs::{self, Cleanup};

/// A redis-server in its namespace, which the nemesis may stop, kill and start again; or,
/// made by [`Redis::zookeeper`], a ZooKeeper server (`zk3`), known up once it serves.
pub struct Redis {
    /// Its namespace and address.
    pub node: Node,
    program: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
    /// Its pid while it runs.
    pub pid: i32,
    /// Extra environment (the clock shift's preload library).
    pub env: Vec<(String, String)>,
    port: u16,
    /// A ZooKeeper server's log (its stdout and stderr); `None` for a redis-server.
    zookeeper_log: Option<PathBuf>,
}

/// How long `zk-srvr --wait` waits for a ZooKeeper server to serve.
pub const SERVE_WAIT: Duration = Duration::from_secs(40);

/// The service the sentinels monitor.
pub const SERVICE: &str = "keylatch";

impl Redis {
    /// A server on `node`, its data under `dir`; `persistence` is the AOF's fsync policy.
    pub fn new(node: Node, program: &Path, dir: &Path, persistence: Option<&str>) -> Redis {
        let dir = dir.join(&node.name);
        let _ = std::fs::create_dir_all(&dir);
        let mut args: Vec<String> = [
            "--bind",
            &node.ip,
            "--port",
            "6379",
            "--protected-mode",
            "no",
            "--daemonize",
            "no",
            "--dir",
            &dir.to_string_lossy(),
            "--logfile",
            "redis.log",
            "--save",
            "",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        match persistence {
            Some(fsync) => {
                args.extend(["--appendonly", "yes", "--appendfsync", fsync].map(str::to_owned))
            }
            None => args.extend(["--appendonly", "no"].map(str::to_owned)),
        }
        Redis {
            node,
            program: program.to_owned(),
            args,
            child: None,
            pid: 0,
            env: Vec::new(),
            port: 6379,
            zookeeper_log: None,
        }
    }

    /// A ZooKeeper server on `node`: `program args` (the JVM), listening for clients on
    /// `port`, its output appended to `log`.
    pub fn zookeeper(
        node: Node,
        program: &Path,
        args: Vec<String>,
        port: u16,
        log: PathBuf,
    ) -> Redis {
        Redis {
            node,
            program: program.to_owned(),
            args,
            child: None,
            pid: 0,
            env: Vec::new(),
            port,
            zookeeper_log: Some(log),
        }
    }

    /// The same server started as a replica of `primary_ip`.
    pub fn replica_of(mut self, primary_ip: &str) -> Redis {
        self.args.extend([
            "--replicaof".to_owned(),
            primary_ip.to_owned(),
            "6379".to_owned(),
        ]);
        self
    }

    /// The same server as a Redis Cluster node (node timeout 1 s, bus port 16379, full
    /// synchronisations without delay); its node file survives a kill.
    pub fn cluster_node(mut self) -> Redis {
        self.args.extend(
            [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "1000",
                "--repl-diskless-sync-delay",
                "0",
            ]
            .map(str::to_owned),
        );
        self
    }

    /// A sentinel on `node` (port 26379) monitoring the primary at `primary_ip` (quorum 2,
    /// down after 1 s), its configuration file under `dir`.
    ///
    /// # Errors
    /// The configuration file cannot be written.
    pub fn sentinel(
        node: Node,
        program: &Path,
        dir: &Path,
        primary_ip: &str,
    ) -> Result<Redis, HarnessError> {
        let dir = dir.join(&node.name);
        let _ = std::fs::create_dir_all(&dir);
        let conf = dir.join("sentinel.conf");
        let text = format!(
            "bind {ip}\nport 26379\nprotected-mode no\ndaemonize no\ndir {dir}\n\
             logfile sentinel.log\n\
             sentinel monitor {SERVICE} {primary_ip} 6379 2\n\
             sentinel down-after-milliseconds {SERVICE} 1000\n\
             sentinel failover-timeout {SERVICE} 10000\n\
             sentinel parallel-syncs {SERVICE} 2\n",
            ip = node.ip,
            dir = dir.display()
        );
        std::fs::write(&conf, text).map_err(|e| HarnessError::Io(e.to_string()))?;
        Ok(Redis {
            node,
            program: program.to_owned(),
            args: vec![conf.to_string_lossy().into_owned(), "--sentinel".to_owned()],
            child: None,
            pid: 0,
            env: Vec::new(),
            port: 26379,
            zookeeper_log: None,
        })
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("redis://{}:{}", self.node.ip, self.port)
    }

    /// Its address, `ip:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.node.ip, self.port)
    }

    /// Starts it and waits until it answers (a ZooKeeper server: until it serves, which needs
    /// a quorum).
    ///
    /// # Errors
    /// It cannot be started or does not answer within 10 s (a ZooKeeper server: serve within
    /// 40 s).
    ///
    /// # Cancel safety
    /// Not cancel safe: the process is registered with `cleanup`.
    pub async fn start(&mut self, cleanup: &Cleanup, me: &Path) -> Result<(), HarnessError> {
        self.spawn(cleanup)?;
        self.wait_up(me).await
    }

    /// Starts it without waiting (an ensemble's servers serve only once a quorum runs).
    ///
    /// # Errors
    /// It cannot be started.
    pub fn spawn(&mut self, cleanup: &Cleanup) -> Result<(), HarnessError> {
        let (ns, program, args) = (&self.node.ns, &self.program, &self.args);
        let child = match &self.zookeeper_log {
            Some(log) => procs::spawn_logged_in(ns, program, args, log, &self.env)?,
            None => procs::spawn_in(ns, program, args, Stdio::null(), &self.env)?,
        };
        self.pid = child.id().map_or(0, |p| p as i32);
        cleanup.pid(self.pid);
        self.child = Some(child);
        Ok(())
    }

    /// Waits until it answers (see [`start`](Redis::start)).
    ///
    /// # Errors
    /// As [`start`](Redis::start).
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks.
    pub async fn wait_up(&self, me: &Path) -> Result<(), HarnessError> {
        if self.zookeeper_log.is_some() {
            let args = ["zk-srvr", "--wait", "--addrs", &self.addr()];
            helper_within(
                SERVE_WAIT + Duration::from_secs(10),
                &self.node.ns,
                me,
                &args,
            )
            .await?;
            return Ok(());
        }
        helper(&self.node.ns, me, &["probe", "--url", &self.url()]).await?;
        Ok(())
    }

    /// SIGKILLs it and reaps it.
    ///
    /// # Cancel safety
    /// Cancel safe: `cleanup` still knows the pid until it is reaped.
    pub async fn kill(&mut self, cleanup: &Cleanup) {
        procs::kill_hard(self.pid);
        if let Some(mut c) = self.child.take()
            && let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(5), c.wait()).await
        {
            cleanup.forget_pid(self.pid);
        }
    }
}

/// Runs this binary's helper subcommand inside `ns`; returns its stdout.
///
/// # Errors
/// It fails or does not end within 30 s.
///
/// # Cancel safety
/// Cancel safe: the process is killed when dropped.
pub async fn helper(ns: &str, me: &Path, args: &[&str]) -> Result<String, HarnessError> {
    helper_within(Duration::from_secs(30), ns, me, args).await
}

/// As [`helper`], ending it after `bound`.
///
/// # Errors
/// It fails or does not end within `bound`.
///
/// # Cancel safety
/// Cancel safe: the process is killed when dropped.
pub async fn helper_within(
    bound: Duration,
    ns: &str,
    me: &Path,
    args: &[&str],
) -> Result<String, HarnessError> {
    let run = tokio::process::Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(me)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(bound, run)
        .await
        .map_err(|_| {
            HarnessError::Command(format!("{} in {ns}: no end within {bound:?}", args[0]))
        })?
        .map_err(|e| HarnessError::Command(format!("{} in {ns}: {e}", args[0])))?;
    if !out.status.success() {
        return Err(HarnessError::Command(format!(
            "{} in {ns}: {}",
            args[0],
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Finds `program` on PATH.
pub fn find_program(program: &str) -> Result<PathBuf, HarnessError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| HarnessError::Missing(program.to_owned()))
}
