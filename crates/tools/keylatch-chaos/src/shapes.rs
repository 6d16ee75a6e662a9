//! Two more shapes of partition, beside the split brain: a minority of the sentinels cut off
//! (`sentinel`, `sentinel-ack`), and a bridge (the three data nodes of `sentinel`,
//! `sentinel-ack` and `zk3`: two of them cut from each other, the third still seeing both).

use crate::HarnessError;
pub use crate::nemesis::Shape;
use crate::nemesis::{FaultKind, Step};
use crate::net::{self, Node};
use crate::servers::Redis;

/// Turns partitions of a three-data-node topology into the other shapes, drawn from `seed`
/// alone: on Sentinel (`sentinels`), a third stay split brains, a third cut one sentinel, a
/// third are bridges; on zk3, half of the split brains become bridges.
pub fn shape(mut steps: Vec<Step>, seed: u64, sentinels: bool) -> Vec<Step> {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x5a4e_7e11_b21d_6e00);
    for step in &mut steps {
        if step.kind != FaultKind::Partition || step.servers.len() == 3 {
            continue;
        }
        let draw = if sentinels {
            rng.usize(0..3)
        } else {
            2 * rng.usize(0..2)
        };
        match draw {
            1 => {
                step.shape = Shape::Sentinel(rng.usize(1..=3));
                step.servers.clear();
                step.workers.clear();
                step.leader = false;
            }
            2 => {
                let mut two: Vec<usize> = (1..=3).collect();
                rng.shuffle(&mut two);
                two.truncate(2);
                two.sort_unstable();
                step.shape = Shape::Bridge;
                step.servers = two;
                step.workers.clear();
                step.leader = false;
            }
            _ => {}
        }
    }
    steps
}

/// Applies a [`Shape::Sentinel`] or [`Shape::Bridge`] partition; returns the nodes whose
/// rules [`heal`] removes.
///
/// # Errors
/// An nftables rule could not be added.
pub fn cut<'a>(
    step: &Step,
    servers: &'a [Redis],
    sentinels: &'a [Redis],
    workers: impl Iterator<Item = &'a Node>,
) -> Result<Vec<&'a Node>, HarnessError> {
    let servers: Vec<&Node> = servers.iter().map(|s| &s.node).collect();
    let sentinels: Vec<&Node> = sentinels.iter().map(|s| &s.node).collect();
    let all = servers.iter().chain(&sentinels).copied().chain(workers);
    match step.shape {
        Shape::Split => Ok(Vec::new()),
        Shape::Sentinel(n) => {
            let alone = sentinels[n - 1];
            let others: Vec<&str> = all
                .filter(|x| x.ip != alone.ip)
                .map(|x| x.ip.as_str())
                .collect();
            net::cut(alone, &others, 100)?;
            Ok(vec![alone])
        }
        Shape::Bridge => {
            let (a, b) = (step.servers[0] - 1, step.servers[1] - 1);
            let side = |i: usize| -> Vec<&'a Node> {
                std::iter::once(servers[i])
                    .chain(sentinels.get(i).copied())
                    .collect()
            };
            let (left, right) = (side(a), side(b));
            let right_ips: Vec<&str> = right.iter().map(|x| x.ip.as_str()).collect();
            for node in &left {
                net::cut(node, &right_ips, 100)?;
            }
            Ok(left)
        }
    }
}

/// Removes the rules [`cut`] added.
pub fn heal(cut: &[&Node]) {
    for node in cut {
        net::heal(node);
    }
}

#[cfg(test)]
mod tests {
    use super::{Shape, shape};
    use crate::nemesis::{FaultKind, schedule};

    #[test]
    fn sentinel_partitions_take_every_shape_and_zk3_bridges() {
        let steps = schedule(5, 600_000, 3, 3, 3_000, &"partition".parse().unwrap());
        let shaped = shape(steps.clone(), 5, true);
        let count = |s: Shape| shaped.iter().filter(|x| x.shape == s).count();
        assert!(count(Shape::Split) > 0 && count(Shape::Bridge) > 0);
        assert!(
            shaped
                .iter()
                .any(|x| matches!(x.shape, Shape::Sentinel(1..=3)))
        );
        for s in &shaped {
            match s.shape {
                Shape::Bridge => assert!(s.servers.len() == 2 && s.servers[0] < s.servers[1]),
                Shape::Sentinel(_) => assert!(s.servers.is_empty() && s.workers.is_empty()),
                Shape::Split => {}
            }
        }
        // The same seed, the same shapes.
        assert_eq!(shape(steps.clone(), 5, true), shaped);
        // zk3: bridges and split brains, no sentinel.
        let zk = shape(steps, 5, false);
        assert!(zk.iter().all(|x| !matches!(x.shape, Shape::Sentinel(_))));
        assert!(zk.iter().any(|x| x.shape == Shape::Bridge));
        let kills = schedule(5, 60_000, 3, 3, 3_000, &"kill".parse().unwrap());
        assert!(
            shape(kills, 5, true)
                .iter()
                .all(|x| x.kind == FaultKind::Kill && x.shape == Shape::Split)
        );
    }
}
