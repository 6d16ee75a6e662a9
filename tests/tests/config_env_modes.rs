//! The acknowledgement and watchdog settings read from the environment
//! (`KEYLATCH_REPLICAS_MODE`, `KEYLATCH_REPLICAS_AOF`, `KEYLATCH_WATCHDOG_BATCH_SIZE`): each
//! reading runs in a child process of this test binary, so no test changes its own
//! environment.

use keylatch::Config;

const VARS: [&str; 4] = [
    "KEYLATCH_REPLICAS",
    "KEYLATCH_REPLICAS_MODE",
    "KEYLATCH_REPLICAS_AOF",
    "KEYLATCH_WATCHDOG_BATCH_SIZE",
];

/// Run as a child by `modes_read_from_the_environment`: prints what it read.
#[test]
#[ignore = "run as a child process by modes_read_from_the_environment"]
fn print_the_modes() {
    let config = Config::from_env();
    let valid = match config.validate() {
        Ok(()) => "valid".to_owned(),
        Err(keylatch::Error::InvalidConfig { field, .. }) => format!("invalid:{field}"),
        Err(other) => format!("error:{other}"),
    };
    println!(
        "modes {:?} aof={} batch={} {valid}",
        config.replicas_mode, config.replicas_aof, config.watchdog_batch_size
    );
}

fn read(set: &[(&str, &str)]) -> String {
    keylatch_tests::child_reading("print_the_modes", "modes ", &VARS, set)
}

#[test]
fn modes_read_from_the_environment() {
    assert_eq!(read(&[]), "Count aof=false batch=100 valid");
    assert_eq!(
        read(&[
            ("KEYLATCH_REPLICAS_MODE", "all-connected"),
            ("KEYLATCH_REPLICAS_AOF", "yes"),
            ("KEYLATCH_WATCHDOG_BATCH_SIZE", "3"),
        ]),
        "AllConnected aof=true batch=3 valid"
    );
    for (name, value, field) in [
        ("KEYLATCH_REPLICAS_MODE", "most", "KEYLATCH_REPLICAS_MODE"),
        (
            "KEYLATCH_REPLICAS_AOF",
            "sometimes",
            "KEYLATCH_REPLICAS_AOF",
        ),
        (
            "KEYLATCH_WATCHDOG_BATCH_SIZE",
            "many",
            "KEYLATCH_WATCHDOG_BATCH_SIZE",
        ),
        ("KEYLATCH_WATCHDOG_BATCH_SIZE", "0", "watchdog_batch_size"),
    ] {
        let reading = read(&[(name, value)]);
        assert!(
            reading.ends_with(&format!("invalid:{field}")),
            "{name}={value}: {reading}"
        );
    }
    // All connected replicas and an explicit count contradict each other.
    let reading = read(&[
        ("KEYLATCH_REPLICAS_MODE", "all-connected"),
        ("KEYLATCH_REPLICAS", "2"),
    ]);
    assert!(reading.ends_with("invalid:replicas"), "{reading}");
}
