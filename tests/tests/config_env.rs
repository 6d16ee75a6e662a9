//! The settings read from the environment: `Config::from_env` reads them, `Config::builder`
//! does not. Each reading runs in a child process of this test binary, with the variables set
//! there, so no test changes its own process's environment.
use std::process::Command;

use keylatch::Config;

/// Run as a child by `switches_read_from_the_environment`: prints what it read.
#[test]
#[ignore = "run as a child process by switches_read_from_the_environment"]
fn print_the_switches() {
    let config = Config::from_env();
    let valid = match config.validate() {
        Ok(()) => "valid".to_owned(),
        Err(keylatch::Error::InvalidConfig { field, .. }) => format!("invalid:{field}"),
        Err(other) => format!("error:{other}"),
    };
    println!(
        "switches coalesce={} sharded={} {valid}",
        config.coalesce, config.sharded_pubsub
    );
}

/// This binary run as a child with `name=value`: the line `print_the_switches` printed.
fn read(name: &str, value: Option<&str>) -> String {
    let set: Vec<(&str, &str)> = value.map(|value| (name, value)).into_iter().collect();
    keylatch_tests::child_reading(
        "print_the_switches",
        "switches ",
        &["KEYLATCH_COALESCE", "KEYLATCH_SHARDED_PUBSUB"],
        &set,
    )
}

#[test]
fn switches_read_from_the_environment() {
    assert_eq!(read("", None), "coalesce=true sharded=true valid");
    for (name, key) in [
        ("KEYLATCH_COALESCE", "coalesce"),
        ("KEYLATCH_SHARDED_PUBSUB", "sharded"),
    ] {
        for (value, on) in [("off", false), ("0", false), ("TRUE", true), ("yes", true)] {
            let reading = read(name, Some(value));
            assert!(
                reading.contains(&format!("{key}={on}")) && reading.ends_with(" valid"),
                "{name}={value}: {reading}"
            );
        }
        let reading = read(name, Some("sometimes"));
        assert!(
            reading.ends_with(&format!("invalid:{name}")),
            "{name}=sometimes: {reading}"
        );
    }
}

/// Every variable `Config::from_env` reads.
const CONFIG_VARS: &[&str] = Config::ENV_VARS;

/// Run as a child by `the_builder_reads_no_environment`: prints whether `Config::builder()`
/// built the defaults, and whether `Config::from_env()` differs from them.
#[test]
#[ignore = "run as a child process by the_builder_reads_no_environment"]
fn print_the_builder() {
    let built = Config::builder().url("redis://127.0.0.1:6379").build();
    let defaults = Config::default();
    let outcome = match built {
        Ok(config) if config == defaults => "defaults".to_owned(),
        Ok(config) => format!("changed:{config:?}"),
        Err(err) => format!("error:{err}"),
    };
    let from_env = if Config::from_env() == defaults {
        "same"
    } else {
        "differs"
    };
    println!("builder {outcome} from_env={from_env}");
}

#[test]
fn the_builder_reads_no_environment() {
    let run = |set: bool| {
        let mut child = Command::new(std::env::current_exe().unwrap());
        child.args(["--ignored", "--exact", "print_the_builder", "--nocapture"]);
        for &var in CONFIG_VARS {
            child.env_remove(var);
            if set {
                // Values that would change the configuration or make it invalid.
                let value = match var {
                    "KEYLATCH_REDIS_URL" | "REDIS_URL" => "redis://10.9.9.9:1",
                    "KEYLATCH_PUBSUB_PATTERNS" | "KEYLATCH_REPLICAS" => "many",
                    _ => "bogus",
                };
                child.env(var, value);
            }
        }
        let output = child.output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("builder "))
            .unwrap_or_else(|| panic!("no reading in {stdout}"))
            .to_owned()
    };
    assert_eq!(run(false), "defaults from_env=same");
    // The variables change what `from_env` reads, and nothing of what the builder builds.
    assert_eq!(run(true), "defaults from_env=differs");
}
