//! The one clock every process of a run records with.

/// Nanoseconds on the host's `CLOCK_MONOTONIC`, read with a raw system call (rustix's
/// linux_raw backend), so a process under a preload library that shifts clocks (the nemesis's
/// clock shift, libfaketime) still records the host's time.
/// Network namespaces share this clock, so the harness and every worker can be compared.
pub fn now_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}
