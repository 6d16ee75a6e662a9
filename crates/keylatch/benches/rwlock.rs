//! Benchmark. (Being built.)
fn main() {}
