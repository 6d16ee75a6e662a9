//! What holder metadata costs: the reentrant lock's lock + unlock by a client that records
//! holder metadata (the default) and by one that does not (`Config::holder_metadata` off),
//! sampled in turn in the same run, so that a machine slowing down slows both alike.

use std::time::Instant;

use keylatch::{Client, Config};

use super::{Row, summarise};
use crate::failure::Failure;

/// The two rows: metadata on, then off.
pub(super) async fn rows(
    config: &Config,
    prefix: &str,
    ops: usize,
    rt: f64,
    quiet: bool,
) -> Result<[Row; 2], Failure> {
    let with = Client::connect_with(config.clone()).await?;
    let mut off = config.clone();
    off.holder_metadata = false;
    let without = Client::connect_with(off).await?;
    let locks = [
        with.lock(&format!("{prefix}:meta-on")),
        without.lock(&format!("{prefix}:meta-off")),
    ];
    for lock in &locks {
        lock.lock().await?.unlock().await?;
    }
    let progress = super::bar(ops as u64, "holder metadata on / off", quiet);
    let mut samples = [Vec::with_capacity(ops), Vec::with_capacity(ops)];
    let mut spent = [std::time::Duration::ZERO; 2];
    for i in 0..ops {
        // Alternate which goes first, so neither always follows the other.
        for k in [i % 2, 1 - i % 2] {
            let t = Instant::now();
            locks[k].lock().await?.unlock().await?;
            let took = t.elapsed();
            samples[k].push(took);
            spent[k] += took;
        }
        progress.inc(1);
    }
    progress.finish_and_clear();
    let [on_samples, off_samples] = samples;
    let _ = with.shutdown().await;
    let _ = without.shutdown().await;
    Ok([
        summarise(
            "reentrant lock+unlock, holder metadata on",
            on_samples,
            spent[0],
            rt,
        ),
        summarise(
            "reentrant lock+unlock, holder metadata off",
            off_samples,
            spent[1],
            rt,
        ),
    ])
}
