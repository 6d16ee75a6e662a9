//! `keylatch latch set|count-down|count|wait`: a count-down latch from the shell. Imports
//! `cli` (its arguments), `failure` (exit codes) and `run` (the signal handling).

use keylatch::{Client, Config};

use crate::cli::LatchCommand;
use crate::failure::{EX_TEMPFAIL, Failure};

/// `set`'s exit code when the latch already exists.
const EX_EXISTS: u8 = 1;

/// Runs one latch command and returns its exit code. The client is shut down before it
/// returns, whatever the outcome.
pub async fn latch(config: Config, command: LatchCommand) -> Result<u8, Failure> {
    let client = Client::connect_with(config).await?;
    let outcome = run(&client, command).await;
    let _ = client.shutdown().await;
    outcome
}

async fn run(client: &Client, command: LatchCommand) -> Result<u8, Failure> {
    match command {
        LatchCommand::Set { name, count } => {
            let latch = client.latch(&name);
            if latch.try_set_count(count).await? {
                return Ok(0);
            }
            eprintln!(
                "keylatch: latch {name:?} already exists (count {})",
                latch.count().await?
            );
            Ok(EX_EXISTS)
        }
        LatchCommand::CountDown { name } => {
            println!("{}", client.latch(&name).count_down().await?);
            Ok(0)
        }
        LatchCommand::Count { name } => {
            println!("{}", client.latch(&name).count().await?);
            Ok(0)
        }
        LatchCommand::Wait { name, wait } => {
            let latch = client.latch(&name);
            let opened = async {
                match wait {
                    Some(wait) => latch.wait_for(wait).await,
                    None => latch.wait().await.map(|()| true),
                }
            };
            tokio::select! {
                opened = opened => {
                    if opened? {
                        return Ok(0);
                    }
                }
                code = crate::run::interruption() => return Ok(code),
            }
            Err(Failure::new(
                EX_TEMPFAIL,
                format!(
                    "latch {name:?} still at count {} after {}",
                    latch.count().await?,
                    humantime::format_duration(wait.unwrap_or_default())
                ),
            ))
        }
    }
}
