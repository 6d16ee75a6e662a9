//! Guards and futures can cross tasks; the trait works as `Arc<dyn DistributedLock>`.
use std::sync::Arc;
use std::time::Duration;

use keylatch::{DistributedLock, LockGuard, ReentrantLock};
use keylatch_tests::{client, send_static, send_sync_static, server, unique};

#[test]
fn guard_and_handles_are_send_sync_static() {
    fn check<T: Send + Sync + 'static>() {}
    check::<LockGuard>();
    check::<ReentrantLock>();
    check::<keylatch::Client>();
    check::<keylatch::Error>();
    check::<Arc<dyn DistributedLock>>();
}

#[tokio::test]
async fn futures_are_send_and_the_trait_is_object_safe() {
    let server = server();
    let client = client(&server).await;
    let lock = client.lock(&unique("bounds"));
    let lock2 = lock.clone();
    let fut = async move { lock2.lock().await };
    send_static(&fut);
    let guard = fut.await.unwrap();
    send_sync_static(&guard);
    send_static(&guard.lost());
    let unlock = guard.unlock();
    send_static(&unlock);
    unlock.await.unwrap();

    let locks: Vec<Arc<dyn DistributedLock>> = vec![
        Arc::new(lock.clone()),
        Arc::new(client.lock(&unique("dyn"))),
    ];
    for lock in locks {
        let guard = lock
            .try_lock_for(Duration::from_secs(1), None)
            .await
            .unwrap()
            .unwrap();
        assert!(lock.is_locked().await.unwrap());
        guard.unlock().await.unwrap();
        assert!(!lock.is_locked().await.unwrap());
        assert!(!lock.force_unlock().await.unwrap());
    }
}
