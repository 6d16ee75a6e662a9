//! The `zk3` topology: a three-node ZooKeeper ensemble, one JVM (Debian's `zookeeper`
//! package) in each server's namespace; its configuration, the nemesis's aim at it (one server
//! of three, the leader half the time) and the `zk-srvr` helper, which asks servers' `srvr`
//! what mode they are in. Imports the servers, the network's nodes and the nemesis's steps.

use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::HarnessError;
use crate::nemesis::{FaultKind, Step};
use crate::net::Node;
use crate::servers::{Redis, SERVE_WAIT, find_program, helper_within};

/// The client port of every server (on its own address).
pub const CLIENT_PORT: u16 = 2181;
/// The followers' port to the leader.
const QUORUM_PORT: u16 = 2888;
/// The leader election's port.
const ELECTION_PORT: u16 = 3888;
/// ZooKeeper's time unit: sessions may last 2 to 20 ticks (1 s to 10 s), a follower that has
/// not heard from the leader for `syncLimit` ticks (2.5 s) drops out.
const TICK_MS: u64 = 500;
/// Debian's configuration directory (the logging configuration) and the server's jar.
const CONF_DIR: &str = "/etc/zookeeper/conf";
/// The server's jar; its manifest lists the jars it needs.
pub const JAR: &str = "/usr/share/java/zookeeper.jar";
/// A binding that makes the server log to stderr (Debian's `libslf4j-java`), when installed.
const SLF4J_SIMPLE_JAR: &str = "/usr/share/java/slf4j-simple.jar";
/// How long one four-letter word may take.
const WORD_TIMEOUT: Duration = Duration::from_secs(1);

/// `zoo.cfg` of server `myid` (1-based) of the ensemble whose servers are at `ips` (`s1`…
/// in order), its data (log, snapshots, `myid`) in `data_dir`. The log is synced before each
/// reply (ZooKeeper's default, `forceSync=yes`), so a killed server restarts with every write
/// it acknowledged.
pub fn config(myid: usize, ips: &[String], data_dir: &Path) -> String {
    let mut text = format!(
        "tickTime={TICK_MS}\n\
         initLimit=10\n\
         syncLimit=5\n\
         dataDir={}\n\
         clientPort={CLIENT_PORT}\n\
         clientPortAddress={}\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist=*\n",
        data_dir.display(),
        ips.get(myid.wrapping_sub(1)).map_or("", String::as_str),
    );
    for (i, ip) in ips.iter().enumerate() {
        text.push_str(&format!(
            "server.{}={ip}:{QUORUM_PORT}:{ELECTION_PORT}\n",
            i + 1
        ));
    }
    text
}

/// The value of the `Mode:` line of a `srvr` answer (`leader`, `follower`), `None` for a
/// server that does not serve.
pub fn mode_of(srvr: &str) -> Option<String> {
    srvr.lines()
        .find_map(|l| l.strip_prefix("Mode:"))
        .map(|m| m.trim().to_owned())
}

/// The index of the one server whose mode is `leader`; `None` when none or several say so.
pub fn leader_of(modes: &[Option<String>]) -> Option<usize> {
    let mut leaders = modes
        .iter()
        .enumerate()
        .filter(|(_, m)| m.as_deref() == Some("leader"));
    match (leaders.next(), leaders.next()) {
        (Some((i, _)), None) => Some(i),
        _ => None,
    }
}

/// Which of `servers` leads now (asked from namespace `ns`), and the history's note on it.
pub async fn find_leader(servers: &[Redis], ns: &str, me: &Path) -> (Option<usize>, String) {
    let addrs: Vec<String> = servers.iter().map(Redis::addr).collect();
    let leader = leader(ns, me, &addrs).await;
    let at = leader.map_or("none serves as the one leader".to_owned(), |l| {
        format!("the leader is s{}", l + 1)
    });
    (leader, at)
}

/// The schedule aimed at an ensemble of `servers`: every fault on servers hits one of them (a
/// minority), half of them at whichever leads then; a partition is, drawn half and half, a
/// split brain (one server cut from the others and from the workers not scheduled) or the
/// scheduled workers cut from every server. Drawn from `seed` alone.
pub fn aim(mut steps: Vec<Step>, seed: u64, servers: usize) -> Vec<Step> {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x7a6b_3300_5eed_0003);
    for step in &mut steps {
        if step.kind == FaultKind::PauseClient {
            step.servers.clear();
            continue;
        }
        let Some(&first) = step.servers.first() else {
            continue;
        };
        if step.kind == FaultKind::Partition && rng.bool() {
            step.servers = (1..=servers).collect();
            continue;
        }
        step.servers = vec![first];
        step.leader = matches!(
            step.kind,
            FaultKind::Partition | FaultKind::Loss | FaultKind::PauseServer | FaultKind::Kill
        ) && rng.bool();
    }
    steps
}

/// The ensemble's servers on `nodes` (`s1`…), each with its `zoo.cfg`, `myid` and data
/// directory under `dir/<node>`, kept across kills so a restarted server rejoins with its log.
///
/// # Errors
/// `java` or the jar is missing, or a file cannot be written.
pub fn ensemble(nodes: Vec<Node>, dir: &Path) -> Result<Vec<Redis>, HarnessError> {
    let java = find_program("java")?;
    if !Path::new(JAR).is_file() {
        return Err(HarnessError::Missing(JAR.to_owned()));
    }
    let io = |e: std::io::Error| HarnessError::Io(e.to_string());
    let ips: Vec<String> = nodes.iter().map(|n| n.ip.clone()).collect();
    let mut class_path = format!("{CONF_DIR}:{JAR}");
    if Path::new(SLF4J_SIMPLE_JAR).is_file() {
        class_path = format!("{class_path}:{SLF4J_SIMPLE_JAR}");
    }
    let mut servers = Vec::new();
    for (i, node) in nodes.into_iter().enumerate() {
        let home = dir.join(&node.name);
        let data = home.join("data");
        std::fs::create_dir_all(&data).map_err(io)?;
        std::fs::write(data.join("myid"), format!("{}\n", i + 1)).map_err(io)?;
        let cfg = home.join("zoo.cfg");
        std::fs::write(&cfg, config(i + 1, &ips, &data)).map_err(io)?;
        let args: Vec<String> = [
            "-Xms16m",
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:-UsePerfData",
            "-Djava.net.preferIPv4Stack=true",
            // Reconnect to a restarted peer quickly (default 5 s per attempt).
            "-Dzookeeper.cnxTimeout=1000",
            "-cp",
            &class_path,
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            &cfg.to_string_lossy(),
        ]
        .map(str::to_owned)
        .into();
        servers.push(Redis::zookeeper(
            node,
            &java,
            args,
            CLIENT_PORT,
            home.join("zookeeper.log"),
        ));
    }
    Ok(servers)
}

/// The workers' URL: `zk://` and every server's client address.
pub fn url(servers: &[Redis]) -> String {
    let addrs: Vec<String> = servers.iter().map(Redis::addr).collect();
    format!("zk://{}", addrs.join(","))
}

/// Which of `addrs` leads now (asked from namespace `ns`); `None` when none answers as the
/// one leader.
///
/// # Cancel safety
/// Cancel safe: the helper is killed when dropped.
pub async fn leader(ns: &str, me: &Path, addrs: &[String]) -> Option<usize> {
    let all = addrs.join(",");
    let out = helper_within(
        Duration::from_secs(10),
        ns,
        me,
        &["zk-srvr", "--addrs", &all],
    )
    .await
    .ok()?;
    let modes: Vec<Option<String>> = out
        .lines()
        .map(|l| (l.trim() != "-").then(|| l.trim().to_owned()))
        .collect();
    leader_of(&modes)
}

/// Sends `srvr` to `addr` and reads the answer to the end.
async fn srvr(addr: &str) -> Result<String, String> {
    let work = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(b"srvr").await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    match tokio::time::timeout(WORD_TIMEOUT, work).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(format!("{addr}: {e}")),
        Err(_) => Err(format!("{addr}: no answer to srvr")),
    }
}

/// The `zk-srvr` helper: prints each server's mode (`-` when it does not serve), one line
/// each; with `wait`, first waits until every one serves.
///
/// # Errors
/// With `wait`, a server that does not serve within 40 s.
///
/// # Cancel safety
/// Not meant to be cancelled: the process ends with it.
pub async fn srvr_helper(addrs: &[String], wait: bool) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let mut modes = Vec::new();
        let mut last_error = None;
        for addr in addrs {
            match srvr(addr).await {
                Ok(answer) => modes.push(mode_of(&answer)),
                Err(e) => {
                    last_error = Some(e);
                    modes.push(None);
                }
            }
        }
        if !wait || modes.iter().all(Option::is_some) {
            for mode in &modes {
                println!("{}", mode.as_deref().unwrap_or("-"));
            }
            return Ok(());
        }
        if start.elapsed() >= SERVE_WAIT {
            let why = last_error.unwrap_or_else(|| "not serving".to_owned());
            return Err(format!(
                "ZooKeeper did not serve within {SERVE_WAIT:?}: {why}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests;
