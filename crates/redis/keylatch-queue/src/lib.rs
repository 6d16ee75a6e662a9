//! The delayed queue of [keylatch](https://docs.rs/keylatch), in the layout of Redisson's
//! `RDelayedQueue`: producers offer values with a delay, consumers take each value once its
//! delay has passed.
//!
//! Most users reach it through the facade: `client.delayed_queue::<Codec>(name)`.
//!
//! What it does beyond Redisson's:
//! - **No transfer task to keep alive.** A take moves what is due and pops it in one script,
//!   so elements are delivered on time whether or not any process runs a transfer task
//!   (Redisson's lives in each JVM that holds an `RDelayedQueue` object; if none does, nothing
//!   moves).
//! - **The server's clock** decides when an element is due (`TIME` in the scripts), for
//!   offers with a delay and for takes.
//! - **Nothing lost to a lost reply**: a take whose reply never arrived (or whose future was
//!   dropped) puts its element back.
//! - **A reliable mode** (at least once): [`DelayedQueue::take_reliably`] returns a
//!   [`Delivery`] to [`ack`](DelayedQueue::ack); one not acknowledged within the visibility
//!   timeout is delivered again, counted, and dead-lettered after the most deliveries.
//!
//! ```no_run
//! # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
//! use std::time::Duration;
//! use keylatch::queue::Long;
//!
//! let retries = client.delayed_queue::<Long>("order-retries")?;
//! retries.offer(&42, Duration::from_secs(5)).await?;
//! if let Some(order) = retries.poll_for(Duration::from_secs(10)).await? {
//!     println!("retrying order {order}");
//! }
//! # Ok(()) }
//! ```
//!
//! See `docs/data-layout.md` for the keys and `docs/choosing-a-primitive.md` for the others.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod claim;
mod codec;
mod json;
mod keys;
mod kryo;
mod queue;
mod reliable;
mod reply;
mod scripts;
mod transfer;

pub use codec::{Bytes, Codec, Long, Utf8};
pub use json::{JavaClass, JavaLong, JsonJackson};
pub use kryo::{Kryo5, KryoScalar};
pub use queue::{DelayedQueue, MAX_DELAY, MOVE_BATCH};
pub use reliable::Delivery;
pub use reply::{QueueCounts, ReliableOptions, Transfer};
pub use scripts::SCRIPTS;
