//! The pure parts of the `zk3` topology: its configuration, the `srvr` parse, the aim.

use super::*;
use crate::nemesis::{FaultSet, schedule};

fn ips() -> Vec<String> {
    ["10.213.7.10", "10.213.7.11", "10.213.7.12"]
        .map(str::to_owned)
        .into()
}

#[test]
fn the_config_names_every_server_and_binds_the_clients_to_its_own_address() {
    let text = config(2, &ips(), Path::new("/tmp/run/s2/data"));
    let lines: Vec<&str> = text.lines().collect();
    for line in [
        "tickTime=500",
        "initLimit=10",
        "syncLimit=5",
        "dataDir=/tmp/run/s2/data",
        "clientPort=2181",
        "clientPortAddress=10.213.7.11",
        "4lw.commands.whitelist=*",
        "server.1=10.213.7.10:2888:3888",
        "server.2=10.213.7.11:2888:3888",
        "server.3=10.213.7.12:2888:3888",
    ] {
        assert!(lines.contains(&line), "{line} missing from\n{text}");
    }
    // The log is synced before each reply: a killed server keeps what it acknowledged.
    assert!(!text.contains("forceSync=no"));
    // A session timeout of 3 s is within 2 to 20 ticks, so it is not negotiated up.
    assert!((2 * TICK_MS..=20 * TICK_MS).contains(&3_000));
}

#[test]
fn the_mode_and_the_leader_come_from_srvr() {
    let leader =
        "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: leader\nNode count: 5\n";
    let follower = "Zookeeper version: 3.8.0\nMode: follower\nNode count: 5\n";
    let down = "This ZooKeeper instance is not currently serving requests\n";
    assert_eq!(mode_of(leader).as_deref(), Some("leader"));
    assert_eq!(mode_of(follower).as_deref(), Some("follower"));
    assert_eq!(mode_of(down), None);
    let modes = [mode_of(follower), mode_of(down), mode_of(leader)];
    assert_eq!(leader_of(&modes), Some(2));
    assert_eq!(leader_of(&[mode_of(follower), None, None]), None);
    // Two servers that both say they lead (one of them stale): no target.
    assert_eq!(leader_of(&[mode_of(leader), mode_of(leader), None]), None);
}

#[test]
fn the_aim_hits_one_server_and_the_leader_half_the_time() {
    let all: FaultSet = "all".parse().unwrap();
    let steps = aim(schedule(5, 600_000, 5, 3, 3_000, &all), 5, 3);
    assert_eq!(steps, aim(schedule(5, 600_000, 5, 3, 3_000, &all), 5, 3));
    let (mut split, mut cut_all, mut at_leader, mut on_servers) = (0, 0, 0, 0);
    for s in &steps {
        match s.kind {
            FaultKind::PauseClient => assert!(s.servers.is_empty() && !s.leader),
            FaultKind::Partition if s.servers.len() == 3 => {
                assert!(!s.leader);
                cut_all += 1;
            }
            _ => {
                assert_eq!(s.servers.len(), 1, "{s}");
                assert!((1..=3).contains(&s.servers[0]));
                split += usize::from(s.kind == FaultKind::Partition);
                on_servers += 1;
                at_leader += usize::from(s.leader);
            }
        }
    }
    assert!(
        split > 0 && cut_all > 0,
        "{split} split brains, {cut_all} cuts"
    );
    assert!(
        at_leader > 0 && at_leader < on_servers,
        "{at_leader} of {on_servers}"
    );
    let leader_step = steps.iter().find(|s| s.leader).unwrap();
    assert!(leader_step.to_string().contains("the leader (else s"));
}
