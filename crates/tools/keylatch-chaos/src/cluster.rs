//! The `cluster` topologies' helpers, run inside a namespace by the harness: forming the
//! cluster (`form-cluster`) and a coordinated failover on one shard (`cluster-failover`).

use std::time::{Duration, Instant};

use keylatch::redis;

/// The slots of a Redis Cluster.
const SLOTS: usize = 16_384;
/// How long forming may take.
const FORM_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

async fn conn(addr: &str) -> Result<redis::aio::MultiplexedConnection, String> {
    let client = redis::Client::open(format!("redis://{addr}")).map_err(|e| e.to_string())?;
    tokio::time::timeout(COMMAND_TIMEOUT, client.get_multiplexed_async_connection())
        .await
        .map_err(|_| format!("{addr}: connect timed out"))?
        .map_err(|e| format!("{addr}: {e}"))
}

async fn query<T: redis::FromRedisValue>(addr: &str, args: &[&str]) -> Result<T, String> {
    let mut c = conn(addr).await?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    tokio::time::timeout(COMMAND_TIMEOUT, cmd.query_async::<T>(&mut c))
        .await
        .map_err(|_| format!("{addr}: {} timed out", args.join(" ")))?
        .map_err(|e| format!("{addr}: {}: {e}", args.join(" ")))
}

/// One line of `CLUSTER NODES`: id, address (`ip:port`), flags, primary id.
struct NodeLine {
    id: String,
    addr: String,
    flags: Vec<String>,
    primary: Option<String>,
}

fn nodes(text: &str) -> Vec<NodeLine> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8).then(|| NodeLine {
                id: f[0].to_owned(),
                addr: f[1].split('@').next().unwrap_or("").to_owned(),
                flags: f[2].split(',').map(str::to_owned).collect(),
                primary: (f[3] != "-").then(|| f[3].to_owned()),
            })
        })
        .collect()
}

/// Forms a cluster of `addrs` (`ip:port`): the first half primaries with equal slot ranges,
/// the second half their replicas in order; waits until every node says `cluster_state:ok`
/// and every replica's link is up.
///
/// # Errors
/// A node that refuses a command, or a cluster not formed within 60 s.
///
/// # Cancel safety
/// Not meant to be cancelled: the process ends with it.
pub async fn form(addrs: &[String]) -> Result<(), String> {
    let primaries = addrs.len() / 2;
    if primaries == 0 {
        return Err("a cluster needs at least two nodes".to_owned());
    }
    let mut ids = Vec::new();
    for (i, a) in addrs.iter().enumerate() {
        ids.push(query::<String>(a, &["CLUSTER", "MYID"]).await?);
        let epoch = (i + 1).to_string();
        query::<()>(a, &["CLUSTER", "SET-CONFIG-EPOCH", &epoch]).await?;
    }
    for (i, a) in addrs[..primaries].iter().enumerate() {
        let start = (i * SLOTS / primaries).to_string();
        let end = ((i + 1) * SLOTS / primaries - 1).to_string();
        query::<()>(a, &["CLUSTER", "ADDSLOTSRANGE", &start, &end]).await?;
    }
    for a in &addrs[1..] {
        let (ip, port) = a.split_once(':').ok_or("an address is ip:port")?;
        query::<()>(&addrs[0], &["CLUSTER", "MEET", ip, port]).await?;
    }
    let deadline = Instant::now() + FORM_TIMEOUT;
    let mut replicated = vec![false; addrs.len() - primaries];
    loop {
        let mut waiting = None;
        for (k, a) in addrs[primaries..].iter().enumerate() {
            if !replicated[k] {
                // Refused until the node knows its primary.
                match query::<()>(a, &["CLUSTER", "REPLICATE", &ids[k % primaries]]).await {
                    Ok(()) => replicated[k] = true,
                    Err(e) => waiting = Some(e),
                }
            }
        }
        if waiting.is_none() {
            for (i, a) in addrs.iter().enumerate() {
                let info: String = query(a, &["CLUSTER", "INFO"]).await?;
                if !info.contains("cluster_state:ok") {
                    waiting = Some(format!("{a}: cluster state not ok"));
                } else if i >= primaries {
                    let repl: String = query(a, &["INFO", "replication"]).await?;
                    if !repl.contains("master_link_status:up") {
                        waiting = Some(format!("{a}: replication link not up"));
                    }
                }
            }
        }
        match waiting {
            None => return Ok(()),
            Some(e) if Instant::now() >= deadline => {
                return Err(format!("the cluster did not form within 60 s: {e}"));
            }
            Some(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Which servers the nemesis hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Aim {
    /// The ones the schedule drew from the seed.
    Scheduled,
    /// The primary serving the lock's key when the fault starts (the cluster topologies): the
    /// schedule's count of servers is kept, its choice replaced.
    Lock,
}

/// Prints the address of the primary serving the lock's key ([`crate::locks::LOCK`]), as
/// the first of `addrs` that answers sees it.
///
/// # Errors
/// No node answers, or none names a primary for the key's slot.
///
/// # Cancel safety
/// Not meant to be cancelled: the process ends with it.
pub async fn lock_primary(addrs: &[String]) -> Result<(), String> {
    let mut last = "no node given".to_owned();
    for addr in addrs {
        let found = async {
            let slot: i64 = query(addr, &["CLUSTER", "KEYSLOT", crate::locks::LOCK]).await?;
            let text: String = query(addr, &["CLUSTER", "NODES"]).await?;
            primary_of(&text, slot).ok_or_else(|| format!("{addr} names no primary for {slot}"))
        };
        match tokio::time::timeout(std::time::Duration::from_secs(1), found).await {
            Ok(Ok(primary)) => {
                println!("{primary}");
                return Ok(());
            }
            Ok(Err(e)) => last = e,
            Err(_) => last = format!("{addr} did not answer within 1 s"),
        }
    }
    Err(last)
}

/// Points `step`'s servers at the lock's primary at this moment (the run's `--aim lock`), for
/// every fault but a client's pause; returns a note when it could not (`""` when it did).
pub async fn aim_at_lock(
    step: &mut crate::nemesis::Step,
    servers: &[crate::servers::Redis],
    me: &std::path::Path,
) -> String {
    if step.kind == crate::nemesis::FaultKind::PauseClient {
        return String::new();
    }
    let nodes: Vec<String> = servers.iter().map(crate::servers::Redis::addr).collect();
    let args = ["lock-primary", "--nodes", &nodes.join(",")];
    let found = crate::servers::helper(&servers[0].node.ns, me, &args).await;
    match found.as_deref().map(str::trim) {
        Ok(addr) => match servers.iter().position(|s| s.addr() == addr) {
            Some(i) => {
                step.servers = vec![i + 1];
                String::new()
            }
            None => format!(" (not aimed: {addr} is no lock server)"),
        },
        Err(e) => format!(" (not aimed: {e})"),
    }
}

/// The address of the healthy primary whose slot ranges (fields 9 on of `CLUSTER NODES`)
/// hold `slot`.
fn primary_of(text: &str, slot: i64) -> Option<String> {
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let flags = f.get(2)?;
        if !flags.split(',').any(|x| x == "master") || flags.contains("fail") {
            return None;
        }
        let serves = f.iter().skip(8).any(|r| match r.split_once('-') {
            Some((a, b)) => {
                a.parse::<i64>().is_ok_and(|a| a <= slot)
                    && b.parse::<i64>().is_ok_and(|b| slot <= b)
            }
            None => r.parse::<i64>() == Ok(slot),
        });
        serves.then(|| f[1].split('@').next().unwrap_or("").to_owned())
    })
}

/// A coordinated failover (`CLUSTER FAILOVER`) of the shard of `addr`: on it if it is a
/// replica, else on a replica of it. Prints what it did.
///
/// # Errors
/// The node does not answer, has no replica, or the replica refuses.
///
/// # Cancel safety
/// Not meant to be cancelled: the process ends with it.
pub async fn failover(addr: &str) -> Result<(), String> {
    let text: String = query(addr, &["CLUSTER", "NODES"]).await?;
    let view = nodes(&text);
    let me = view
        .iter()
        .find(|n| n.flags.iter().any(|f| f == "myself"))
        .ok_or("no myself line in CLUSTER NODES")?;
    let target = if me.flags.iter().any(|f| f == "slave") {
        me.addr.clone()
    } else {
        view.iter()
            .find(|n| {
                n.primary.as_deref() == Some(me.id.as_str())
                    && !n.flags.iter().any(|f| f.starts_with("fail"))
            })
            .map(|n| n.addr.clone())
            .ok_or_else(|| format!("{addr} has no healthy replica"))?
    };
    query::<()>(&target, &["CLUSTER", "FAILOVER"]).await?;
    println!("CLUSTER FAILOVER on {target}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::primary_of;

    #[test]
    fn the_primary_of_a_slot_is_read_from_cluster_nodes() {
        let text = "\
a 10.213.7.11:6379@16379 master - 0 0 1 connected 0-5460
b 10.213.7.12:6379@16379 myself,master - 0 0 2 connected 5461-10922
c 10.213.7.13:6379@16379 master,fail - 0 0 3 connected 10923-16383
d 10.213.7.15:6379@16379 slave b 0 0 2 connected
";
        assert_eq!(primary_of(text, 8286).as_deref(), Some("10.213.7.12:6379"));
        assert_eq!(primary_of(text, 0).as_deref(), Some("10.213.7.11:6379"));
        // A failed primary is nobody's.
        assert_eq!(primary_of(text, 16000), None);
    }
}
