//! ACL users: every primitive runs as a user with exactly the rule set of docs/deployment.md,
//! and every refusal (credentials, a command, a key, a channel) is a typed error that names
//! what was denied, never a hang, and never shows the password.
use std::time::Duration;

use keylatch::{AcquireOptions, Client, Config, Error};
use keylatch_tests::every::exercise_every_primitive;
use keylatch_tests::{RedisServer, server};

const PASSWORD: &str = "s3cret-Acl-pw";

/// The `ACL SETUSER` line of docs/deployment.md, with the test's password.
fn documented_rules() -> Vec<String> {
    let doc = include_str!("../../docs/deployment.md");
    let after = doc
        .split("<!-- acl-rules:")
        .nth(1)
        .expect("docs/deployment.md marks its ACL rules");
    let line = after
        .lines()
        .find(|l| l.starts_with("ACL SETUSER"))
        .expect("an ACL SETUSER line after the marker");
    line.split_whitespace()
        .map(|word| word.replace("PASSWORD", PASSWORD))
        .collect()
}

/// Creates a user from `rules` (the words after `ACL SETUSER`), renamed to `user`.
fn set_user(server: &RedisServer, user: &str, rules: &[String]) {
    let mut args: Vec<&str> = vec!["ACL", "SETUSER", user];
    args.extend(rules[3..].iter().map(String::as_str));
    server.cli(&args).expect("ACL SETUSER");
}

async fn connect_as(server: &RedisServer, user: &str, password: &str) -> keylatch::Result<Client> {
    let config = Config::builder()
        .url(server.url())
        .username(user)
        .password(password)
        .fallback_poll(Duration::from_secs(60))
        .connect_timeout(Duration::from_secs(2))
        .build()?;
    Client::connect_with(config).await
}

fn assert_secret_kept(err: &Error) {
    let shown = format!("{err} / {err:?}");
    assert!(!shown.contains(PASSWORD), "the password leaked: {shown}");
}

#[tokio::test]
async fn every_primitive_runs_with_exactly_the_documented_rules() {
    let server = server();
    let rules = documented_rules();
    set_user(&server, "keylatch", &rules);
    let holder = connect_as(&server, "keylatch", PASSWORD).await.unwrap();
    let waiter = connect_as(&server, "keylatch", PASSWORD).await.unwrap();
    let ran = exercise_every_primitive(&holder, &waiter, "app:acl").await;
    println!("{ran} primitives ran as a user with the documented rules");
    assert_eq!(ran, 6);
    // Fencing tokens, reentrancy and force-unlock need nothing more.
    let lock = holder.lock("app:acl-fenced").with_fencing(true);
    let guard = lock.lock().await.unwrap();
    let again = lock.with_owner(guard.owner()).lock().await.unwrap();
    assert!(guard.fencing_token().is_some());
    again.unlock().await.unwrap();
    guard.unlock().await.unwrap();
    holder.shutdown().await.unwrap();
    waiter.shutdown().await.unwrap();
}

#[tokio::test]
async fn refused_credentials_are_auth_errors() {
    let server = server();
    set_user(&server, "keylatch", &documented_rules());
    for (user, password, what) in [
        ("keylatch", "wrong-password", "a wrong password"),
        ("nobody", PASSWORD, "an unknown user"),
    ] {
        let started = std::time::Instant::now();
        let err = connect_as(&server, user, password).await.unwrap_err();
        println!("{what}: {err} after {:?}", started.elapsed());
        assert!(matches!(err, Error::Auth(_)), "{what}: {err:?}");
        assert_secret_kept(&err);
    }
    // In the URL, too: the error shows no password.
    let url = server
        .url()
        .replace("redis://", &format!("redis://keylatch:{PASSWORD}x@"));
    let err = Client::connect(&url).await.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
    assert!(!format!("{err} {err:?}").contains(PASSWORD));
}

#[tokio::test]
async fn a_denied_key_command_or_channel_is_named() {
    let server = server();
    let rules = documented_rules();
    set_user(&server, "keylatch", &rules);
    let client = connect_as(&server, "keylatch", PASSWORD).await.unwrap();

    // A key outside the user's patterns.
    let err = client.lock("other:job").try_lock().await.unwrap_err();
    println!("a key outside the patterns: {err}");
    assert!(
        matches!(&err, Error::NoPermission { what, .. } if what == "a key"),
        "{err:?}"
    );

    // No EVALSHA: refused at connect (the scripts are loaded then), naming the command.
    let without_scripts: Vec<String> = rules
        .iter()
        .filter(|w| *w != "+script|load")
        .cloned()
        .collect();
    set_user(&server, "noscripts", &without_scripts);
    let err = connect_as(&server, "noscripts", PASSWORD)
        .await
        .unwrap_err();
    println!("no SCRIPT LOAD: {err}");
    assert!(
        matches!(&err, Error::NoPermission { what, .. } if what.contains("script")),
        "{err:?}"
    );
    assert_secret_kept(&err);

    // No channels: a wait cannot subscribe, and says so instead of hanging.
    let without_channels: Vec<String> = rules
        .iter()
        .filter(|w| !w.starts_with('&'))
        .cloned()
        .collect();
    set_user(&server, "nochannels", &without_channels);
    let deaf = connect_as(&server, "nochannels", PASSWORD).await.unwrap();
    let guard = client.lock("app:deaf").lock().await.unwrap();
    let started = std::time::Instant::now();
    let err = deaf
        .lock("app:deaf")
        .acquire(AcquireOptions::new().with_wait(Duration::from_secs(30)))
        .await
        .unwrap_err();
    println!("no channels: {err} after {:?}", started.elapsed());
    assert!(
        matches!(&err, Error::NoPermission { what, .. } if what.contains("redisson_lock__channel:{app:deaf}")),
        "{err:?}"
    );
    guard.unlock().await.unwrap();
    // The refused wait left nothing behind.
    assert!(!client.lock("app:deaf").is_locked().await.unwrap());
}
