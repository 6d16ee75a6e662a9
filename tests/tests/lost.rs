//! The lost signal fires when the hold is deleted from outside, within one renewal interval.
use std::time::Duration;

use keylatch::redis::AsyncCommands;
use keylatch_tests::{client_with, raw, server, unique};

#[tokio::test]
async fn deleting_the_key_fires_lost_within_one_renewal_interval() {
    let server = server();
    let watchdog = Duration::from_millis(900);
    let client = client_with(&server, watchdog, Duration::from_secs(2)).await;
    let name = unique("lost");
    let guard = client.lock(&name).lock().await.unwrap();
    let mut conn = raw(&server).await;
    let _: () = conn.del(&name).await.unwrap();
    let deleted = tokio::time::Instant::now();
    let interval = watchdog / 3;
    // One interval, plus a little for the renewal's round trip.
    tokio::time::timeout(interval + Duration::from_millis(150), guard.lost())
        .await
        .expect("the lost signal did not fire within one renewal interval");
    println!(
        "lost signalled {:?} after the key was deleted (interval {interval:?})",
        deleted.elapsed()
    );
    assert!(guard.is_lost());
    assert_eq!(
        client.stats().watchdog.watched,
        0,
        "a lost hold is no longer renewed"
    );
    let err = guard.unlock().await.unwrap_err();
    assert!(
        matches!(err, keylatch::Error::NotHeld { .. }),
        "got {err:?}"
    );
}
