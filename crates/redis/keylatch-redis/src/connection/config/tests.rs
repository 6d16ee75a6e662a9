//! The configuration's unit tests: durations, serde, validation, Debug.

use std::time::Duration;

use secrecy::ExposeSecret;

use super::*;
use keylatch_core::Error;

#[test]
fn durations_parse() {
    assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
    assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    assert_eq!(parse_duration("1m 30s"), Ok(Duration::from_secs(90)));
    let bare = parse_duration("250").unwrap_err();
    assert!(bare.contains("no unit") && bare.contains("250ms"), "{bare}");
    assert!(parse_duration("ten").is_err());
    assert!(parse_duration("5 parsecs").is_err());
    assert!(parse_duration("99999999999999999999999s").is_err());
}

#[cfg(feature = "serde")]
#[test]
fn deserialises_with_readable_durations() {
    let config: Config = serde_json::from_str(
        r#"{"url": "redis://10.0.0.1:6380", "watchdog_timeout": "10s", "fallback_poll": "500ms"}"#,
    )
    .unwrap();
    assert_eq!(config.url.expose_secret(), "redis://10.0.0.1:6380");
    assert_eq!(config.watchdog_timeout, Duration::from_secs(10));
    assert_eq!(config.fallback_poll, Duration::from_millis(500));
    assert_eq!(config.connections, 2, "missing fields take their defaults");
    assert!(serde_json::from_str::<Config>(r#"{"watchdog_timeout": "soon"}"#).is_err());
    assert!(serde_json::from_str::<Config>(r#"{"colour": "blue"}"#).is_err());
    let bare = serde_json::from_str::<Config>(r#"{"fallback_poll": 500}"#).unwrap_err();
    assert!(bare.to_string().contains("no unit"), "{bare}");
    // Round trip: what is written reads back the same.
    let written = serde_json::to_string(&config).unwrap();
    assert!(written.contains(r#""watchdog_timeout":"10s""#), "{written}");
    assert_eq!(serde_json::from_str::<Config>(&written).unwrap(), config);
}

#[cfg(feature = "serde")]
#[test]
fn secrets_are_read_from_a_file_and_never_written() {
    let config: Config = serde_json::from_str(
        r#"{"url": "redis://app:hunter1@db:6379", "password": "hunter2", "sentinel_password": "hunter3"}"#,
    )
    .unwrap();
    assert_eq!(config.url.expose_secret(), "redis://app:hunter1@db:6379");
    assert_eq!(config.password.as_ref().unwrap().expose_secret(), "hunter2");
    assert_eq!(
        config.sentinel_password.as_ref().unwrap().expose_secret(),
        "hunter3"
    );
    let written = serde_json::to_string(&config).unwrap();
    assert!(!written.contains("hunter"), "{written}");
    assert!(!written.contains("password"), "{written}");
    assert!(
        written.contains(r#""url":"redis://app:***@db:6379""#),
        "{written}"
    );
}

#[test]
fn bad_values_are_refused() {
    assert!(Config::builder().connections(0).build().is_err());
    assert!(
        Config::builder()
            .watchdog_timeout(Duration::from_millis(1))
            .build()
            .is_err()
    );
    assert!(Config::builder().url(" ").build().is_err());
    assert!(Config::builder().pubsub_patterns(65).build().is_err());
    assert!(Config::builder().pubsub_patterns(0).build().is_ok());
    assert!(
        Config::builder()
            .subscription_linger(Duration::from_secs(61))
            .build()
            .is_err()
    );
    for huge in [Duration::MAX, Duration::from_secs(u64::MAX / 2)] {
        assert!(Config::builder().fallback_poll(huge).build().is_err());
        assert!(Config::builder().response_timeout(huge).build().is_err());
        assert!(Config::builder().connect_timeout(huge).build().is_err());
        assert!(Config::builder().shutdown_timeout(huge).build().is_err());
        assert!(Config::builder().watchdog_timeout(huge).build().is_err());
        assert!(Config::builder().subscription_linger(huge).build().is_err());
    }
    assert!(Config::builder().build().is_ok());
}

#[test]
fn replica_acknowledgement_settings_are_checked() {
    let ok = Config::builder()
        .replicas(2, Duration::from_millis(500))
        .build()
        .unwrap();
    assert_eq!((ok.replicas, ok.replicas_timeout.as_millis()), (2, 500));
    for (replicas, timeout, field) in [
        (65, Duration::from_millis(500), "replicas"),
        (1, Duration::ZERO, "replicas_timeout"),
        (1, Duration::from_secs(5), "replicas_timeout"),
    ] {
        let err = Config::builder()
            .replicas(replicas, timeout)
            .build()
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidConfig { field: f, .. } if f == field),
            "{replicas} {timeout:?}: {err}"
        );
    }
    let config = Config {
        env_problem: Some(("KEYLATCH_REPLICAS", "not a whole number")),
        ..Config::default()
    };
    assert!(
        config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("KEYLATCH_REPLICAS")
    );
}

#[test]
fn debug_never_shows_a_password() {
    let config = Config::builder()
        .url("redis://app:hunter2@db:6379?password=hunter3")
        .build()
        .unwrap();
    let shown = format!("{config:?}");
    assert!(!shown.contains("hunter"), "{shown}");
    assert!(shown.contains("app:***@db"), "{shown}");
}

#[test]
fn acknowledgement_modes_and_batch_size_are_checked() {
    let all = Config::builder()
        .replicas_all_connected(Duration::from_millis(200))
        .replicas_aof(true)
        .watchdog_batch_size(3)
        .build()
        .unwrap();
    assert_eq!(all.replicas_mode, ReplicaMode::AllConnected);
    let ack = all.acknowledgement().expect("acknowledgement on");
    assert!(ack.aof && ack.replicas == 0);
    let shown = format!("{all:?}");
    for field in [
        "replicas_mode: AllConnected",
        "replicas_aof: true",
        "watchdog_batch_size: 3",
    ] {
        assert!(shown.contains(field), "{shown}");
    }
    assert!(Config::default().acknowledgement().is_none());
    // AOF alone waits for the primary's own file.
    assert!(
        Config::builder()
            .replicas_aof(true)
            .build()
            .unwrap()
            .acknowledgement()
            .is_some()
    );
    let field = |config: ConfigBuilder| match config.build() {
        Err(Error::InvalidConfig { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        field(
            Config::builder()
                .replicas(1, Duration::from_millis(200))
                .replicas_mode(ReplicaMode::AllConnected)
        ),
        "replicas"
    );
    // The timeout must stay below the response timeout in every mode.
    assert_eq!(
        field(Config::builder().replicas_all_connected(Duration::from_secs(5))),
        "replicas_timeout"
    );
    assert_eq!(
        field(Config::builder().watchdog_batch_size(0)),
        "watchdog_batch_size"
    );
    assert_eq!(
        field(Config::builder().watchdog_batch_size(1001)),
        "watchdog_batch_size"
    );
    assert!(Config::builder().watchdog_batch_size(1).build().is_ok());
}

#[cfg(feature = "serde")]
#[test]
fn modes_read_from_a_file() {
    let config: Config = serde_json::from_str(
        r#"{"replicas_mode": "all-connected", "replicas_aof": true, "replicas_timeout": "200ms", "watchdog_batch_size": 7}"#,
    )
    .unwrap();
    assert_eq!(config.replicas_mode, ReplicaMode::AllConnected);
    assert_eq!(config.watchdog_batch_size, 7);
    config.validate().unwrap();
    assert!(serde_json::from_str::<Config>(r#"{"replicas_mode": "most"}"#).is_err());
}
