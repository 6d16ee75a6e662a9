//! The semaphores' object lifecycle (exists, delete, expire, clear the expiry), a release that
//! does not bring a deleted semaphore back, and the all-or-none release of permit ids: on one
//! server and on a cluster, checked against the keys themselves.
use std::time::Duration;

use keylatch::redis;
use keylatch::{AcquireOptions, Client, Config, Error};
use keylatch_testkit::RedisCluster;
use keylatch_tests::{client, raw, server, unique};

async fn pttl(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

async fn exists(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap();
    n == 1
}

#[tokio::test]
async fn release_if_exists_does_not_bring_a_deleted_semaphore_back() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("sem-rie");
    let semaphore = client.semaphore(&name);
    assert!(semaphore.try_set_permits(2).await.unwrap());
    semaphore.acquire().await.unwrap().forget();
    assert!(semaphore.delete().await.unwrap());
    assert!(!semaphore.release_if_exists(1).await.unwrap());
    assert!(
        !exists(&mut conn, &name).await,
        "the release brought it back"
    );
    assert!(!semaphore.exists().await.unwrap());
    // Set again: the release applies.
    assert!(semaphore.try_set_permits(1).await.unwrap());
    assert!(semaphore.release_if_exists(1).await.unwrap());
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    // Bad input is refused before anything is sent.
    assert!(matches!(
        semaphore.release_if_exists(0).await,
        Err(Error::InvalidPermits { .. })
    ));
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_semaphore_exists_expires_and_is_deleted() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("sem-life");
    let semaphore = client.semaphore(&name);
    assert!(!semaphore.exists().await.unwrap());
    assert!(!semaphore.expire(Duration::from_secs(10)).await.unwrap());
    assert!(!semaphore.clear_expire().await.unwrap());
    assert!(!semaphore.delete().await.unwrap());
    assert!(semaphore.try_set_permits(3).await.unwrap());
    assert!(semaphore.exists().await.unwrap());
    assert!(semaphore.expire(Duration::from_secs(10)).await.unwrap());
    let ttl = pttl(&mut conn, &name).await;
    assert!(ttl > 0 && ttl <= 10_000, "pttl {ttl}");
    for bad in [Duration::ZERO, keylatch::MAX_LEASE + Duration::from_secs(1)] {
        assert!(matches!(
            semaphore.expire(bad).await,
            Err(Error::InvalidLease { .. })
        ));
    }
    assert!(
        pttl(&mut conn, &name).await > 0,
        "a refused expire changed the ttl"
    );
    assert!(semaphore.clear_expire().await.unwrap());
    assert_eq!(pttl(&mut conn, &name).await, -1);
    assert!(!semaphore.clear_expire().await.unwrap());
    assert!(semaphore.delete().await.unwrap());
    assert!(!exists(&mut conn, &name).await);
    assert!(!semaphore.exists().await.unwrap());
    client.shutdown().await.unwrap();
}

/// Every key of the expirable semaphore gets the time to live and goes on delete; the
/// all-or-none release of ids names the unknown ones and releases nothing then.
async fn expirable_lifecycle(client: &Client, name: &str) {
    let semaphore = client.permit_expirable_semaphore(name);
    assert!(!semaphore.exists().await.unwrap());
    assert!(semaphore.try_set_permits(3).await.unwrap());
    let permits = semaphore
        .acquire_many(3, AcquireOptions::new())
        .await
        .unwrap()
        .expect("an unbounded wait returns permits");
    let ids: Vec<String> = permits.iter().map(|p| p.id().to_owned()).collect();
    for permit in permits {
        permit.forget();
    }
    let unknown = "00112233445566778899aabbccddeeff";
    let err = semaphore
        .release_many(&[ids[0].as_str(), unknown, ids[1].as_str()])
        .await
        .unwrap_err();
    match err {
        Error::UnknownPermits { ids: named, .. } => assert_eq!(named, vec![unknown.to_owned()]),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        0,
        "a partial release"
    );
    let err = semaphore
        .release_many(&[ids[0].as_str(), "not-an-id"])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::UnknownPermits { ids, .. } if ids == &["not-an-id".to_owned()]),
        "{err:?}"
    );
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    // The lenient one skips the unknown id.
    assert_eq!(
        semaphore
            .try_release_many(&[ids[0].as_str(), unknown])
            .await
            .unwrap(),
        1
    );
    semaphore
        .release_many(&[ids[1].as_str(), ids[2].as_str()])
        .await
        .unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);

    let held = semaphore.acquire().await.unwrap();
    assert!(semaphore.exists().await.unwrap());
    assert!(semaphore.expire(Duration::from_secs(20)).await.unwrap());
    assert!(semaphore.clear_expire().await.unwrap());
    assert!(semaphore.delete().await.unwrap());
    assert!(!semaphore.exists().await.unwrap());
    assert!(matches!(
        held.release().await,
        Err(Error::UnknownPermit { .. })
    ));
    assert!(
        !semaphore.exists().await.unwrap(),
        "a release brought it back"
    );
}

#[tokio::test]
async fn the_expirable_semaphore_lifecycle_and_all_or_none_release() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("exp-life");
    expirable_lifecycle(&client, &name).await;
    // The time to live reaches both keys.
    let semaphore = client.permit_expirable_semaphore(&name);
    assert!(semaphore.try_set_permits(2).await.unwrap());
    semaphore.acquire().await.unwrap().forget();
    assert!(semaphore.expire(Duration::from_secs(20)).await.unwrap());
    for key in [name.as_str(), semaphore.timeout_key()] {
        let ttl = pttl(&mut conn, key).await;
        assert!(ttl > 0 && ttl <= 20_000, "{key}: pttl {ttl}");
    }
    assert!(semaphore.delete().await.unwrap());
    for key in [name.as_str(), semaphore.timeout_key()] {
        assert!(!exists(&mut conn, key).await, "{key} left behind");
    }
    client.shutdown().await.unwrap();
}

#[tokio::test]
async fn lifecycle_on_a_cluster() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster");
    let config = Config::builder()
        .url(cluster.url())
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let client = Client::connect_with(config).await.unwrap();
    for i in 0..3 {
        let name = unique(&format!("exp-cluster-{i}"));
        expirable_lifecycle(&client, &name).await;
        let semaphore = client.semaphore(&name);
        assert!(semaphore.try_set_permits(1).await.unwrap());
        assert!(semaphore.expire(Duration::from_secs(5)).await.unwrap());
        assert!(semaphore.delete().await.unwrap());
        assert!(!semaphore.release_if_exists(1).await.unwrap());
        assert!(!semaphore.exists().await.unwrap());
    }
    client.shutdown().await.unwrap();
}
