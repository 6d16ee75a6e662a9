//! `keylatch inspect` on a `zk://` URL: the nodes under each name's path (Curator's layout),
//! the holder first, with the owner id each carries. Writes nothing.

use keylatch::zookeeper::{Contender, Contenders, ZkClient};
use serde_json::{Value, json};

use crate::cli::InspectArgs;
use crate::failure::Failure;

/// The report of one name.
pub async fn describe(zk: &ZkClient, name: &str, limit: usize) -> Result<Value, Failure> {
    let Contenders {
        path,
        nodes,
        leases,
        ..
    } = zk.contenders(name, limit).await?;
    let kind = match (nodes.first().map(|n| n.kind), leases.is_empty()) {
        (None, true) => "free",
        (None, false) => "semaphore",
        (Some("lock"), _) => "mutex",
        (Some(_), _) => "read-write lock",
    };
    let shown = |list: &[Contender]| -> Vec<Value> {
        list.iter()
            .take(limit)
            .map(|c| json!({"node": c.node, "kind": c.kind, "owner": c.data}))
            .collect()
    };
    Ok(json!({
        "name": name,
        "store": "zookeeper",
        "path": path,
        "kind": kind,
        "nodes_total": nodes.len(),
        "nodes": shown(&nodes),
        "leases_total": leases.len(),
        "leases": shown(&leases),
    }))
}

/// Prints `report` for a terminal.
pub fn print_text(report: &Value) {
    println!(
        "{} (zookeeper {}): {}",
        report["name"].as_str().unwrap_or_default(),
        report["path"].as_str().unwrap_or_default(),
        report["kind"].as_str().unwrap_or_default()
    );
    for (list, total, title) in [
        ("nodes", "nodes_total", "contenders, first holds"),
        ("leases", "leases_total", "permits held"),
    ] {
        let count = report[total].as_u64().unwrap_or(0);
        if count == 0 {
            continue;
        }
        println!("  {title} ({count}):");
        for (i, node) in report[list].as_array().into_iter().flatten().enumerate() {
            println!(
                "    {}. {} {} owner {}",
                i + 1,
                node["kind"].as_str().unwrap_or_default(),
                node["node"].as_str().unwrap_or_default(),
                node["owner"].as_str().unwrap_or("(gone)")
            );
        }
    }
}

/// `inspect` of `args.names` once (`--watch` is for Redis).
pub async fn inspect(zk: &ZkClient, args: &InspectArgs) -> Result<(), Failure> {
    for name in &args.names {
        let report = describe(zk, name, args.limit as usize).await?;
        if args.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&report).unwrap_or_default()
            );
        } else {
            print_text(&report);
        }
    }
    Ok(())
}
