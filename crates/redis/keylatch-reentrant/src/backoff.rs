//! How long a spin lock's waiter sleeps between attempts: [`SpinBackoff`] (Redisson's
//! `LockOptions.BackOff`).
//!
//! May import `keylatch-core`.

use std::time::Duration;

use keylatch_core::{Error, Result, lock::jitter};

/// The pause between a spin lock's attempts (Redisson's `LockOptions.BackOff`).
///
/// The default is exponential with jitter, Redisson's defaults: from 1 ms, times 2 per
/// refused attempt, at most 128 ms, each pause drawn within ±20 % of its step so waiters that
/// started together drift apart. [`SpinBackoff::constant`] pauses the same time every
/// attempt (Redisson's `ConstantBackOff`, default 64 ms).
///
/// ```
/// use std::time::Duration;
/// use keylatch_reentrant::SpinBackoff;
///
/// let fast = SpinBackoff::exponential(Duration::from_millis(2), Duration::from_millis(50), 2);
/// let steady = SpinBackoff::constant(Duration::from_millis(20));
/// assert_ne!(fast, steady);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpinBackoff {
    /// From `initial`, multiplied by `multiplier` after each refused attempt, at most `max`;
    /// each pause jittered by ±20 %.
    Exponential {
        /// The first pause.
        initial: Duration,
        /// The longest pause.
        max: Duration,
        /// The factor between two steps (at least 1).
        multiplier: u32,
    },
    /// The same pause after every refused attempt.
    Constant {
        /// The pause.
        delay: Duration,
    },
}

impl Default for SpinBackoff {
    fn default() -> Self {
        SpinBackoff::exponential(Duration::from_millis(1), Duration::from_millis(128), 2)
    }
}

impl SpinBackoff {
    /// Exponential with jitter (see [`SpinBackoff::Exponential`]). Checked by the next
    /// acquisition: zero pauses, `initial` above `max` and a zero `multiplier` are
    /// [`Error::InvalidConfig`].
    pub const fn exponential(initial: Duration, max: Duration, multiplier: u32) -> SpinBackoff {
        SpinBackoff::Exponential {
            initial,
            max,
            multiplier,
        }
    }

    /// The same pause every time (see [`SpinBackoff::Constant`]); a zero pause is refused by
    /// the next acquisition ([`Error::InvalidConfig`]).
    pub const fn constant(delay: Duration) -> SpinBackoff {
        SpinBackoff::Constant { delay }
    }

    /// Refuses settings that would spin without pausing or never grow.
    pub(crate) fn validate(&self) -> Result<()> {
        let refuse = |reason| {
            Err(Error::InvalidConfig {
                field: "spin_backoff",
                reason,
            })
        };
        match *self {
            SpinBackoff::Exponential { initial, .. } if initial.is_zero() => {
                refuse("the first pause must be above zero")
            }
            SpinBackoff::Exponential { initial, max, .. } if initial > max => {
                refuse("the first pause must not exceed the longest")
            }
            SpinBackoff::Exponential { multiplier: 0, .. } => {
                refuse("the multiplier must be at least 1")
            }
            SpinBackoff::Constant { delay } if delay.is_zero() => {
                refuse("the pause must be above zero")
            }
            _ => Ok(()),
        }
    }

    /// The pauses of one wait.
    pub(crate) fn pauses(self) -> Pauses {
        let next = match self {
            SpinBackoff::Exponential { initial, .. } => initial,
            SpinBackoff::Constant { delay } => delay,
        };
        Pauses {
            backoff: self,
            next,
        }
    }
}

/// The pauses of one wait, in order.
#[derive(Debug)]
pub(crate) struct Pauses {
    backoff: SpinBackoff,
    next: Duration,
}

impl Pauses {
    /// The pause before the next attempt.
    pub(crate) fn next_pause(&mut self) -> Duration {
        match self.backoff {
            SpinBackoff::Constant { delay } => delay,
            SpinBackoff::Exponential {
                max, multiplier, ..
            } => {
                let step = self.next;
                self.next = step.saturating_mul(multiplier).min(max);
                jitter(step).max(Duration::from_micros(100))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_pauses_grow_to_the_max_within_the_jitter() {
        let mut pauses = SpinBackoff::default().pauses();
        let steps: Vec<Duration> = (0..12).map(|_| pauses.next_pause()).collect();
        for (i, pause) in steps.iter().enumerate() {
            let step = Duration::from_millis(1u64 << i.min(7));
            assert!(
                *pause >= step * 8 / 10 && *pause <= step * 12 / 10,
                "{i}: {pause:?}"
            );
        }
    }

    #[test]
    fn constant_pauses_do_not_change() {
        let mut pauses = SpinBackoff::constant(Duration::from_millis(7)).pauses();
        assert!((0..5).all(|_| pauses.next_pause() == Duration::from_millis(7)));
    }

    #[test]
    fn bad_settings_are_typed_errors() {
        let ms = Duration::from_millis;
        for bad in [
            SpinBackoff::exponential(Duration::ZERO, ms(10), 2),
            SpinBackoff::exponential(ms(20), ms(10), 2),
            SpinBackoff::exponential(ms(1), ms(10), 0),
            SpinBackoff::constant(Duration::ZERO),
        ] {
            assert!(matches!(
                bad.validate(),
                Err(Error::InvalidConfig {
                    field: "spin_backoff",
                    ..
                })
            ));
        }
        assert!(SpinBackoff::default().validate().is_ok());
    }
}
