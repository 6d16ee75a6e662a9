//! Every handle's `with_*` settings take `&self` and return a new handle: the handle they are
//! called on is unchanged (as `with_owner` always was), so one handle can serve as the base of
//! several differently set ones.
use std::time::Duration;

use keylatch_tests::{client, server, unique};

#[tokio::test]
async fn with_settings_leave_the_original_handle_unchanged() {
    let server = server();
    let client = client(&server).await;

    let plain = client.lock(&unique("handles-reentrant"));
    let fenced = plain.with_fencing(true);
    let guard = plain.lock().await.unwrap();
    assert_eq!(guard.fencing_token(), None, "the base handle is not fenced");
    guard.unlock().await.unwrap();
    let guard = fenced.lock().await.unwrap();
    assert!(guard.fencing_token().is_some(), "the new handle is");
    guard.unlock().await.unwrap();

    let plain = client.fair_lock(&unique("handles-fair"));
    let fenced = plain.with_fencing(true);
    let _other = plain.with_waiter_timeout(Duration::from_secs(9));
    let guard = plain.lock().await.unwrap();
    assert_eq!(guard.fencing_token(), None);
    guard.unlock().await.unwrap();
    let guard = fenced.lock().await.unwrap();
    assert!(guard.fencing_token().is_some());
    guard.unlock().await.unwrap();

    let rw = client.rw_lock(&unique("handles-rw"));
    let fenced_rw = rw.with_fencing(true);
    let guard = rw.write_lock().lock().await.unwrap();
    assert_eq!(guard.fencing_token(), None);
    guard.unlock().await.unwrap();
    let guard = fenced_rw.write_lock().lock().await.unwrap();
    assert!(guard.fencing_token().is_some());
    guard.unlock().await.unwrap();
    let write = rw.write_lock();
    let fenced_write = write.with_fencing(true);
    let guard = write.lock().await.unwrap();
    assert_eq!(guard.fencing_token(), None);
    guard.unlock().await.unwrap();
    let guard = fenced_write.lock().await.unwrap();
    assert!(guard.fencing_token().is_some());
    guard.unlock().await.unwrap();
}

/// The handles README.md says implement `DistributedLock` (this fails to build if one does not).
#[test]
fn the_documented_handles_implement_the_trait() {
    fn implements<T: keylatch::DistributedLock>() {}
    implements::<keylatch::ReentrantLock>();
    implements::<keylatch::FairLock>();
    implements::<keylatch::ReadLock>();
    implements::<keylatch::WriteLock>();
    implements::<keylatch::SemaphoreLock>();
    implements::<keylatch::ExpirableSemaphoreLock>();
    let readme = include_str!("../../README.md");
    for name in [
        "ReentrantLock",
        "FairLock",
        "ReadLock",
        "WriteLock",
        "SemaphoreLock",
        "ExpirableSemaphoreLock",
    ] {
        assert!(readme.contains(&format!("`{name}`")), "README lists {name}");
    }
}
