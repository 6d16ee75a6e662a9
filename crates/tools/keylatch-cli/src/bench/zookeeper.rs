//! `keylatch bench` on a `zk://` URL: the lock family and the ZooKeeper semaphore (through
//! `as_zookeeper()`), beside the raw requests a lock needs — create ephemeral-sequential,
//! getChildren, delete, sent with zookeeper-client on a session of their own — and one raw
//! `exists` round trip.
//! Everything happens under `/keylatch/keylatch-bench-<client id>`, removed at the end.

use super::*;
use crate::zk_raw::{BASE_PATH, RawZk};

/// The ZooKeeper scenarios.
pub(super) async fn suite(config: Config, args: &BenchArgs) -> Result<Suite, Failure> {
    let client = Client::connect_with(config.clone()).await?;
    let raw = match RawZk::connect(&config).await {
        Ok(raw) => raw,
        Err(failure) => {
            let _ = client.shutdown().await;
            return Err(failure);
        }
    };
    let scratch = format!("keylatch-bench-{}", client.id());
    let result = scenarios(&client, &raw, &scratch, args).await;
    let _ = client.shutdown().await;
    raw.remove_tree(&format!("{BASE_PATH}/{scratch}")).await;
    result
}

async fn scenarios(
    client: &Client,
    raw: &RawZk,
    scratch: &str,
    args: &BenchArgs,
) -> Result<Suite, Failure> {
    let zk = client
        .as_zookeeper()
        .ok_or_else(|| Failure::new(crate::failure::EX_SOFTWARE, "not a ZooKeeper client"))?;
    let ops = args.ops as usize;
    let quiet = args.json;
    let mut suite = Suite::new("zookeeper", "exists", "create+getChildren+delete");
    let raw_dir = format!("{BASE_PATH}/{scratch}/raw");
    raw.mkdir(&raw_dir).await?;

    let lock = client.lock(&format!("{scratch}/uncontended"));
    let round_trip = || raw.round_trip(&raw_dir);
    headline(&mut suite, &lock, args, round_trip, || {
        raw.floor_once(&raw_dir)
    })
    .await?;
    let rt = suite.rt();

    let reentrant: Arc<dyn DistributedLock> = Arc::new(client.lock(&format!("{scratch}/handoff")));
    let row = handoff(HANDOFF_SCENARIO, reentrant, ops, rt, quiet).await?;
    suite.push(row, false);

    let primitives: Vec<(&str, Arc<dyn DistributedLock>)> = vec![
        (
            "fair lock+unlock, 1 task",
            Arc::new(client.fair_lock(&format!("{scratch}/fair"))),
        ),
        (
            "read lock+unlock, 1 task",
            Arc::new(client.rw_lock(&format!("{scratch}/rw")).read_lock()),
        ),
        (
            "write lock+unlock, 1 task",
            Arc::new(client.rw_lock(&format!("{scratch}/rw")).write_lock()),
        ),
    ];
    for (label, lock) in primitives {
        suite.push(
            uncontended(label, lock.as_ref(), ops, rt, quiet).await?,
            true,
        );
    }
    // The facade's semaphore is Redis-only: ZooKeeper's is reached through as_zookeeper().
    let semaphore = zk.semaphore(&format!("{scratch}/semaphore"), 1)?;
    let row = uncontended(SEMAPHORE_SCENARIO, &semaphore.as_lock(), ops, rt, quiet).await?;
    suite.push(row, true);
    let fair: Arc<dyn DistributedLock> =
        Arc::new(client.fair_lock(&format!("{scratch}/fair-handoff")));
    let row = handoff(FAIR_HANDOFF_SCENARIO, fair, ops, rt, quiet).await?;
    suite.push(row, false);
    let permit: Arc<dyn DistributedLock> = Arc::new(semaphore.as_lock());
    let row = handoff(SEMAPHORE_HANDOFF_SCENARIO, permit, ops, rt, quiet).await?;
    suite.push(row, false);
    Ok(suite)
}
