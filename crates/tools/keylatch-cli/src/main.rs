//! `keylatch`: run a command under a Redis-backed distributed lock, inspect locks.
//!
//! ```text
//! keylatch run nightly-report -- ./report.sh          # one node at a time
//! keylatch run --wait 10s --fair jobs -- ./job.sh     # FIFO, give up after 10 s (exit 75)
//! keylatch run --semaphore 3 encoders -- ffmpeg ...   # at most 3 at once, fleet-wide
//! keylatch inspect nightly-report --json
//! keylatch top --pattern 'jobs:*'                    # live: holders, waiters, wait times
//! keylatch serve --http 127.0.0.1:7878               # the same as a web page, /metrics
//! keylatch latch wait --wait 1m shards-loaded          # until the count is 0 (exit 75 if not)
//! keylatch queue offer reminders "call back" --delay 30s
//! keylatch queue transfer reminders order-timeouts     # a transfer agent for Java clients
//! keylatch --url zk://127.0.0.1:2181 demo              # the demo's story on ZooKeeper
//! keylatch --url redis://127.0.0.1:6379 bench --compare zk://127.0.0.1:2181
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod bench;
mod cli;
mod connection;
mod demo;
mod demo_zk;
mod failure;
mod inspect;
mod inspect_zk;
mod latch;
mod queue;
mod queue_agent;
mod reap;
mod run;
mod serve;
mod serve_page;
mod top;
mod view;
mod view_args;
mod zk_raw;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::failure::{EX_SOFTWARE, EX_USAGE};

fn main() -> ExitCode {
    if let Some(code) = reap::main_if_reaper() {
        return code;
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { EX_USAGE } else { 0 });
        }
    };
    init_tracing(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("keylatch: cannot start the async runtime: {err}");
            return ExitCode::from(EX_SOFTWARE);
        }
    };
    let servers = cli.connection.redis.len();
    let result = connection::config(&cli.connection).and_then(|config| {
        let per_server = connection::configs_per_server(&cli.connection, &config);
        runtime.block_on(async move {
            match cli.command {
                Command::Run(args) if servers >= 3 => run::run_redlock(per_server, args).await,
                _ if servers > 1 => Err(failure::Failure::new(
                    failure::EX_USAGE,
                    format!(
                        "--redis was given {servers} times: only `run` takes several servers, \
                         3 or more (a RedLock over independent servers)"
                    ),
                )),
                Command::Run(args) => run::run(config, args).await,
                Command::Inspect(args) => inspect::inspect(config, args).await.map(|()| 0),
                Command::Top(args) => top::top(config, args).await.map(|()| 0),
                Command::Serve(args) => serve::serve(config, args).await.map(|()| 0),
                Command::Latch(command) => latch::latch(config, command).await,
                Command::Queue(command) => queue::queue(config, command).await,
                Command::Bench(args) => bench::bench(config, args).await.map(|()| 0),
                Command::Demo if zk_raw::is_zookeeper(&config) => demo_zk::demo(config).await,
                Command::Demo => demo::demo(config).await,
                Command::DemoWorker(args) if args.role == demo_zk::HOLDER_ROLE => {
                    demo_zk::worker(config, args).await.map(|()| 0)
                }
                Command::DemoWorker(args) => demo::worker(config, args).await.map(|()| 0),
            }
        })
    });
    // Background releases were awaited by the commands; do not wait for stray tasks.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            eprintln!("keylatch: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// Tracing on stderr: `RUST_LOG` when set (e.g. `RUST_LOG=keylatch=debug`), else warnings
/// and errors, `-v` debug, `-vv` trace. Colour only on a terminal.
fn init_tracing(verbose: u8) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;

    let level = match verbose {
        0 => "warn",
        1 => "debug",
        _ => "trace",
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::new(spec),
        _ => EnvFilter::new(level),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}
