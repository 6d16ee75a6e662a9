//! Lock + unlock on PostgreSQL, keylatch beside the raw floor measured in the same run:
//! `pg_advisory_lock` + `pg_advisory_unlock` sent directly on one connection. Starts a
//! throwaway server (the testkit's), so it needs `initdb` and `pg_ctl` (scripts/setup.sh).
//!
//! `cargo run --release -p keylatch-postgres --example floor [ROUNDS]`

use std::time::{Duration, Instant};

use keylatch_core::DistributedLock;
use keylatch_postgres::PgClient;
use keylatch_testkit::PostgresServer;
use tokio_postgres::NoTls;

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = std::env::args().nth(1).map_or(Ok(2000), |n| n.parse())?;
    let server = PostgresServer::start()?;
    let (raw, connection) = tokio_postgres::connect(&server.url(), NoTls).await?;
    tokio::spawn(connection);
    let lock_sql = "SELECT pg_advisory_lock(hashtextextended($1::text, 0))";
    let unlock_sql = "SELECT pg_advisory_unlock(hashtextextended($1::text, 0))";
    let lock_stmt = raw.prepare(lock_sql).await?;
    let unlock_stmt = raw.prepare(unlock_sql).await?;
    let client = PgClient::connect(&server.url()).await?;
    let lock = client.lock("floor-keylatch")?;
    let (mut floor, mut ours) = (Vec::new(), Vec::new());
    // Interleaved, after a warm-up, so both see the same machine.
    for round in 0..rounds + 100 {
        let started = Instant::now();
        raw.execute(&lock_stmt, &[&"floor-raw"]).await?;
        raw.query_one(&unlock_stmt, &[&"floor-raw"]).await?;
        let raw_took = started.elapsed();
        let started = Instant::now();
        lock.lock().await?.unlock().await?;
        let ours_took = started.elapsed();
        if round >= 100 {
            floor.push(raw_took);
            ours.push(ours_took);
        }
    }
    let (floor, ours) = (p50(floor), p50(ours));
    println!("rounds {rounds}, uncontended lock + unlock, p50:");
    println!("  raw floor (pg_advisory_lock + pg_advisory_unlock): {floor:?}");
    println!("  keylatch PgMutex (lock, fencing bump, unlock):      {ours:?}");
    println!(
        "  keylatch / floor: {:.2}x",
        ours.as_secs_f64() / floor.as_secs_f64()
    );
    client.shutdown().await?;
    Ok(())
}
