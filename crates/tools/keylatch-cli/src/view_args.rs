//! The arguments of `keylatch top` and `keylatch serve` (kept apart from their code, so that
//! the command line's types import nothing that imports them).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;

fn parse_duration(text: &str) -> Result<Duration, String> {
    keylatch_redis::parse_duration(text)
}

/// `keylatch top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// The names to show (a Redis glob, as SCAN MATCH takes it).
    #[arg(long, default_value = "*", value_name = "GLOB")]
    pub pattern: String,

    /// How often the view is read and redrawn.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DUR")]
    pub every: Duration,

    /// Print the view once, without clearing the screen, and exit.
    #[arg(long)]
    pub once: bool,
}

/// `keylatch serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve the page on this address (loopback unless --allow-remote).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:7878")]
    pub http: SocketAddr,

    /// Accept an --http address that is not loopback (the page shows lock names, hosts,
    /// process ids and command lines to whoever can reach it).
    #[arg(long)]
    pub allow_remote: bool,

    /// The names to show (a Redis glob, as SCAN MATCH takes it).
    #[arg(long, default_value = "*", value_name = "GLOB")]
    pub pattern: String,

    /// How often the view is read from Redis and the page refreshes.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DUR")]
    pub every: Duration,
}
