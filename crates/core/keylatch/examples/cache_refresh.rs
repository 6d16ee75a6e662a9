//! Cache refresh under a read-write lock.
//!
//! A "catalogue" is cached in Redis as one version key and eight item keys. Six readers serve
//! from it under the read lock (they share it); a refresher rebuilds it under the write lock,
//! one key at a time with pauses, as a real rebuild would — so a half-built cache exists in
//! Redis while it works. A reader checks that every item belongs to the version it read: under
//! the lock it never sees a half-built cache. A seventh reader that takes no lock shows what the
//! lock prevents (it is only counted, not judged).
//!
//! The program exits non-zero if a locked reader ever saw a half-built cache, or if a refresh
//! did not get in while readers kept reading.
//!
//! ```text
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p keylatch --example cache_refresh
//! ```
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keylatch::redis::AsyncCommands;

const ITEMS: usize = 8;
const READERS: usize = 6;
const REFRESHES: u64 = 10;

#[derive(Default)]
struct Counts {
    served: AtomicU64,
    torn: AtomicU64,
    unlocked_served: AtomicU64,
    unlocked_torn: AtomicU64,
}

/// The cache's keys: `{prefix}:version` and `{prefix}:item:<i>`.
#[derive(Clone)]
struct Cache {
    prefix: String,
}

impl Cache {
    fn version_key(&self) -> String {
        format!("{}:version", self.prefix)
    }

    fn item_key(&self, i: usize) -> String {
        format!("{}:item:{i}", self.prefix)
    }

    /// Reads the whole cache, one key at a time; true if every item matches the version.
    async fn read_consistent(
        &self,
        redis: &mut keylatch::Connection,
    ) -> Result<bool, keylatch::redis::RedisError> {
        let version: u64 = redis.get(self.version_key()).await?;
        for i in 0..ITEMS {
            let item: Option<String> = redis.get(self.item_key(i)).await?;
            if item.as_deref() != Some(item_value(version, i).as_str()) {
                return Ok(false);
            }
            tokio::task::yield_now().await;
        }
        Ok(true)
    }

    /// Rebuilds the cache as `version`, pausing between keys.
    async fn rebuild(
        &self,
        redis: &mut keylatch::Connection,
        version: u64,
    ) -> Result<(), keylatch::redis::RedisError> {
        let _: () = redis.set(self.version_key(), version).await?;
        for i in 0..ITEMS {
            tokio::time::sleep(Duration::from_millis(3)).await;
            let _: () = redis.set(self.item_key(i), item_value(version, i)).await?;
        }
        Ok(())
    }
}

fn item_value(version: u64, i: usize) -> String {
    format!("v{version}:item{i}")
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("cache_refresh: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let client = keylatch::Client::connect_from_env().await?;
    // Unique names, so runs against a shared server do not meet.
    let lock_name = format!("example:cache-refresh:{}", std::process::id());
    let cache = Cache {
        prefix: format!("{lock_name}:cache"),
    };
    let rw = client.rw_lock(&lock_name);
    {
        let mut redis = client.connection().await?;
        let guard = rw.write().await?;
        cache.rebuild(&mut redis, 0).await?;
        guard.unlock().await?;
    }
    println!(
        "{READERS} readers serve a cache of {ITEMS} keys under the read lock; a refresher \
         rebuilds it {REFRESHES} times under the write lock"
    );

    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..READERS {
        let (rw, cache, counts, stop) = (rw.clone(), cache.clone(), counts.clone(), stop.clone());
        let mut redis = client.connection().await?;
        readers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let guard = rw.read().await?;
                let consistent = cache.read_consistent(&mut redis).await?;
                guard.unlock().await?;
                counts.served.fetch_add(1, Ordering::Relaxed);
                if !consistent {
                    counts.torn.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    // The contrast: the same reads without the lock.
    let unlocked = {
        let (cache, counts, stop) = (cache.clone(), counts.clone(), stop.clone());
        let mut redis = client.connection().await?;
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let consistent = cache.read_consistent(&mut redis).await?;
                counts.unlocked_served.fetch_add(1, Ordering::Relaxed);
                if !consistent {
                    counts.unlocked_torn.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
        })
    };

    let mut redis = client.connection().await?;
    let mut longest_wait = Duration::ZERO;
    for version in 1..=REFRESHES {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let asked = Instant::now();
        // A bounded wait: readers never stop, so a starved writer would show here.
        let Some(guard) = rw
            .write_lock()
            .try_lock_for(Duration::from_secs(10), None)
            .await?
        else {
            eprintln!("refresh {version}: the writer did not get in within 10 s");
            stop.store(true, Ordering::Relaxed);
            return Ok(false);
        };
        let waited = asked.elapsed();
        longest_wait = longest_wait.max(waited);
        let started = Instant::now();
        cache.rebuild(&mut redis, version).await?;
        guard.unlock().await?;
        println!(
            "refresh {version:2}: waited {:6.2} ms for the readers to drain, rebuilt in {:5.1} ms",
            waited.as_secs_f64() * 1e3,
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.await?.map_err(|e| e.to_string())?;
    }
    unlocked.await?.map_err(|e| e.to_string())?;

    let served = counts.served.load(Ordering::Relaxed);
    let torn = counts.torn.load(Ordering::Relaxed);
    println!(
        "locked readers:  {served} reads served, {torn} saw a half-built cache; longest writer \
         wait {:.2} ms",
        longest_wait.as_secs_f64() * 1e3
    );
    println!(
        "unlocked reader: {} reads, {} saw a half-built cache (what the lock prevents)",
        counts.unlocked_served.load(Ordering::Relaxed),
        counts.unlocked_torn.load(Ordering::Relaxed)
    );
    let mut keys = vec![cache.version_key()];
    keys.extend((0..ITEMS).map(|i| cache.item_key(i)));
    let _: () = redis.del(keys).await?;
    if torn > 0 || served == 0 {
        eprintln!("FAILED: a locked reader saw a half-built cache");
        return Ok(false);
    }
    println!("ok: under the read-write lock no reader ever saw a half-built cache");
    Ok(true)
}
