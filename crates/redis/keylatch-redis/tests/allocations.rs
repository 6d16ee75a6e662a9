//! How many allocations a lock + unlock costs, counted on one thread that runs everything
//! (the caller, the connection's tasks, the watchdog): keylatch's reentrant lock against its
//! own two scripts sent raw through one redis-rs connection, as `cargo bench --bench tax`
//! does. It lives in this crate because the counting allocator replaces the global allocator
//! of its test binaries, and the benches (in `keylatch-tests`) must not run on it.
//!
//! ```sh
//! cargo test -p keylatch-core --test allocations -- --nocapture
//! ```
use std::time::Duration;

use keylatch_testkit::RedisServer;

/// Lock + unlock pairs measured per side.
const PAIRS: u64 = 500;

/// Runs `work` on a fresh current-thread runtime and counts the allocations of the thread.
fn counted<F: std::future::Future<Output = ()>>(runtime: &tokio::runtime::Runtime, work: F) -> u64 {
    allocation_counter::measure(|| runtime.block_on(work)).count_total
}

#[test]
fn a_lock_and_unlock_allocate_about_what_the_raw_scripts_do() {
    let server = RedisServer::start().expect("start redis-server");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (client, raw) = runtime.block_on(async {
        let config = keylatch::Config::builder()
            .url(server.url())
            .build()
            .unwrap();
        let client = keylatch::Client::connect_with(config).await.unwrap();
        let raw = keylatch::redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        (client, raw)
    });
    let acquire =
        keylatch::redis::Script::new(include_str!("../../keylatch-reentrant/src/lua/acquire.lua"));
    let release =
        keylatch::redis::Script::new(include_str!("../../keylatch-reentrant/src/lua/release.lua"));
    let keylatch_pair = || async {
        let guard = client.lock("alloc").lock().await.unwrap();
        guard.unlock().await.unwrap();
    };
    let raw_pair = || {
        let mut conn = raw.clone();
        let (acquire, release) = (&acquire, &release);
        async move {
            // What the tax bench's raw side does per pair, names included.
            let name = "alloc-raw";
            let token = format!("redisson_lock_token:{{{name}}}");
            let channel = format!("redisson_lock__channel:{{{name}}}");
            let _: keylatch::redis::Value = acquire
                .key(name)
                .key(&token)
                .key(format!("keylatch_meta:{{{name}}}"))
                .arg(30_000)
                .arg("raw-owner:1")
                .arg("0")
                .arg("0")
                .arg("")
                .invoke_async(&mut conn)
                .await
                .unwrap();
            let _: keylatch::redis::Value = release
                .key(name)
                .key(&channel)
                .key(format!("keylatch_meta:{{{name}}}"))
                .arg("0")
                .arg("raw-owner:1")
                .invoke_async(&mut conn)
                .await
                .unwrap();
        }
    };
    // Warm up: scripts loaded, connections open, maps grown.
    runtime.block_on(async {
        for _ in 0..50 {
            keylatch_pair().await;
            raw_pair().await;
        }
    });
    let ours = counted(&runtime, async {
        for _ in 0..PAIRS {
            keylatch_pair().await;
        }
    });
    let theirs = counted(&runtime, async {
        for _ in 0..PAIRS {
            raw_pair().await;
        }
    });
    let (ours, theirs) = (ours as f64 / PAIRS as f64, theirs as f64 / PAIRS as f64);
    println!(
        "allocations per lock + unlock: keylatch {ours:.1}, its scripts sent raw {theirs:.1} \
         ({:.2}x)",
        ours / theirs
    );
    // Measured 2026-11-25: 24 against 27 (a new handle per pair, as above). Before the
    // watchdog registry stopped allocating and a script call was built in one buffer, 34.
    assert!(
        ours <= theirs + 1.0,
        "keylatch allocates {ours:.1} per pair, the raw scripts {theirs:.1}"
    );
    runtime.block_on(async {
        client.shutdown().await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    });
}
