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
