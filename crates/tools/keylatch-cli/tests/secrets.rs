//! Credentials for the CLI: from the environment or a file as well as the URL, a warning when
//! a password is in argv, nothing passed on to the command `run` starts, and exit 77 when
//! Redis refuses.
mod common;

use common::{bare, scratch, server};

const PASSWORD: &str = "cli-Secret-pw";

fn with_user() -> common::RedisServer {
    let server = server();
    server
        .cli(&[
            "ACL",
            "SETUSER",
            "app",
            "on",
            &format!(">{PASSWORD}"),
            "~*",
            "&*",
            "+@all",
        ])
        .unwrap();
    server
}

#[test]
fn the_password_comes_from_the_environment_or_a_file_and_stays_out_of_the_command() {
    let server = with_user();
    let dir = scratch("secrets");
    let env_dump = dir.join("env");
    // From the environment: the command sees none of the connection variables.
    let out = bare(&[
        "--redis",
        &server.url(),
        "--user",
        "app",
        "run",
        "secret-env",
        "--",
        "sh",
        "-c",
        &format!("env > {}", env_dump.display()),
    ])
    .env("KEYLATCH_REDIS_PASSWORD", PASSWORD)
    .env("REDIS_URL", server.url())
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "no password in argv: {stderr}");
    let env = std::fs::read_to_string(&env_dump).unwrap();
    for var in ["KEYLATCH_REDIS_PASSWORD", "REDIS_URL", "KEYLATCH_REDIS_URL"] {
        assert!(
            !env.lines().any(|l| l.starts_with(&format!("{var}="))),
            "the command inherited {var}"
        );
    }
    assert!(!env.contains(PASSWORD), "the command saw the password");
    assert!(env.contains("KEYLATCH_LOCK_NAME=secret-env"));

    // From a file.
    let file = dir.join("password");
    std::fs::write(&file, format!("{PASSWORD}\n")).unwrap();
    let out = bare(&[
        "--redis",
        &server.url(),
        "--user",
        "app",
        "--password-file",
        file.to_str().unwrap(),
        "inspect",
        "secret-file",
        "--json",
    ])
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_password_in_argv_is_warned_about_and_never_printed() {
    let server = with_user();
    let url = server
        .url()
        .replace("redis://", &format!("redis://app:{PASSWORD}@"));
    let out = bare(&["--redis", &url, "inspect", "secret-argv", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stderr}");
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("warning") && stderr.contains("KEYLATCH_REDIS_PASSWORD"));
    assert!(!stderr.contains(PASSWORD) && !stdout.contains(PASSWORD));
}

#[test]
fn refused_credentials_and_permissions_exit_77() {
    let server = with_user();
    server
        .cli(&[
            "ACL",
            "SETUSER",
            "reader",
            "on",
            &format!(">{PASSWORD}"),
            "~*",
            "&*",
            "+@all",
            "-evalsha",
        ])
        .unwrap();
    let wrong = bare(&["--redis", &server.url(), "--user", "app", "inspect", "x"])
        .env("KEYLATCH_REDIS_PASSWORD", "not-the-password")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    println!("wrong password: {stderr}");
    assert_eq!(wrong.status.code(), Some(77), "{stderr}");
    assert!(stderr.contains("credentials"), "{stderr}");
    assert!(!stderr.contains("not-the-password"));

    let denied = bare(&[
        "--redis",
        &server.url(),
        "--user",
        "reader",
        "run",
        "x",
        "--",
        "true",
    ])
    .env("KEYLATCH_REDIS_PASSWORD", PASSWORD)
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&denied.stderr);
    println!("no EVALSHA: {stderr}");
    assert_eq!(denied.status.code(), Some(77), "{stderr}");
    assert!(stderr.contains("evalsha"), "{stderr}");
}

/// Every environment variable the client configuration is read from: the `"KEYLATCH_…"` and
/// `"REDIS_URL"` literals in the library's and the command's sources, but for the two the
/// command under a lock is given.
fn variables_read() -> Vec<String> {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    let mut dirs = vec![
        crates.join("core/keylatch-core/src"),
        crates.join("core/keylatch/src"),
        crates.join("tools/keylatch-cli/src"),
    ];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut vars = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (at, _) in text
            .match_indices("\"KEYLATCH_")
            .chain(text.match_indices("\"REDIS_URL"))
        {
            let name: String = text[at + 1..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if !name.ends_with('_')
                && text[at + 1 + name.len()..].starts_with('"')
                && !["KEYLATCH_LOCK_NAME", "KEYLATCH_FENCING_TOKEN"].contains(&name.as_str())
                && !vars.contains(&name)
            {
                vars.push(name);
            }
        }
    }
    vars.sort();
    vars
}

#[test]
fn the_command_inherits_none_of_the_client_settings() {
    use keylatch_testkit::{ClientAuth, RedisServer, TlsFiles};

    if keylatch_testkit::skip_without_tls() {
        return;
    }

    // A server that needs every kind of setting: TLS with a client certificate, an ACL user.
    let files = TlsFiles::generate().unwrap();
    let server = RedisServer::builder()
        .tls(&files, ClientAuth::Required)
        .start()
        .unwrap();
    let user = "cli-marker-user";
    server
        .cli(&[
            "ACL",
            "SETUSER",
            user,
            "on",
            &format!(">{PASSWORD}"),
            "~*",
            "&*",
            "+@all",
        ])
        .unwrap();
    let path = |p: std::path::PathBuf| p.to_string_lossy().into_owned();
    let (ca, cert, key) = (
        path(files.ca_file()),
        path(files.client_cert_file()),
        path(files.client_key_file()),
    );
    // A value for each variable the client reads; the connection comes from them alone.
    let values: Vec<(&str, String)> = vec![
        ("KEYLATCH_URL", server.url()),
        ("KEYLATCH_REDIS_URL", server.url()),
        ("REDIS_URL", server.url()),
        ("KEYLATCH_REDIS_USERNAME", user.to_owned()),
        ("KEYLATCH_REDIS_PASSWORD", PASSWORD.to_owned()),
        (
            "KEYLATCH_SENTINEL_USERNAME",
            "cli-marker-sentinel-user".into(),
        ),
        (
            "KEYLATCH_SENTINEL_PASSWORD",
            "cli-marker-sentinel-pw".into(),
        ),
        ("KEYLATCH_TLS_CA", ca),
        ("KEYLATCH_TLS_CERT", cert),
        ("KEYLATCH_TLS_KEY", key),
        ("KEYLATCH_SHARDED_PUBSUB", "true".into()),
        ("KEYLATCH_COALESCE", "true".into()),
        ("KEYLATCH_PUBSUB_PATTERNS", "4".into()),
        ("KEYLATCH_REPLICAS", "0".into()),
        ("KEYLATCH_REPLICAS_TIMEOUT", "1s".into()),
        // One keylatch does not read today: it is kept out all the same.
        ("KEYLATCH_SOMETHING_NEW", "cli-marker-new".into()),
    ];
    let read = variables_read();
    println!("variables read: {read:?}");
    for var in &read {
        assert!(
            values.iter().any(|(name, _)| name == var),
            "{var} is read by keylatch but not set by this test: add it"
        );
    }
    let mut run = bare(&["run", "env-job", "--", "env"]);
    for (name, value) in &values {
        run.env(name, value);
    }
    let out = run
        .env("KEYLATCH_FENCING_TOKEN", "1")
        .env("CLI_TEST_UNRELATED", "kept")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let env = String::from_utf8(out.stdout).unwrap();
    let given: Vec<&str> = env
        .lines()
        .filter(|l| l.starts_with("KEYLATCH_") || l.starts_with("REDIS_URL="))
        .collect();
    println!("the command's KEYLATCH_*/REDIS_URL variables: {given:?}");
    for (name, value) in &values {
        assert!(
            !env.lines().any(|l| l.starts_with(&format!("{name}="))),
            "the command inherited {name}"
        );
        if value.len() > 4 {
            assert!(
                !env.contains(value.as_str()),
                "the command saw {name}'s value"
            );
        }
    }
    assert!(!env.contains(PASSWORD) && !env.contains(user));
    // What it is meant to get: the lock's name, this run's token, the rest of the environment.
    assert!(
        env.lines().any(|l| l == "KEYLATCH_LOCK_NAME=env-job"),
        "{given:?}"
    );
    let token = env
        .lines()
        .find_map(|l| l.strip_prefix("KEYLATCH_FENCING_TOKEN="))
        .expect("a fencing token");
    assert!(
        token.parse::<u64>().unwrap() > 1,
        "this run's token: {token}"
    );
    assert!(env.lines().any(|l| l == "CLI_TEST_UNRELATED=kept"));
    assert_eq!(given.len(), 2, "{given:?}");
}
