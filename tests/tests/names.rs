//! Names whose keys would alias another name's are refused (Redisson derives the same keys from
//! `x` and `{x}`), unless the configuration accepts a Redisson application's hash-tagged names.
use keylatch::{AcquireOptions, Error};
use keylatch_tests::{client, keyspace, raw, server, unique};

fn invalid_name<T: std::fmt::Debug>(result: keylatch::Result<T>, what: &str) {
    match result {
        Err(Error::InvalidName { reason }) => {
            assert!(reason.contains("hash tag"), "{what}: {reason}")
        }
        other => panic!("{what}: expected InvalidName, got {other:?}"),
    }
}

#[tokio::test]
async fn names_that_would_share_keys_are_refused() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let x = unique("alias");

    // A fair lock `x` is held.
    let fair = client.fair_lock(&x);
    let held = fair.lock().await.unwrap();
    let tagged = format!("{{{x}}}");
    // Its keys are the keys `{x}` would use (Redisson's naming): refused, Redis untouched.
    let before = keyspace(&mut conn).await;
    invalid_name(client.fair_lock(&tagged).try_lock().await, "fair {x}");
    invalid_name(client.lock(&tagged).try_lock().await, "lock {x}");
    invalid_name(client.rw_lock(&tagged).try_write().await, "rw {x}");
    invalid_name(
        client.semaphore(&tagged).try_set_permits(1).await,
        "semaphore {x}",
    );
    invalid_name(
        client
            .permit_expirable_semaphore(&tagged)
            .try_set_permits(1)
            .await,
        "expirable {x}",
    );
    for name in [format!("a{{{x}}}"), format!("{x}}}"), format!("{{{x}")] {
        invalid_name(client.lock(&name).is_locked().await, &name);
    }
    assert_eq!(keyspace(&mut conn).await, before, "Redis untouched");
    held.unlock().await.unwrap();

    // Two expirable semaphores `al` and `{al}` would share one timeout zset and count: with one
    // permit, both could take it. `{al}` is refused, so one permit is one holder.
    let al = unique("al");
    let one = client.permit_expirable_semaphore(&al);
    one.try_set_permits(1).await.unwrap();
    let permit = one.acquire().await.unwrap();
    let tagged = client.permit_expirable_semaphore(&format!("{{{al}}}"));
    invalid_name(
        tagged
            .acquire_with(AcquireOptions::new().with_wait(std::time::Duration::ZERO))
            .await,
        "expirable {al}",
    );
    permit.release().await.unwrap();
}

#[tokio::test]
async fn hash_tagged_names_are_accepted_when_configured() {
    let server = server();
    let config = keylatch::Config::builder()
        .url(server.url())
        .hash_tagged_names(true)
        .build()
        .unwrap();
    let client = keylatch::Client::connect_with(config).await.unwrap();
    let name = format!("{{{}}}:jobs", unique("tag"));
    let guard = client.fair_lock(&name).lock().await.unwrap();
    guard.unlock().await.unwrap();
    let semaphore = client.permit_expirable_semaphore(&name);
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let permit = semaphore.acquire().await.unwrap();
    permit.release().await.unwrap();
}
