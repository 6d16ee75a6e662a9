//! The harness: builds the namespaces, starts the servers and the workers, plays the
//! nemesis's schedule, collects the history and the register's log.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::AsyncBufReadExt as _;
use tokio::process::Child;

use crate::clock::now_ns;
use crate::clockshift::ClockShift;
pub use crate::cluster::Aim;
use crate::history::current_holder;
use crate::history::{Event, Kind, NEMESIS, Op};
use crate::nemesis::FaultKind;
use crate::net::{self, Network, Node};
pub use crate::plan::{Collected, Plan};
use crate::probes::{clock_offset_ms, verify_stopped};
use crate::procs::{self, Cleanup};
pub use crate::servers::find_program;
use crate::servers::{Redis, helper};
use crate::{HarnessError, Topology, shapes, zookeeper};

struct Worker {
    /// 1-based.
    id: usize,
    node: Node,
    child: Child,
    pid: i32,
    reader: tokio::task::JoinHandle<()>,
}

/// Runs `plan`, reporting progress with `say`.
///
/// # Errors
/// A [`HarnessError`] when the harness itself fails (a missing program, a command that fails,
/// a server that does not come up).
///
/// # Cancel safety
/// Not cancel safe on its own: dropping it leaves processes and namespaces behind until
/// `cleanup` runs (the caller always runs it).
pub async fn run(
    plan: &Plan,
    cleanup: &Cleanup,
    say: &dyn Fn(String),
) -> Result<Collected, HarnessError> {
    let me = std::env::current_exe().map_err(|e| HarnessError::Io(e.to_string()))?;
    for program in ["ip", "nft", "setpriv"] {
        find_program(program)?;
    }
    let redis_server = find_program("redis-server")?;
    let zk = plan.topology.is_zookeeper();
    let workload = plan.workload;

    let id = format!("{:x}", std::process::id());
    let prefix = format!("{}{id}", net::PREFIX);
    let dir = std::env::temp_dir().join(format!("{}{id}", procs::DIR_PREFIX));
    cleanup.dir(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| HarnessError::Io(e.to_string()))?;

    cleanup.namespace(&format!("{prefix}-net"));
    let network = Network::create(&prefix)?;
    let add = |name: &str, host: u8| {
        cleanup.namespace(&network.ns_of(name));
        network.add_node(name, host)
    };
    let oracle_node = add("oracle", 2)?;
    let mut server_nodes = Vec::new();
    for n in 1..=plan.topology.servers() {
        server_nodes.push(add(&format!("s{n}"), 9 + n as u8)?);
    }
    let sentinel = matches!(plan.topology, Topology::Sentinel | Topology::SentinelAck);
    let cluster = plan.topology.is_cluster();
    let mut sentinel_nodes = Vec::new();
    for n in 1..=if sentinel { 3 } else { 0 } {
        sentinel_nodes.push(add(&format!("sen{n}"), 19 + n as u8)?);
    }
    let mut client_nodes = Vec::new();
    for i in 1..=plan.workers {
        client_nodes.push(add(&format!("c{i}"), 100 + i as u8)?);
    }
    say(format!(
        "network: namespaces {prefix}-*, bridge klc0, {}.0/24",
        net::SUBNET
    ));

    let mut oracle = Redis::new(oracle_node, &redis_server, &dir, None);
    oracle.start(cleanup, &me).await?;
    let persistence = match plan.topology {
        Topology::Single
        | Topology::Sentinel
        | Topology::SentinelAck
        | Topology::Cluster
        | Topology::ClusterAck
        | Topology::Zk3 => None,
        Topology::SingleAof | Topology::Redlock5 => Some("always"),
        Topology::SingleAofEverysec => Some("everysec"),
    };
    // Every process whose clock the nemesis may step starts with the shift library.
    let clocks = if plan.nemesis.0.contains(&FaultKind::ClockJump) {
        Some(ClockShift::build(&dir)?)
    } else {
        None
    };
    let env_for = |process: &str| -> Result<Vec<(String, String)>, HarnessError> {
        clocks
            .as_ref()
            .map_or(Ok(Vec::new()), |c| c.env_for(process))
    };
    let mut servers = Vec::new();
    let primary_ip = server_nodes[0].ip.clone();
    if zk {
        // Every server first: each serves only once a quorum runs.
        servers = zookeeper::ensemble(std::mem::take(&mut server_nodes), &dir)?;
        for s in &mut servers {
            // The JVM reads the wall clock through libc's clock_gettime, which the shift
            // library replaces (System.currentTimeMillis() follows a shift, measured).
            s.env = env_for(&s.node.name)?;
            s.spawn(cleanup)?;
        }
        for s in &servers {
            s.wait_up(&me).await?;
        }
    }
    for (i, node) in server_nodes.into_iter().enumerate() {
        let mut server = Redis::new(node, &redis_server, &dir, persistence);
        if sentinel && i > 0 {
            server = server.replica_of(&primary_ip);
        }
        if cluster {
            server = server.cluster_node();
        }
        server.env = env_for(&server.node.name)?;
        server.start(cleanup, &me).await?;
        servers.push(server);
    }
    let mut sentinels = Vec::new();
    for node in sentinel_nodes {
        let mut s = Redis::sentinel(node, &redis_server, &dir, &primary_ip)?;
        s.start(cleanup, &me).await?;
        sentinels.push(s);
    }
    if cluster {
        let nodes: Vec<String> = servers.iter().map(Redis::addr).collect();
        let nodes = nodes.join(",");
        helper(&oracle.node.ns, &me, &["form-cluster", "--nodes", &nodes]).await?;
    }
    let urls: Vec<String> = if zk {
        vec![zookeeper::url(&servers)]
    } else if cluster {
        let addrs: Vec<String> = servers.iter().map(Redis::addr).collect();
        vec![format!("redis+cluster://{}", addrs.join(","))]
    } else if sentinel {
        // Time for the sentinels to find the replicas and each other (hello every 2 s).
        tokio::time::sleep(Duration::from_secs(5)).await;
        let addrs: Vec<String> = sentinels.iter().map(Redis::addr).collect();
        vec![format!(
            "redis+sentinel://{}/{}",
            addrs.join(","),
            crate::servers::SERVICE
        )]
    } else {
        servers.iter().map(Redis::url).collect()
    };
    say(format!(
        "servers up: lock servers {} ({}), register oracle {}",
        urls.join(","),
        plan.topology,
        oracle.url()
    ));

    let history: Arc<Mutex<Vec<Event>>> = Arc::new(Mutex::new(Vec::new()));
    let origin = now_ns();
    let deadline = origin + plan.duration.as_nanos() as u64;
    let mut workers = Vec::new();
    for (i, node) in client_nodes.iter().enumerate() {
        let args: Vec<String> = [
            "worker".to_owned(),
            format!("--run={prefix}"),
            format!("--harness-pid={}", std::process::id()),
            format!("--id={}", i + 1),
            format!("--server={}", urls.join(";")),
            format!("--workload={workload}"),
            format!("--permits={}", plan.permits),
            format!("--replicas={}", plan.topology.replicas()),
            format!("--oracle={}", oracle.url()),
            format!("--seed={}", plan.seed),
            format!("--deadline-ns={deadline}"),
            format!("--lease-ms={}", plan.lease_ms),
            format!("--mode={}", plan.mode),
            format!("--max-hold-ms={}", plan.max_hold_ms),
        ]
        .into();
        let env = env_for(&node.name)?;
        let mut child = procs::spawn_in(&node.ns, &me, &args, Stdio::piped(), &env)?;
        let pid = child.id().map_or(0, |p| p as i32);
        cleanup.pid(pid);
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| HarnessError::Io("no worker stdout".to_owned()))?;
        let sink = Arc::clone(&history);
        let reader = tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(e) = serde_json::from_str::<Event>(&line)
                    && let Ok(mut h) = sink.lock()
                {
                    h.push(e);
                }
            }
        });
        workers.push(Worker {
            id: i + 1,
            node: node.clone(),
            child,
            pid,
            reader,
        });
    }
    say(format!("{} workers started", workers.len()));

    let record = |kind: Kind, detail: String| {
        if let Ok(mut h) = history.lock() {
            h.push(Event::new(NEMESIS, now_ns(), kind, Op::Nemesis).detail(detail));
        }
    };
    let sleep_until = |t: u64| {
        let now = now_ns();
        tokio::time::sleep(Duration::from_nanos(t.saturating_sub(now)))
    };
    for step in plan.schedule() {
        sleep_until(origin + step.at_ms * 1_000_000).await;
        if let Some(after) = plan.panic_after
            && now_ns() - origin >= after.as_nanos() as u64
        {
            panic!("deliberate panic {after:?} into the run (--panic-after)");
        }
        let mut step = step;
        let aim_note = if plan.aim == Aim::Lock {
            crate::cluster::aim_at_lock(&mut step, &servers, &me).await
        } else {
            String::new()
        };
        let secs = (now_ns() - origin) as f64 / 1e9;
        say(format!("{secs:8.3}s nemesis: {step}{aim_note}"));
        record(Kind::Invoke, step.to_string());
        let hold = Duration::from_millis(step.duration_ms);
        let targets: Vec<&Worker> = step.workers.iter().map(|w| &workers[w - 1]).collect();
        // The servers it hits: the scheduled ones, or the only one.
        let mut hit: Vec<usize> = if step.servers.is_empty() {
            vec![0]
        } else {
            step.servers.iter().map(|s| s - 1).collect()
        };
        if step.leader {
            let (leader, at) = zookeeper::find_leader(&servers, &oracle.node.ns, &me).await;
            hit = leader.map_or(hit, |l| vec![l]);
            record(Kind::Info, at);
        }
        let hit_ips: Vec<&str> = hit.iter().map(|&i| servers[i].node.ip.as_str()).collect();
        match step.kind {
            FaultKind::Partition | FaultKind::Loss => {
                let percent = if step.kind == FaultKind::Loss {
                    step.loss_percent
                } else {
                    100
                };
                // On zk3 a partition of every server cuts the workers instead.
                let split = sentinel || cluster || (zk && hit.len() < servers.len());
                if step.shape != shapes::Shape::Split {
                    let ws = workers.iter().map(|w| &w.node);
                    let cut = shapes::cut(&step, &servers, &sentinels, ws)?;
                    tokio::time::sleep(hold).await;
                    shapes::heal(&cut);
                } else if split && step.kind == FaultKind::Partition {
                    // Split brain: the hit data nodes keep only the scheduled workers; the
                    // other data nodes, the sentinels and the other workers lose them.
                    let mut others: Vec<&str> = servers
                        .iter()
                        .chain(&sentinels)
                        .map(|s| s.node.ip.as_str())
                        .filter(|ip| !hit_ips.contains(ip))
                        .collect();
                    others.extend(
                        workers
                            .iter()
                            .filter(|w| !step.workers.contains(&w.id))
                            .map(|w| w.node.ip.as_str()),
                    );
                    for &i in &hit {
                        net::cut(&servers[i].node, &others, 100)?;
                    }
                    tokio::time::sleep(hold).await;
                    for &i in &hit {
                        net::heal(&servers[i].node);
                    }
                } else {
                    for w in &targets {
                        net::cut(&w.node, &hit_ips, percent)?;
                    }
                    tokio::time::sleep(hold).await;
                    for w in &targets {
                        net::heal(&w.node);
                    }
                }
            }
            FaultKind::PauseServer => {
                for &i in &hit {
                    procs::signal(servers[i].pid, Signal::SIGSTOP);
                }
                for &i in &hit {
                    verify_stopped(servers[i].pid, &servers[i].node.name).await?;
                }
                record(Kind::Info, "verified: stopped (/proc state T)".to_owned());
                tokio::time::sleep(hold).await;
                for &i in &hit {
                    procs::signal(servers[i].pid, Signal::SIGCONT);
                }
            }
            FaultKind::Kill => {
                for &i in &hit {
                    servers[i].kill(cleanup).await;
                }
                tokio::time::sleep(hold).await;
                for &i in &hit {
                    servers[i].start(cleanup, &me).await?;
                }
            }
            FaultKind::Failover => {
                for &i in &hit {
                    let node = servers[i].addr();
                    let args = ["cluster-failover", "--node", node.as_str()];
                    let detail = match helper(&servers[i].node.ns, &me, &args).await {
                        Ok(out) => out.trim().to_owned(),
                        Err(e) => format!("no failover: {e}"),
                    };
                    record(Kind::Info, detail);
                }
                tokio::time::sleep(hold).await;
            }
            FaultKind::ClockJump => {
                let processes: Vec<String> = match step.workers.first() {
                    Some(w) => vec![format!("c{w}")],
                    None => hit.iter().map(|&i| servers[i].node.name.clone()).collect(),
                };
                let clocks = clocks.as_ref().ok_or_else(|| {
                    HarnessError::Command("a clock jump without the shift library".to_owned())
                })?;
                for process in &processes {
                    clocks.set(process, step.clock_ms)?;
                }
                // A redis-server's own clock is read back with TIME; a JVM's and a worker's
                // are not probed (the history says so).
                let mut notes = Vec::new();
                for process in &processes {
                    let server = servers.iter().find(|s| &s.node.name == process && !zk);
                    match server {
                        Some(s) => {
                            let off = clock_offset_ms(s, &oracle.node.ns, &me).await?;
                            if (off - step.clock_ms).abs() > 1_000 {
                                return Err(HarnessError::Command(format!(
                                    "the clock jump did not take effect: {process} is {off:+} ms \
                                     off the host, {:+} ms asked",
                                    step.clock_ms
                                )));
                            }
                            notes.push(format!("{process} {off:+} ms (TIME)"));
                        }
                        None => notes.push(format!("{process} not probed")),
                    }
                }
                record(Kind::Info, format!("verified: {}", notes.join(", ")));
                tokio::time::sleep(hold).await;
                for process in &processes {
                    clocks.set(process, 0)?;
                }
            }
            FaultKind::PauseClient => {
                // The current holder if there is one (a paused waiter shows little), else the
                // scheduled worker.
                let holder = history
                    .lock()
                    .ok()
                    .and_then(|h| current_holder(&h, workers.len()));
                let targets: Vec<&Worker> = match holder {
                    Some(i) => vec![&workers[i - 1]],
                    None => targets,
                };
                record(
                    Kind::Info,
                    format!(
                        "pausing {}",
                        targets
                            .iter()
                            .map(|w| w.node.name.as_str())
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                );
                for w in &targets {
                    procs::signal(w.pid, Signal::SIGSTOP);
                }
                for w in &targets {
                    verify_stopped(w.pid, &w.node.name).await?;
                }
                tokio::time::sleep(hold).await;
                for w in &targets {
                    procs::signal(w.pid, Signal::SIGCONT);
                }
            }
        }
        record(Kind::Ok, format!("healed {}", step.kind));
    }
    sleep_until(deadline).await;
    if let Some(after) = plan.panic_after {
        panic!("deliberate panic {after:?} into the run (--panic-after)");
    }

    // Every worker finishes its last operation: a lease, a wait bound and a release at most.
    let grace = Duration::from_millis(plan.lease_ms) + Duration::from_secs(15);
    let mut failed = Vec::new();
    for w in &mut workers {
        match tokio::time::timeout(grace, w.child.wait()).await {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => failed.push(format!("{} exited with {status}", w.node.name)),
            Ok(Err(e)) => failed.push(format!("{}: {e}", w.node.name)),
            Err(_) => {
                say(format!("{} did not stop; killed", w.node.name));
                procs::kill_hard(w.pid);
                let _ = tokio::time::timeout(Duration::from_secs(5), w.child.wait()).await;
            }
        }
        cleanup.forget_pid(w.pid);
    }
    if !failed.is_empty() {
        return Err(HarnessError::Command(format!(
            "workers failed: {}",
            failed.join("; ")
        )));
    }
    for w in workers {
        let _ = tokio::time::timeout(Duration::from_secs(5), w.reader).await;
    }

    let dump = helper(
        &oracle.node.ns,
        &me,
        &["dump-register", "--url", &oracle.url()],
    )
    .await?;
    #[derive(serde::Deserialize)]
    struct Dump {
        log: Vec<(u64, String)>,
        counter: u64,
    }
    let Dump {
        log: register_log,
        counter,
    } = serde_json::from_str(dump.trim())
        .map_err(|e| HarnessError::Io(format!("the register's log: {e}")))?;
    for server in servers.iter_mut().chain(&mut sentinels) {
        server.kill(cleanup).await;
    }
    oracle.kill(cleanup).await;

    let history = history.lock().map(|h| h.clone()).unwrap_or_default();
    Ok(Collected {
        history,
        register_log,
        counter,
        origin,
    })
}
