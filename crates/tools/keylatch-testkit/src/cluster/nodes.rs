//! What the nodes say: `CLUSTER NODES` lines, the slot map they give, `INFO` fields.

use super::*;

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct NodeLine {
    pub(super) id: String,
    pub(super) port: u16,
    pub(super) flags: Vec<String>,
    /// The id of the primary, for a replica.
    pub(super) primary: Option<String>,
    /// Owned slot ranges, inclusive.
    pub(super) slots: Vec<(u16, u16)>,
}

impl NodeLine {
    pub(super) fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    pub(super) fn is_primary(&self) -> bool {
        self.has_flag("master")
    }

    pub(super) fn is_replica(&self) -> bool {
        self.has_flag("slave")
    }

    /// The cluster agreed that the node is down (`fail`, not just suspected `fail?`).
    pub(super) fn failed(&self) -> bool {
        self.has_flag("fail")
    }

    pub(super) fn owns(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
    }
}

/// Parses the text of `CLUSTER NODES`.
pub(super) fn parse_nodes(text: &str) -> io::Result<Vec<NodeLine>> {
    let bad = |line: &str| io::Error::other(format!("unexpected CLUSTER NODES line {line:?}"));
    let mut nodes = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 {
            return Err(bad(line));
        }
        // ip:port@cport[,hostname]
        let port = fields[1]
            .split(['@', ','])
            .next()
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| bad(line))?;
        let mut slots = Vec::new();
        // `[slot->-id]` / `[slot-<-id]`: a slot being migrated or imported, not owned.
        for range in fields[8..].iter().filter(|r| !r.starts_with('[')) {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            match (a.parse(), b.parse()) {
                (Ok(a), Ok(b)) => slots.push((a, b)),
                _ => return Err(bad(line)),
            }
        }
        nodes.push(NodeLine {
            id: fields[0].to_owned(),
            port,
            flags: fields[2].split(',').map(str::to_owned).collect(),
            primary: (fields[3] != "-").then(|| fields[3].to_owned()),
            slots,
        });
    }
    Ok(nodes)
}

/// The slot ranges of the primaries in `view`, with their owners' ids, sorted.
pub(super) fn slot_map(view: &[NodeLine]) -> Vec<(u16, u16, &str)> {
    let mut map: Vec<(u16, u16, &str)> = view
        .iter()
        .filter(|n| n.is_primary())
        .flat_map(|n| n.slots.iter().map(|&(a, b)| (a, b, n.id.as_str())))
        .collect();
    map.sort_unstable();
    map
}

/// The `field:value` line of an `INFO`-style text, if present.
pub(super) fn info_field<'a>(text: &'a str, field: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cluster_nodes() {
        let text = "\
    07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@40004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
    67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@40002,host.example master - 0 1426238316232 2 connected 5461-10922 [10923->-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca]
    e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 16383
    6ec23923021cf3ffec47632106199cb7f496ce01 :0@0 master,fail?,noaddr - 1426238316232 0 5 disconnected
    ";
        let nodes = parse_nodes(text).unwrap();
        assert_eq!(nodes.len(), 4);
        assert!(nodes[0].is_replica());
        assert_eq!(nodes[0].port, 30004);
        assert_eq!(
            nodes[0].primary.as_deref(),
            Some("e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca")
        );
        assert_eq!(nodes[1].port, 30002);
        assert_eq!(nodes[1].slots, vec![(5461, 10922)]);
        assert!(!nodes[1].owns(10923));
        assert!(nodes[2].is_primary() && nodes[2].has_flag("myself"));
        assert_eq!(nodes[2].slots, vec![(0, 5460), (16383, 16383)]);
        assert!(nodes[2].owns(16383) && !nodes[2].owns(5461));
        assert_eq!(nodes[3].port, 0);
        assert!(!nodes[3].failed() && nodes[3].has_flag("fail?"));
        let map = slot_map(&nodes);
        assert_eq!(map[0].0, 0);
        assert_eq!(map.len(), 3);
        assert!(parse_nodes("garbage line").is_err());
    }

    #[test]
    fn reads_info_fields() {
        let text = "# Cluster\r\ncluster_state:ok\r\ncluster_slots_assigned:16384\r\n";
        assert_eq!(info_field(text, "cluster_state"), Some("ok"));
        assert_eq!(info_field(text, "cluster_slots"), None);
        assert_eq!(info_field(text, "missing"), None);
    }
}
