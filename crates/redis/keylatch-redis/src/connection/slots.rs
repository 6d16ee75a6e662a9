//! A Redis Cluster's map of slots: the slot of a key (CRC16 of its hash tag), the nodes, and
//! which primary serves which slots (`CLUSTER SLOTS`).
//!
//! May import: redis-rs only.

use std::sync::Arc;

use deadpool_redis::redis::{
    self, ErrorKind, RedisError, RedisResult, Value,
    cluster_async::ClusterConnection,
    cluster_routing::{RoutingInfo, SingleNodeRoutingInfo},
};

/// The number of hash slots of a Redis Cluster.
const SLOTS: u16 = 16384;

/// The hash slot of `key`: CRC16 of the key, or of its hash tag (the part between the first
/// `{` and the next `}`, when not empty), modulo 16384.
pub(crate) fn slot(key: &[u8]) -> u16 {
    let tag = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter()
            .position(|&b| b == b'}')
            .filter(|&close| close > 0)
            .map(|close| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tag.unwrap_or(key)) % SLOTS
}

/// A cluster node, as the cluster names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Node {
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl Node {
    /// Parses `host:port` (as in `MOVED 3999 127.0.0.1:6381`).
    pub(crate) fn parse(address: &str) -> Option<Node> {
        let (host, port) = address.rsplit_once(':')?;
        Some(Node {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port: port.parse().ok()?,
        })
    }

    pub(crate) fn routing(&self) -> SingleNodeRoutingInfo {
        SingleNodeRoutingInfo::ByAddress {
            host: self.host.clone(),
            port: self.port,
        }
    }
}

/// Which primary serves which slots, from `CLUSTER SLOTS`.
#[derive(Debug)]
pub(crate) struct SlotMap {
    /// `(first slot, last slot, primary)`, sorted by first slot.
    ranges: Vec<(u16, u16, Node)>,
}

impl SlotMap {
    /// Reads the map from any node.
    pub(crate) async fn read(conn: &mut ClusterConnection) -> RedisResult<SlotMap> {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SLOTS");
        let reply = conn
            .route_command(cmd, RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random))
            .await?;
        SlotMap::parse(reply).ok_or_else(|| {
            RedisError::from((
                ErrorKind::UnexpectedReturnType,
                "CLUSTER SLOTS: unexpected reply",
            ))
        })
    }

    fn parse(reply: Value) -> Option<SlotMap> {
        let Value::Array(entries) = reply else {
            return None;
        };
        let mut ranges = Vec::with_capacity(entries.len());
        for entry in entries {
            let Value::Array(fields) = entry else {
                return None;
            };
            let mut fields = fields.into_iter();
            let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(primary))) =
                (fields.next(), fields.next(), fields.next())
            else {
                return None;
            };
            let mut primary = primary.into_iter();
            let host = match primary.next()? {
                Value::BulkString(host) => String::from_utf8(host).ok()?,
                Value::SimpleString(host) => host,
                _ => return None,
            };
            let Some(Value::Int(port)) = primary.next() else {
                return None;
            };
            ranges.push((
                u16::try_from(first).ok()?,
                u16::try_from(last).ok()?,
                Node {
                    host,
                    port: u16::try_from(port).ok()?,
                },
            ));
        }
        ranges.sort_by_key(|range| range.0);
        Some(SlotMap { ranges })
    }

    /// A map of these `(first, last, primary)` ranges.
    #[cfg(test)]
    pub(crate) fn from_ranges(mut ranges: Vec<(u16, u16, Node)>) -> SlotMap {
        ranges.sort_by_key(|range| range.0);
        SlotMap { ranges }
    }

    /// The primary that serves `slot`.
    pub(crate) fn node_for(&self, slot: u16) -> Option<&Node> {
        let index = self.ranges.partition_point(|range| range.0 <= slot);
        let (first, last, node) = self.ranges.get(index.checked_sub(1)?)?;
        (*first <= slot && slot <= *last).then_some(node)
    }

    /// Whether `other` assigns every slot to the same primary.
    pub(crate) fn same_as(&self, other: &SlotMap) -> bool {
        self.ranges == other.ranges
    }

    /// The slots this map gives a primary other than the one `old` gave them (slots `old`
    /// did not know included), as `(first, last)` ranges.
    pub(crate) fn moved_since(&self, old: &SlotMap) -> Vec<(u16, u16)> {
        let mut moved: Vec<(u16, u16)> = Vec::new();
        for slot in 0..SLOTS {
            let now = self.node_for(slot);
            if now.is_none() || now == old.node_for(slot) {
                continue;
            }
            match moved.last_mut() {
                Some((_, last)) if *last + 1 == slot => *last = slot,
                _ => moved.push((slot, slot)),
            }
        }
        moved
    }

    /// The primaries.
    pub(crate) fn nodes(&self) -> Vec<Node> {
        let mut nodes: Vec<Node> = Vec::new();
        for (_, _, node) in &self.ranges {
            if !nodes.contains(node) {
                nodes.push(node.clone());
            }
        }
        nodes
    }
}

/// Reads the slot map, for grouping calls per node.
pub(crate) async fn slot_map(conn: &mut ClusterConnection) -> RedisResult<Arc<SlotMap>> {
    SlotMap::read(conn).await.map(Arc::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_hash_tags() {
        // Values from `CLUSTER KEYSLOT`.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{foo}:bar"), slot(b"foo"));
        assert_eq!(slot(b"redisson_lock__channel:{foo}"), slot(b"foo"));
        // An empty tag is no tag: the whole key is hashed.
        assert_eq!(slot(b"{}foo"), slot(b"{}foo"));
        assert_ne!(slot(b"{}foo"), slot(b"foo"));
        assert_eq!(slot(b"a{b}{c}"), slot(b"b"));
    }

    #[test]
    fn slot_map_lookup() {
        let node = |port| Node {
            host: "127.0.0.1".to_owned(),
            port,
        };
        let map = SlotMap {
            ranges: vec![
                (0, 5460, node(1)),
                (5461, 10922, node(2)),
                (10923, 16383, node(3)),
            ],
        };
        assert_eq!(map.node_for(0), Some(&node(1)));
        assert_eq!(map.node_for(5461), Some(&node(2)));
        assert_eq!(map.node_for(16383), Some(&node(3)));
        assert_eq!(map.nodes().len(), 3);
        let partial = SlotMap {
            ranges: vec![(10, 20, node(1))],
        };
        assert_eq!(partial.node_for(5), None);
        let failed_over = SlotMap {
            ranges: vec![
                (0, 5460, node(1)),
                (5461, 10922, node(4)),
                (10923, 16383, node(3)),
            ],
        };
        assert_eq!(failed_over.moved_since(&map), vec![(5461, 10922)]);
        assert!(map.moved_since(&map).is_empty());
        assert_eq!(partial.node_for(21), None);
        assert_eq!(
            Node::parse("127.0.0.1:6381"),
            Some(node(6381)).map(|mut n| {
                n.host = "127.0.0.1".to_owned();
                n
            })
        );
    }
}
