//! The distributed count-down latch of [keylatch](https://docs.rs/keylatch), compatible with
//! Redisson's `RCountDownLatch`: processes wait until a count reaches zero, counted down by
//! any process.
//!
//! Most users reach it through the facade: `client.latch(name)`.
//!
//! ## When to use a latch
//!
//! - **Wait for N things to finish** (N loaders, N shards migrated, N workers registered):
//!   set the count to N once, each finisher counts down, and whoever needs all N waits.
//! - **A one-shot gate**: a count of 1 that one process counts down when the gate opens.
//! - **Not for mutual exclusion** (a lock), nor to cap concurrency (a semaphore), nor for a
//!   gate that must close again by itself: a latch at zero is gone, and the next
//!   `try_set_count` starts a new one.
//!
//! ```no_run
//! # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
//! use std::time::Duration;
//!
//! let migrated = client.latch("shards-migrated");
//! migrated.try_set_count(3).await?;
//! if !migrated.wait_for(Duration::from_secs(60)).await? {
//!     eprintln!("still {} shards to go", migrated.count().await?);
//! }
//! # Ok(()) }
//! ```
//!
//! See `docs/data-layout.md` for the keys and `docs/choosing-a-primitive.md` for the others.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod latch;
mod scripts;

pub use latch::{CountDownLatch, MAX_COUNT};
pub use scripts::SCRIPTS;
