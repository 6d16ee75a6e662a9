//! The on/off settings read from the environment (`Config::from_env`, which `Config::builder`
//! starts from). Each reading runs in a child process of this test binary, with the variable
//! set there, so no test changes its own process's environment.
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
    let mut child = Command::new(std::env::current_exe().unwrap());
    child.args(["--ignored", "--exact", "print_the_switches", "--nocapture"]);
    for var in ["KEYLATCH_COALESCE", "KEYLATCH_SHARDED_PUBSUB"] {
        child.env_remove(var);
    }
    if let Some(value) = value {
        child.env(name, value);
    }
    let output = child.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("switches "))
        .unwrap_or_else(|| panic!("no reading in {stdout}"))
        .to_owned()
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
