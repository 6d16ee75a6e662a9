//! A keylatch client built on the application's own redis-rs client or deadpool-redis pool.
use std::time::Duration;

use keylatch::{Client, Config, deadpool_redis, redis};
use keylatch_tests::every::exercise_every_primitive;
use keylatch_tests::server;

fn config() -> Config {
    Config::builder()
        .fallback_poll(Duration::from_secs(60))
        .build()
        .unwrap()
}

#[tokio::test]
async fn every_primitive_runs_on_an_application_client_and_pool() {
    let server = server();
    let url = server.url();
    let app_client = redis::Client::open(url.as_str()).unwrap();
    let from_client = Client::from_redis_client(app_client.clone(), config())
        .await
        .unwrap();
    let pool = deadpool_redis::Config::from_url(url.as_str())
        .create_pool(Some(deadpool_redis::Runtime::Tokio1))
        .unwrap();
    let from_pool = Client::from_pool(pool.clone(), app_client, config())
        .await
        .unwrap();
    // keylatch took its command connections from the pool and keeps them.
    let status = pool.status();
    println!(
        "pool after connect: {} connections, {} available",
        status.size, status.available
    );
    assert_eq!(status.size, config().connections);
    assert_eq!(status.available, 0);

    let ran = exercise_every_primitive(&from_client, &from_pool, "byo").await;
    assert_eq!(ran, 6);
    let ran = exercise_every_primitive(&from_pool, &from_client, "byo-reversed").await;
    assert_eq!(ran, 6);
    // The application's own commands still have the pool.
    let mut extra = pool.get().await.unwrap();
    let pong: String = redis::cmd("PING").query_async(&mut *extra).await.unwrap();
    assert_eq!(pong, "PONG");
    drop(extra);

    from_pool.shutdown().await.unwrap();
    from_client.shutdown().await.unwrap();
    // The pool's connections come back when the client has shut down and is dropped.
    drop(from_pool);
    assert!(
        keylatch_tests::eventually(Duration::from_secs(5), || async {
            pool.status().available == pool.status().size
        })
        .await
    );
}

#[tokio::test]
async fn an_unreachable_application_pool_fails_at_connect() {
    let server = server();
    let url = server.url();
    let pool = deadpool_redis::Config::from_url(url.as_str())
        .create_pool(Some(deadpool_redis::Runtime::Tokio1))
        .unwrap();
    let pubsub = redis::Client::open(url.as_str()).unwrap();
    drop(server);
    let err = Client::from_pool(pool, pubsub, config()).await.unwrap_err();
    println!("{err}");
    assert!(matches!(err, keylatch::Error::Connect { .. }), "{err:?}");
}
