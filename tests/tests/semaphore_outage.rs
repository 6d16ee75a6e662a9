//! Semaphore releases across an outage longer than the settle window: a release made while the
//! server cannot be reached is retried until the server answers (while the client lives) and
//! applies exactly once; a release the server applied late (its reply lost) is not applied a
//! second time by the retries; a shutdown during the outage lists the releases it could not
//! finish.
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch::{AcquireOptions, Error, UnfinishedRelease};
use keylatch_testkit::{Fault, FaultProxy};
use keylatch_tests::{raw, server, unique};
use tokio::time::Instant;

/// The response timeout of these clients: short, so that failures are noticed quickly.
const RESPONSE: Duration = Duration::from_millis(200);
/// Their settle window: the shortest allowed (`3 × response timeout + 1 s`).
const WINDOW: Duration = Duration::from_millis(1600);
/// How long a release call waits before it leaves the release to the background.
const RELEASE: Duration = Duration::from_millis(500);
/// How long a shutdown waits.
const SHUTDOWN: Duration = Duration::from_secs(1);

/// A client at `url` with the short timeouts above.
async fn client_at(url: String) -> keylatch::Client {
    let config = keylatch::Config::builder()
        .url(url)
        .response_timeout(RESPONSE)
        .settle_window(WINDOW)
        .release_timeout(RELEASE)
        .shutdown_timeout(SHUTDOWN)
        .connect_timeout(Duration::from_millis(300))
        .fallback_poll(Duration::from_millis(200))
        .build()
        .unwrap();
    keylatch::Client::connect_with(config).await.unwrap()
}

async fn count(conn: &mut keylatch::redis::aio::MultiplexedConnection, name: &str) -> i64 {
    let value: Option<i64> = conn.get(name).await.unwrap();
    value.unwrap_or(0)
}

/// Cuts the client off with `fault` (`Blackhole`: a partition, requests vanish and time out;
/// `Refuse`: a server that is down, connections fail at once); its open connections are
/// reset, so it must reconnect (and cannot) until `heal`. Reset twice: `Refuse` applies to
/// new connections only, and one being opened at the first reset could miss it.
async fn cut(proxy: &FaultProxy, fault: Fault) {
    proxy.set(fault);
    proxy.reset_connections();
    tokio::time::sleep(Duration::from_millis(100)).await;
    proxy.reset_connections();
}

/// Lets traffic pass again, on fresh connections.
fn heal(proxy: &FaultProxy) {
    proxy.reset_connections();
    proxy.set(Fault::Pass);
}

/// Waits until the client has no background work left (bounded: a correctness bound).
async fn settled(client: &keylatch::Client) {
    tokio::time::timeout(Duration::from_secs(20), client.wait_idle())
        .await
        .expect("the background releases never ended");
}

/// A partition four settle windows long: a `release(n)`, the releases of a dropped permit
/// and of an unlocked one, and the releases of an expirable permit's id and of a dropped
/// expirable permit, all made during it, are applied once the server answers again, each
/// exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_made_during_a_partition_longer_than_the_settle_window_are_applied_once() {
    releases_across_an_outage(Fault::Blackhole).await;
}

/// The same with a server that refuses connections (down) for four settle windows: every
/// attempt fails before it is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_made_while_connections_are_refused_are_applied_once() {
    releases_across_an_outage(Fault::Refuse).await;
}

async fn releases_across_an_outage(fault: Fault) {
    let server = server();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let client = client_at(proxy.url()).await;
    let mut conn = raw(&server).await;
    let name = unique("sem-outage");
    let semaphore = client.semaphore(&name);
    assert!(semaphore.try_set_permits(6).await.unwrap());
    let permit = semaphore
        .acquire_many(2, AcquireOptions::new())
        .await
        .unwrap()
        .unwrap();
    let unlocked = semaphore.acquire().await.unwrap();
    assert_eq!(semaphore.acquire().await.unwrap().forget(), 1);
    let expirable = client.permit_expirable_semaphore(&format!("{name}-exp"));
    assert!(expirable.try_set_permits(3).await.unwrap());
    // Leases far longer than the test: only the releases can bring them back.
    let id = expirable
        .acquire_with_lease(Duration::from_secs(300))
        .await
        .unwrap()
        .forget();
    let expirable_permit = expirable
        .acquire_with_lease(Duration::from_secs(300))
        .await
        .unwrap();
    assert_eq!(count(&mut conn, &name).await, 2);

    cut(&proxy, fault).await;
    let cut_at = Instant::now();
    drop(permit);
    drop(expirable_permit);
    let err = unlocked.release().await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    let err = semaphore.release(1).await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    let err = expirable.try_release(&id).await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    let outage = WINDOW * 4;
    tokio::time::sleep(outage.saturating_sub(cut_at.elapsed())).await;
    assert_eq!(count(&mut conn, &name).await, 2, "nothing got through");
    assert!(
        client.stats().background_pending >= 5,
        "the releases are still under way"
    );

    heal(&proxy);
    settled(&client).await;
    println!(
        "{fault:?}: released after an outage of {:?} ({}x the settle window)",
        cut_at.elapsed(),
        outage.as_millis() / WINDOW.as_millis()
    );
    assert_eq!(
        count(&mut conn, &name).await,
        6,
        "every permit came back, once"
    );
    let held: i64 = conn.zcard(expirable.timeout_key()).await.unwrap();
    assert_eq!(held, 0, "the expirable permits were released");
    assert_eq!(count(&mut conn, &format!("{name}-exp")).await, 3);
    // Later retries, if any were left, would show by now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        count(&mut conn, &name).await,
        6,
        "no permit came back twice"
    );
}

/// A release sent while the server is paused reaches it only when it resumes, three settle
/// windows later, and its reply is lost (the client gave up waiting); the retries that follow
/// find its marker, which lives a settle window from when the server applied it (not from
/// when the client sent it), and apply nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_applied_late_is_not_applied_again_by_its_retries() {
    let server = server();
    let client = client_at(server.url()).await;
    let mut conn = raw(&server).await;
    let name = unique("sem-late");
    let semaphore = client.semaphore(&name);
    assert!(semaphore.try_set_permits(2).await.unwrap());
    assert_eq!(semaphore.acquire().await.unwrap().forget(), 1);
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);

    server.pause().unwrap();
    let paused_at = Instant::now();
    // The first attempt goes out on an open connection and waits in the paused server's
    // socket; the ones after it wait there too, or fail to connect.
    let err = semaphore.release(1).await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    tokio::time::sleep((WINDOW * 3).saturating_sub(paused_at.elapsed())).await;
    server.resume().unwrap();

    settled(&client).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let markers: Vec<String> = conn.keys(format!("{{{name}}}:req:*")).await.unwrap();
    println!(
        "resumed after {:?}; {} marker(s) left",
        WINDOW * 3,
        markers.len()
    );
    assert_eq!(
        count(&mut conn, &name).await,
        2,
        "the release was applied exactly once"
    );
}

/// The server applies a release and its reply is lost; then the client is cut off for four
/// settle windows, so no retry reaches the server meanwhile. The retry after the outage finds
/// the release's marker (a release's marker outlives any settle window) and applies nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_reply_was_lost_before_a_long_outage_is_applied_once() {
    let server = server();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let client = client_at(proxy.url()).await;
    let mut conn = raw(&server).await;
    let name = unique("sem-lost-then-cut");
    let semaphore = client.semaphore(&name);
    assert!(semaphore.try_set_permits(2).await.unwrap());
    assert_eq!(semaphore.acquire().await.unwrap().forget(), 1);

    // The release reaches the server and is applied; its reply never comes back.
    proxy.set(Fault::DropReplies);
    let release = tokio::spawn({
        let semaphore = semaphore.clone();
        async move { semaphore.release(1).await }
    });
    let applied = Instant::now();
    while count(&mut conn, &name).await != 2 {
        assert!(
            applied.elapsed() < Duration::from_secs(5),
            "the release never arrived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Then nothing passes for four settle windows: no retry renews the marker.
    cut(&proxy, Fault::Blackhole).await;
    tokio::time::sleep(WINDOW * 4).await;
    heal(&proxy);
    let outcome = release.await.unwrap();
    assert!(
        matches!(outcome, Err(Error::Timeout { .. })),
        "the call gave up waiting and left the release to the background: {outcome:?}"
    );
    settled(&client).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        count(&mut conn, &name).await,
        2,
        "the release was applied exactly once"
    );
}

/// A shutdown while the server is still unreachable, two settle windows after the releases
/// were made, lists them (semaphore name, permit count) in its error; nothing sends them
/// after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_during_an_outage_lists_the_releases_it_could_not_finish() {
    let server = server();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let client = client_at(proxy.url()).await;
    let mut conn = raw(&server).await;
    let name = unique("sem-shutdown");
    let semaphore = client.semaphore(&name);
    assert!(semaphore.try_set_permits(3).await.unwrap());
    let permit = semaphore
        .acquire_many(2, AcquireOptions::new())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(semaphore.acquire().await.unwrap().forget(), 1);

    cut(&proxy, Fault::Blackhole).await;
    drop(permit);
    let err = semaphore.release(1).await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    tokio::time::sleep(WINDOW * 2).await;

    let started = Instant::now();
    let err = client.shutdown().await.unwrap_err();
    println!("shutdown after {:?}: {err}", started.elapsed());
    let Error::ShutdownUnfinished { after, releases } = err else {
        panic!("expected ShutdownUnfinished, got {err:?}");
    };
    assert_eq!(after, SHUTDOWN);
    let listed: Vec<(String, u64)> = releases
        .iter()
        .map(|r: &UnfinishedRelease| (r.name.clone(), r.permits))
        .collect();
    assert_eq!(listed, vec![(name.clone(), 1), (name.clone(), 2)]);
    assert!(client.is_closed());

    heal(&proxy);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        count(&mut conn, &name).await,
        0,
        "nothing was sent after the shutdown"
    );
}
