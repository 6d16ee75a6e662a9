//! A child process for crash tests. (Being built.)
fn main() {}
