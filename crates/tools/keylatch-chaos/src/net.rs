//! Network namespaces, veths, a bridge and nftables rules, all named with the run's prefix.
//!
//! Layout: one namespace `<prefix>-net` holds the bridge `klc0`; every node (a server, the
//! oracle, each worker) gets its own namespace `<prefix>-<node>` with `eth0`, a veth whose peer
//! sits on the bridge. Addresses come from 10.213.7.0/24 and exist only inside these
//! namespaces: nothing is routed anywhere else.

use std::io::Write as _;
use std::process::{Command, Stdio};

use crate::HarnessError;

/// Every name this tool creates starts with this.
pub const PREFIX: &str = "klc-";
/// The private subnet, used only inside the run's namespaces.
pub const SUBNET: &str = "10.213.7";
/// The nftables table the nemesis fills inside a node's namespace.
const TABLE: &str = "klc_nemesis";

/// Runs a command, returning its stdout; a failure is a harness error with its stderr.
pub fn run(program: &str, args: &[&str]) -> Result<String, HarnessError> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| HarnessError::Command(format!("{program} {}: {e}", args.join(" "))))?;
    if !out.status.success() {
        return Err(HarnessError::Command(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `nft -f -` inside `ns` with `script` on stdin.
pub fn nft(ns: &str, script: &str) -> Result<(), HarnessError> {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| HarnessError::Command(format!("nft in {ns}: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .map_err(|e| HarnessError::Command(format!("nft in {ns}: {e}")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| HarnessError::Command(format!("nft in {ns}: {e}")))?;
    if !out.status.success() {
        return Err(HarnessError::Command(format!(
            "nft in {ns}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// One node: its namespace and address.
#[derive(Debug, Clone)]
pub struct Node {
    /// The short name (`s1`, `oracle`, `c3`).
    pub name: String,
    /// Its namespace.
    pub ns: String,
    /// Its address on the bridge.
    pub ip: String,
}

/// The run's network.
#[derive(Debug)]
pub struct Network {
    /// The run's prefix, `klc-<id>`.
    pub prefix: String,
    /// The namespace holding the bridge.
    pub bridge_ns: String,
}

impl Network {
    /// Creates the bridge namespace and its bridge. The caller has registered
    /// `<prefix>-net` for cleanup first.
    pub fn create(prefix: &str) -> Result<Network, HarnessError> {
        let bridge_ns = format!("{prefix}-net");
        run("ip", &["netns", "add", &bridge_ns])?;
        run("ip", &["-n", &bridge_ns, "link", "set", "lo", "up"])?;
        run(
            "ip",
            &["-n", &bridge_ns, "link", "add", "klc0", "type", "bridge"],
        )?;
        run("ip", &["-n", &bridge_ns, "link", "set", "klc0", "up"])?;
        Ok(Network {
            prefix: prefix.to_owned(),
            bridge_ns,
        })
    }

    /// The namespace name of node `name`.
    pub fn ns_of(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    /// Adds node `name` with host number `host` (10.213.7.`host`).
    pub fn add_node(&self, name: &str, host: u8) -> Result<Node, HarnessError> {
        let ns = self.ns_of(name);
        let ip = format!("{SUBNET}.{host}");
        let peer = format!("v{name}");
        run("ip", &["netns", "add", &ns])?;
        run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
        run(
            "ip",
            &[
                "-n",
                &self.bridge_ns,
                "link",
                "add",
                &peer,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                &ns,
            ],
        )?;
        run(
            "ip",
            &[
                "-n",
                &self.bridge_ns,
                "link",
                "set",
                &peer,
                "master",
                "klc0",
            ],
        )?;
        run("ip", &["-n", &self.bridge_ns, "link", "set", &peer, "up"])?;
        run(
            "ip",
            &["-n", &ns, "addr", "add", &format!("{ip}/24"), "dev", "eth0"],
        )?;
        run("ip", &["-n", &ns, "link", "set", "eth0", "up"])?;
        Ok(Node {
            name: name.to_owned(),
            ns,
            ip,
        })
    }
}

/// Cuts `node` off from `peer_ips` both ways (nftables drop rules inside `node`'s namespace);
/// with `loss` below 100, drops that percentage of the packets at random instead.
pub fn cut(node: &Node, peer_ips: &[&str], loss: u8) -> Result<(), HarnessError> {
    let peer_ip = format!("{{ {} }}", peer_ips.join(", "));
    let verdict = if loss >= 100 {
        "drop".to_owned()
    } else {
        format!("numgen random mod 100 < {loss} drop")
    };
    let script = format!(
        "table inet {TABLE} {{\n\
         \tchain input {{ type filter hook input priority 0; policy accept; ip saddr {peer_ip} {verdict}; }}\n\
         \tchain output {{ type filter hook output priority 0; policy accept; ip daddr {peer_ip} {verdict}; }}\n\
         }}\n"
    );
    heal(node);
    nft(&node.ns, &script)
}

/// Removes the nemesis's rules from `node`'s namespace (nothing when there are none).
pub fn heal(node: &Node) {
    // `delete` of a missing table fails, harmlessly (`destroy` needs nftables 1.0.8).
    let _ = nft(&node.ns, &format!("delete table inet {TABLE}\n"));
}

/// The namespaces whose names start with `prefix`.
pub fn namespaces_with_prefix(prefix: &str) -> Vec<String> {
    run("ip", &["netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_owned)
        .collect()
}

/// Kills every process inside `ns` and deletes it (deleting the namespace removes its veths
/// and nftables tables with it).
pub fn delete_namespace(ns: &str) {
    for _ in 0..3 {
        let pids = run("ip", &["netns", "pids", ns]).unwrap_or_default();
        let pids: Vec<i32> = pids.lines().filter_map(|l| l.trim().parse().ok()).collect();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            crate::signals::kill_hard(pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = run("ip", &["netns", "delete", ns]);
}
