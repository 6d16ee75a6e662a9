//! Reads that take nothing: `token()` (the last fencing token issued for a name, Redisson's
//! `RFencedLock.getToken`) and `is_held_by(owner id)` for this client's and another client's
//! owners, on the reentrant, non-reentrant, fair and spin locks. On one server and on a
//! cluster.
use keylatch::{Client, Error, Owner};
use keylatch_tests::{client, raw, server, unique};

/// Tokens issued through every lock kind of one name (they share the counter), each read back
/// by another client: the read is the last guard's token, and never goes backwards.
async fn tokens(a: &Client, b: &Client) {
    let name = unique("token");
    assert_eq!(b.lock(&name).token().await.unwrap(), None, "never issued");
    assert_eq!(b.fair_lock(&name).token().await.unwrap(), None);
    assert_eq!(b.spin_lock(&name).token().await.unwrap(), None);
    let mut last = 0;
    for round in 0..3 {
        for kind in 0..4 {
            let guard = match kind {
                0 => a.lock(&name).with_fencing(true).lock().await,
                1 => a.non_reentrant_lock(&name).with_fencing(true).lock().await,
                2 => a.fair_lock(&name).with_fencing(true).lock().await,
                _ => a.spin_lock(&name).with_fencing(true).lock().await,
            }
            .unwrap();
            let issued = guard.fencing_token().expect("fencing on");
            assert!(
                issued > last,
                "round {round}, kind {kind}: {issued} after {last}"
            );
            for read in [
                b.lock(&name).token().await.unwrap(),
                b.fair_lock(&name).token().await.unwrap(),
                b.spin_lock(&name).token().await.unwrap(),
                a.lock(&name).token().await.unwrap(),
            ] {
                assert_eq!(read, Some(issued), "round {round}, kind {kind}");
            }
            guard.unlock().await.unwrap();
            // Released: the read still says the last token issued.
            assert_eq!(b.lock(&name).token().await.unwrap(), Some(issued));
            last = issued;
        }
    }
    // An acquisition without fencing issues none: the read does not move.
    a.lock(&name).lock().await.unwrap().unlock().await.unwrap();
    assert_eq!(b.lock(&name).token().await.unwrap(), Some(last));
}

/// `is_held_by` for the holder's owner id, read from its own client and from another; false
/// for other owners of either client, and once released.
async fn held_by(a: &Client, b: &Client) {
    for kind in 0..4 {
        let name = unique("held-by");
        let stranger_a = a.owner_id(Owner::unique());
        let stranger_b = b.owner_id(Owner::unique());
        let guard = match kind {
            0 => a.lock(&name).lock().await,
            1 => a.non_reentrant_lock(&name).lock().await,
            2 => a.fair_lock(&name).lock().await,
            _ => a.spin_lock(&name).lock().await,
        }
        .unwrap();
        let holder = guard.owner_id();
        let reads = |owner| {
            let (a, b, name) = (a.clone(), b.clone(), name.clone());
            async move {
                [
                    a.lock(&name).is_held_by(owner).await.unwrap(),
                    b.lock(&name).is_held_by(owner).await.unwrap(),
                    b.non_reentrant_lock(&name).is_held_by(owner).await.unwrap(),
                    b.fair_lock(&name).is_held_by(owner).await.unwrap(),
                    b.spin_lock(&name).is_held_by(owner).await.unwrap(),
                ]
            }
        };
        assert_eq!(reads(holder).await, [true; 5], "kind {kind}: the holder");
        assert_eq!(reads(stranger_a).await, [false; 5], "kind {kind}");
        assert_eq!(reads(stranger_b).await, [false; 5], "kind {kind}");
        // Another client's holder, read from the first client.
        let other = b.lock(&format!("{name}-b")).lock().await.unwrap();
        assert!(
            a.lock(&format!("{name}-b"))
                .is_held_by(other.owner_id())
                .await
                .unwrap()
        );
        assert!(!a.lock(&name).is_held_by(other.owner_id()).await.unwrap());
        other.unlock().await.unwrap();
        guard.unlock().await.unwrap();
        assert_eq!(reads(holder).await, [false; 5], "kind {kind}: released");
    }
}

#[tokio::test]
async fn reads_on_one_server() {
    let server = server();
    let a = client(&server).await;
    let b = client(&server).await;
    tokens(&a, &b).await;
    held_by(&a, &b).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_on_a_cluster() {
    let (_cluster, a, b) = keylatch_tests::cluster_pair().await;
    tokens(&a, &b).await;
    held_by(&a, &b).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_damaged_counter_or_a_bad_name_is_a_typed_error() {
    let server = server();
    let client = client(&server).await;
    let mut conn = raw(&server).await;
    let name = unique("token-bad");
    let lock = client.lock(&name);
    let key = format!("redisson_lock_token:{{{name}}}");
    let _: () = keylatch::redis::cmd("SET")
        .arg(&key)
        .arg("not a number")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(matches!(lock.token().await, Err(Error::WrongType { key: k }) if k == key));
    let _: () = keylatch::redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = keylatch::redis::cmd("RPUSH")
        .arg(&key)
        .arg("x")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(matches!(
        client.fair_lock(&name).token().await,
        Err(Error::WrongType { .. })
    ));
    let owner = client.owner_id(Owner::unique());
    assert!(matches!(
        client.lock("").is_held_by(owner).await,
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        client.spin_lock("").token().await,
        Err(Error::InvalidName { .. })
    ));
    client.shutdown().await.unwrap();
}
