//! The one back-off every retry loop of keylatch uses.

use std::time::Duration;

/// Exponential back-off: delays that double from `first` up to `max`. Every retry loop of
/// keylatch (lost replies, undos, reconnections) takes its delays from one of these.
///
/// ```
/// use std::time::Duration;
/// use keylatch_core::Backoff;
///
/// let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(35));
/// let delays: Vec<u128> = (0..4).map(|_| backoff.next_delay().as_millis()).collect();
/// assert_eq!(delays, [10, 20, 35, 35]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    /// Delays from `first`, doubling, at most `max`.
    pub const fn new(first: Duration, max: Duration) -> Backoff {
        Backoff { next: first, max }
    }

    /// The delay before the next try (and doubles the one after it).
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next.min(self.max);
        self.next = delay.saturating_mul(2).min(self.max);
        delay
    }

    /// The delay before try `n` (0-based) of a back-off from `first` to `max`, for loops that
    /// count their failures themselves.
    pub fn nth(first: Duration, max: Duration, n: u32) -> Duration {
        first
            .saturating_mul(1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX))
            .min(max)
    }

    /// Sleeps the next delay.
    pub async fn wait(&mut self) {
        tokio::time::sleep(self.next_delay()).await;
    }
}
