//! Reentrancy is per owner, and asked for: an owner scope may lock three times; every other
//! acquisition is another owner.
use std::time::Duration;

use keylatch::Owner;
use keylatch_tests::{client, server, unique};

#[tokio::test]
async fn one_owner_locks_three_times_and_others_wait_for_three_unlocks() {
    let server = server();
    let client = client(&server).await;
    let name = unique("reentrant");
    let lock = client.lock(&name);
    let holder = tokio::spawn({
        let lock = lock.with_owner(Owner::unique());
        async move {
            let guards = vec![
                lock.lock().await.unwrap(),
                lock.lock().await.unwrap(),
                lock.try_lock()
                    .await
                    .unwrap()
                    .expect("re-entry never waits"),
            ];
            assert_eq!(lock.hold_count().await.unwrap(), 3);
            assert!(lock.is_held_by_current_owner().await.unwrap());
            guards
        }
    });
    let mut guards = holder.await.unwrap();

    // Another acquisition is another owner: it cannot get in while any of the three holds
    // remain.
    for remaining in (1..=3).rev() {
        let other = lock.clone();
        let got = tokio::spawn(async move {
            assert!(!other.is_held_by_current_owner().await.unwrap());
            assert_eq!(other.hold_count().await.unwrap(), 0);
            other.try_lock().await.unwrap().is_some()
        })
        .await
        .unwrap();
        assert!(!got, "another task got in with {remaining} holds left");
        guards.pop().unwrap().unlock().await.unwrap();
    }
    let other = lock.clone();
    let guard = tokio::spawn(async move { other.try_lock_for(Duration::from_secs(5), None).await })
        .await
        .unwrap()
        .unwrap();
    assert!(
        guard.is_some(),
        "after three unlocks another task gets the lock"
    );
    drop(guard);
    client.wait_idle().await;
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn explicit_owner_is_shared_across_tasks() {
    let server = server();
    let client = client(&server).await;
    let name = unique("owner");
    let owner = Owner::unique();
    let lock = client.lock(&name).with_owner(owner);
    let first = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await.unwrap() }
    })
    .await
    .unwrap();
    // Another task with the same explicit owner re-enters.
    let second = tokio::spawn({
        let lock = lock.clone();
        async move { lock.try_lock().await.unwrap() }
    })
    .await
    .unwrap()
    .expect("the same explicit owner re-enters from another task");
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    // A guard can be released from any task: it remembers its owner.
    tokio::spawn(async move { first.unlock().await.unwrap() })
        .await
        .unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    second.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}
