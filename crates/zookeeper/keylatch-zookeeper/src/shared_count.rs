//! Curator's `SharedCount` node, read as a semaphore's maximum (`InterProcessSemaphoreV2`'s
//! `SharedCountReader` constructor): a persistent node whose data is the count as a 4-byte
//! big-endian signed integer (`SharedCount.toBytes`: `ByteBuffer.putInt`), created with a seed
//! when missing (`SharedValue.start`: container parents, the seed as data), and watched for
//! changes.
//!
//! May import: keylatch-core, zookeeper-client, `session`.

use keylatch_core::{Error, Result, StoreError};
use zookeeper_client as zk;

use crate::session::Shared;

/// A shared count node whose data is not a count (4 bytes, a big-endian `int`).
#[derive(Debug, thiserror::Error)]
#[error("the shared count node {path:?} holds {len} bytes, not a 4-byte count")]
pub struct BadSharedCount {
    /// The node's path.
    pub path: String,
    /// How many bytes its data has.
    pub len: usize,
}

/// The count in a shared count node's data.
///
/// # Errors
/// [`BadSharedCount`] (as the source of [`Error::Store`]) when the data is not 4 bytes.
pub(crate) fn decode(path: &str, data: &[u8]) -> Result<i32> {
    let bytes: [u8; 4] = data.try_into().map_err(|_| {
        Error::Store(StoreError::new(BadSharedCount {
            path: path.to_owned(),
            len: data.len(),
        }))
    })?;
    Ok(i32::from_be_bytes(bytes))
}

/// The count now at `path`, and a watch that fires when it changes (or the node goes). A
/// missing node is created with `seed`, as a Curator `SharedCount` with that seed does when
/// started (another client's create first is fine).
///
/// # Errors
/// [`BadSharedCount`] as the source of [`Error::Store`]; store errors.
pub(crate) async fn read_and_watch(
    shared: &Shared,
    path: &str,
    seed: i32,
) -> Result<(i32, zk::OneshotWatcher)> {
    let client = shared.client()?;
    for _ in 0..3 {
        match client.get_and_watch_data(path).await {
            Ok((data, _, watcher)) => return Ok((decode(path, &data)?, watcher)),
            Err(zk::Error::NoNode) => create(shared, &client, path, seed).await?,
            Err(err) => return Err(shared.error(err)),
        }
    }
    Err(Error::Store(StoreError::new(zk::Error::NoNode)))
}

/// Creates the count node with `seed` (its parents as containers); an existing one is kept.
async fn create(shared: &Shared, client: &zk::Client, path: &str, seed: i32) -> Result<()> {
    let persistent = zk::CreateMode::Persistent.with_acls(shared.acls);
    let data = seed.to_be_bytes();
    let mut result = client.create(path, &data, &persistent).await.map(drop);
    if matches!(result, Err(zk::Error::NoNode))
        && let Some((parent, _)) = path.rsplit_once('/')
        && !parent.is_empty()
    {
        let dirs = shared.dir_mode().with_acls(shared.acls);
        match client.mkdir(parent, &dirs).await {
            Ok(()) | Err(zk::Error::NodeExists) => {}
            Err(err) => return Err(shared.error(err)),
        }
        result = client.create(path, &data, &persistent).await.map(drop);
    }
    match result {
        Ok(()) | Err(zk::Error::NodeExists) => Ok(()),
        Err(err) => Err(shared.error(err)),
    }
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn counts_are_four_big_endian_bytes() {
        assert_eq!(decode("/c", &[0, 0, 0, 3]).unwrap(), 3);
        assert_eq!(decode("/c", &[0, 0, 1, 0]).unwrap(), 256);
        assert_eq!(decode("/c", &[0xff, 0xff, 0xff, 0xff]).unwrap(), -1);
        assert!(decode("/c", b"3").is_err());
        assert!(decode("/c", &[0, 0, 0, 0, 3]).is_err());
    }
}
