//! Metrics, through the `metrics` facade when the `metrics` feature is on (the application
//! picks the exporter); nothing at all without it.
//!
//! | metric | kind | labels | what |
//! |---|---|---|---|
//! | `keylatch_acquisitions_total` | counter | `primitive`, `outcome` | acquisitions, by how they ended: `acquired` (at the first try), `acquired_after_waiting` (a hand-off), `timed_out`, `error_or_cancelled` |
//! | `keylatch_wait_seconds` | histogram | `primitive` | how long acquisitions took, whatever their outcome |
//! | `keylatch_hold_seconds` | histogram | — | how long holds lasted, from acquisition to release |
//! | `keylatch_renewals_total` | counter | `outcome` | holds renewed by the watchdog: `renewed`, `gone` (found lost), `failed` (a call that failed) |
//! | `keylatch_holds_lost_total` | counter | — | holds reported lost |
//! | `keylatch_round_trips_total` | counter | — | commands and pipelines sent to Redis |

use std::time::Duration;

/// One acquisition ended.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub fn acquisition(primitive: &'static str, outcome: &'static str, took: Duration) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!("keylatch_acquisitions_total", "primitive" => primitive, "outcome" => outcome)
            .increment(1);
        metrics::histogram!("keylatch_wait_seconds", "primitive" => primitive).record(took);
    }
}

/// One hold was released (or given up) after `held`.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub fn released(held: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!("keylatch_hold_seconds").record(held);
}

/// Renewal results of one watchdog tick.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub fn renewals(outcome: &'static str, count: u64) {
    #[cfg(feature = "metrics")]
    if count > 0 {
        metrics::counter!("keylatch_renewals_total", "outcome" => outcome).increment(count);
    }
}

/// A hold was reported lost.
pub fn hold_lost() {
    #[cfg(feature = "metrics")]
    metrics::counter!("keylatch_holds_lost_total").increment(1);
}

/// A command or pipeline was sent.
pub fn round_trip() {
    #[cfg(feature = "metrics")]
    metrics::counter!("keylatch_round_trips_total").increment(1);
}
