//! The command line, as clap types.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Run commands under Redis-backed distributed locks, across a whole fleet.
///
/// Exit codes of `keylatch run`: the command's own; 75 when the lock was not acquired within
/// --wait; 76 when the lock was lost while the command ran; 130 (SIGINT) or 143 (SIGTERM) when
/// interrupted while waiting for the lock; 64 for bad arguments (and what the store has no
/// form of, such as a latch on ZooKeeper); 69 when the store cannot be reached; 77 when it
/// refused the credentials or a permission; 70 for any other error.
#[derive(Debug, Parser)]
#[command(name = "keylatch", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub connection: ConnectionArgs,

    /// Print tracing output on stderr (-v: debug, -vv: trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

/// Where Redis is and how to log in: redis-cli's flag names where it has them.
#[derive(Debug, Args)]
pub struct ConnectionArgs {
    /// Redis URL: redis://, rediss:// (TLS), redis+unix://,
    /// redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE, or a Redis Cluster by
    /// redis+cluster://HOST:PORT[,HOST:PORT...] (any node's redis:// URL works too: cluster
    /// mode is detected), or a ZooKeeper ensemble by zk://HOST:PORT[,HOST:PORT...][/CHROOT]
    /// (`run`, `inspect`, `demo`, `bench`) [default: KEYLATCH_URL, then KEYLATCH_REDIS_URL, then
    /// REDIS_URL, then redis://127.0.0.1:6379]. A password in it is visible to every local
    /// user: prefer KEYLATCH_REDIS_PASSWORD or --password-file. Given 3 or more times, `run`
    /// holds a RedLock: the lock on a majority of those independent servers. `--url` is the
    /// same flag.
    #[arg(
        long,
        visible_alias = "url",
        global = true,
        help_heading = "Connection",
        value_name = "URL"
    )]
    pub redis: Vec<String>,

    /// The ACL user [default: KEYLATCH_REDIS_USERNAME, then the URL's].
    #[arg(long, global = true, help_heading = "Connection", value_name = "USER")]
    pub user: Option<String>,

    /// Read the password from this file's first line [default: KEYLATCH_REDIS_PASSWORD, then
    /// the URL's].
    #[arg(long, global = true, help_heading = "Connection", value_name = "FILE")]
    pub password_file: Option<std::path::PathBuf>,

    /// Connect over TLS (turns redis:// into rediss://, zk:// into zk+tls://).
    #[arg(long, global = true, help_heading = "Connection")]
    pub tls: bool,

    /// Verify the server's certificate against this CA file (PEM) instead of the system's
    /// roots [default: KEYLATCH_TLS_CA].
    #[arg(long, global = true, help_heading = "Connection", value_name = "FILE")]
    pub cacert: Option<std::path::PathBuf>,

    /// The client certificate (PEM) for servers that require one [default: KEYLATCH_TLS_CERT].
    #[arg(long, global = true, help_heading = "Connection", value_name = "FILE")]
    pub cert: Option<std::path::PathBuf>,

    /// The client certificate's private key (PEM) [default: KEYLATCH_TLS_KEY].
    #[arg(long, global = true, help_heading = "Connection", value_name = "FILE")]
    pub key: Option<std::path::PathBuf>,

    /// Do not verify the server's certificate. Dangerous: anyone on the network path can read
    /// and change every command, the password included.
    #[arg(long, global = true, help_heading = "Connection")]
    pub insecure: bool,

    /// Every acquisition waits until N replicas have it (Redis WAIT), else it is undone
    /// [default: KEYLATCH_REPLICAS, then 0].
    #[arg(long, global = true, help_heading = "Connection", value_name = "N", value_parser = clap::value_parser!(u32).range(0..=64))]
    pub replicas: Option<u32>,

    /// How long an acquisition waits for --replicas [default: KEYLATCH_REPLICAS_TIMEOUT, then
    /// 1s].
    #[arg(long, global = true, help_heading = "Connection", value_name = "DUR", value_parser = parse_duration)]
    pub replicas_timeout: Option<std::time::Duration>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Acquire a lock, run a command while holding it, release it when the command exits.
    Run(RunArgs),
    /// Show who holds a lock, the fair queue, read holders, semaphore permits or a latch's
    /// count.
    Inspect(InspectArgs),
    /// A live terminal view of every held lock matching a pattern: holders (host, pid,
    /// program), fair-queue waiters, hold and wait times, the lease left.
    Top(crate::view_args::TopArgs),
    /// The same view as a read-only web page that refreshes itself, with /metrics for
    /// Prometheus (loopback only unless --allow-remote).
    Serve(crate::view_args::ServeArgs),
    /// Set, count down or wait for a count-down latch (Redisson's RCountDownLatch).
    #[command(
        subcommand,
        after_help = "Exit codes: 0 on success; `set` 1 when the latch exists; `wait` 75 when \
                      --wait passed before the count reached zero, 130 (SIGINT) or 143 \
                      (SIGTERM) when interrupted; 64 for bad arguments (a count of 0 included); \
                      69 when Redis cannot be reached; 77 when Redis refused the credentials or \
                      a permission; 70 for any other error."
    )]
    Latch(LatchCommand),
    /// Offer to, take from, inspect a delayed queue (Redisson's RDelayedQueue layout), or run a
    /// transfer agent for it.
    #[command(
        subcommand,
        after_help = "Exit codes: 0 on success; `take` 75 when --wait passed with nothing due, \
                      130 (SIGINT) or 143 (SIGTERM) when interrupted; 64 for bad arguments (a \
                      value the codec refuses included); 69 when Redis cannot be reached; 77 \
                      when Redis refused the credentials or a permission; 70 for any other \
                      error."
    )]
    Queue(QueueCommand),
    /// Measure the primitives against the raw requests they need on this store (Redis:
    /// EVALSHA; ZooKeeper: create + getChildren + delete), optionally beside a second store.
    Bench(BenchArgs),
    /// Show the use cases: on Redis across real processes (FIFO jobs, cache refresh, capped
    /// concurrency); on ZooKeeper across sessions (exclusion, FIFO, read-write, fencing
    /// tokens, a lost session, the semaphore).
    Demo,
    /// One process of the demo (started by `keylatch demo`).
    #[command(hide = true)]
    DemoWorker(DemoWorkerArgs),
}

/// `keylatch demo-worker` (internal).
#[derive(Debug, Args)]
pub struct DemoWorkerArgs {
    /// `fifo`, `refresher`, `reader` or `capped`.
    pub role: String,
    /// The name the demo part uses.
    pub name: String,
    /// This worker's number.
    pub id: u32,
}

/// `keylatch run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The lock name.
    pub name: String,

    /// Use the fair (FIFO) lock.
    #[arg(long, help_heading = "Lock", group = "primitive")]
    pub fair: bool,

    /// Take the read side of the read-write lock (readers share).
    #[arg(long, help_heading = "Lock", group = "primitive")]
    pub read: bool,

    /// Take the write side of the read-write lock (excludes readers and writers).
    #[arg(long, help_heading = "Lock", group = "primitive")]
    pub write: bool,

    /// Take one permit of the permit-expirable semaphore with this many permits (set when
    /// the semaphore does not exist yet).
    #[arg(
        long,
        help_heading = "Lock",
        group = "primitive",
        value_name = "PERMITS"
    )]
    pub semaphore: Option<u32>,

    /// Give up after this long (exit 75); without it, wait as long as it takes. `0s` tries
    /// once.
    #[arg(long, help_heading = "Lock", value_name = "DUR", value_parser = parse_duration)]
    pub wait: Option<Duration>,

    /// A fixed lease: the lock ends after it, even if the command still runs.
    #[arg(long, help_heading = "Lock", value_name = "DUR", value_parser = parse_duration, conflicts_with = "watchdog")]
    pub lease: Option<Duration>,

    /// Watchdog mode (the default) with this timeout: renewed every third of it while the
    /// command runs; if keylatch dies, the lock frees within it [default: 30s].
    #[arg(long, help_heading = "Lock", value_name = "DUR", value_parser = parse_duration)]
    pub watchdog: Option<Duration>,

    /// What to do when the lock is lost while the command runs: `kill` sends SIGTERM (SIGKILL
    /// after --grace) and exits 76; `ignore` lets it finish.
    #[arg(long, help_heading = "Command", value_enum, default_value_t = OnLost::Kill, value_name = "ACTION")]
    pub on_lost: OnLost,

    /// How long a command gets to exit after SIGTERM before SIGKILL.
    #[arg(long, help_heading = "Command", value_name = "DUR", value_parser = parse_duration, default_value = "5s")]
    pub grace: Duration,

    /// The command and its arguments. It gets KEYLATCH_LOCK_NAME and, for the reentrant, fair
    /// and write locks, KEYLATCH_FENCING_TOKEN; none of the variables keylatch reads
    /// (REDIS_URL, KEYLATCH_*) reach it.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// What `run` does when the lock is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnLost {
    /// SIGTERM the command, then SIGKILL after the grace period; exit 76.
    Kill,
    /// Let the command finish; exit with its code.
    Ignore,
}

/// `keylatch latch`: exit 0 on success; `set` exits 1 when the latch already exists; `wait`
/// exits 75 when --wait passed before the count reached zero, 130 (SIGINT) or 143 (SIGTERM)
/// when interrupted; 64, 69, 77 and 70 as for `run`.
#[derive(Debug, Subcommand)]
pub enum LatchCommand {
    /// Set the latch's count if the latch does not exist: exit 0 when set, 1 when it exists
    /// (its count is left as it is).
    Set {
        /// The latch name.
        name: String,
        /// The count, at least 1.
        #[arg(value_name = "N")]
        count: u64,
    },
    /// Count the latch down by one and print the count left (0: open, the key is gone).
    CountDown {
        /// The latch name.
        name: String,
    },
    /// Print the latch's count (0 when it does not exist).
    Count {
        /// The latch name.
        name: String,
    },
    /// Wait until the latch's count is zero (at once when the latch does not exist): exit 0
    /// then, 75 when --wait passed first.
    Wait {
        /// The latch name.
        name: String,
        /// Give up after this long (exit 75); without it, wait as long as it takes. `0s`
        /// reads the count once.
        #[arg(long, value_name = "DUR", value_parser = parse_duration)]
        wait: Option<Duration>,
    },
}

/// How `keylatch queue` reads and writes values: Redisson's codec of the same name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum QueueCodec {
    /// The value's bytes as they are (ByteArrayCodec); `take` prints them with no newline.
    Bytes,
    /// UTF-8 text (StringCodec).
    String,
    /// A signed 64-bit integer in decimal (LongCodec).
    Long,
    /// Redisson's default codec (Kryo5Codec): `offer` writes a java.lang.String; `take` prints
    /// a String, Integer or Long and refuses other classes (exit 64, the element kept aside).
    Kryo,
}

/// `keylatch queue`.
#[derive(Debug, Subcommand)]
pub enum QueueCommand {
    /// Offer VALUE to the queue, due after --delay by the server's clock; prints the due time.
    Offer {
        /// The queue name.
        name: String,
        /// The value (one starting with `-`, such as `-42`, is taken as a value).
        #[arg(allow_hyphen_values = true)]
        value: String,
        /// How long until the value is due.
        #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "0s")]
        delay: Duration,
        /// How the value is stored.
        #[arg(long, value_enum, default_value_t = QueueCodec::String)]
        codec: QueueCodec,
    },
    /// Take the next due value and print it.
    Take {
        /// The queue name.
        name: String,
        /// Give up after this long (exit 75); without it, wait as long as it takes. `0s`
        /// takes only what is due now.
        #[arg(long, value_name = "DUR", value_parser = parse_duration)]
        wait: Option<Duration>,
        /// How the value is read.
        #[arg(long, value_enum, default_value_t = QueueCodec::String)]
        codec: QueueCodec,
    },
    /// Show the queue's backlog, what is due now, what is ready, the oldest overdue element's
    /// age and the subscribers of its channel (Redisson's transfer tasks among them).
    Inspect {
        /// The queue name.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run a transfer agent: move due elements of each queue to its list (as Redisson's
    /// transfer task does, for any codec), until SIGINT or SIGTERM (exit 0). It sleeps until
    /// the next due time, a message on the queue's channel or --max-sleep; after pub/sub or
    /// connection trouble it re-subscribes and re-scans, and prints one line per recovery.
    Transfer {
        /// The queue names.
        #[arg(required = true, num_args = 1.., value_name = "NAME")]
        names: Vec<String>,
        /// The longest sleep between two scans, whatever the channel says.
        #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "5s")]
        max_sleep: Duration,
    },
}

/// `keylatch inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The lock, read-write lock or semaphore names (several with --watch).
    #[arg(required = true, num_args = 1.., value_name = "NAME")]
    pub names: Vec<String>,

    /// Print JSON (with --watch: one JSON object per line and name, each refresh).
    #[arg(long)]
    pub json: bool,

    /// Refresh the view every 500 ms until interrupted: in place on a terminal, as a stream of
    /// JSON lines with --json.
    #[arg(long)]
    pub watch: bool,

    /// Show at most this many entries of each list (holders, read holds, waiters, permits);
    /// the totals are always shown.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub limit: u32,
}

/// Parses `500ms`, `10s`, `1m 30s`: the library's one duration grammar (humantime).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    keylatch_redis::parse_duration(text)
}

/// `keylatch bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Run the same scenarios on this second store too (e.g. `--url redis://… --compare
    /// zk://…`) and print both in one table, with the ratios between them.
    #[arg(long, value_name = "URL", conflicts_with = "scale")]
    pub compare: Option<String>,

    /// Operations per scenario.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(10..=10_000_000))]
    pub ops: u32,

    /// Instead of the per-primitive scenarios, the scale suite: `--tasks` tasks locking and
    /// unlocking random names out of `--keys` for `--duration`, beside the same number of
    /// raw EVALSHA pairs; then `--holds` locks held at once and what the watchdog sends to
    /// renew them (script calls and round trips per tick). On a Redis Cluster it shows how
    /// the work spreads over the primaries.
    #[arg(long)]
    pub scale: bool,

    /// Concurrent tasks in the scale suite.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub tasks: u32,

    /// Distinct names the scale suite's tasks pick from.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub keys: u32,

    /// Locks held at once for the scale suite's renewal figure (0 skips it).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub holds: u32,

    /// How long each throughput run of the scale suite lasts.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub duration: Duration,
}
