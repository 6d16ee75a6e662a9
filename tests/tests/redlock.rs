//! RedLock over 5 independent servers: it excludes; with 2 servers killed it still acquires
//! and excludes; with 3 killed a wait ends in `NoQuorum`; with one server paused an acquire
//! still succeeds within the per-server timeout; the guard reports the loss once a majority
//! is gone; a storm of dropped acquires leaves nothing on any server.
use std::sync::Arc;
use std::time::Duration;

use keylatch::{Client, Config, DistributedLock, Error, RedLock};
use keylatch_testkit::RedisServer;
use keylatch_tests::server;
use tokio::time::Instant;

const SERVERS: usize = 5;

async fn clients(servers: &[RedisServer], watchdog: Duration) -> Vec<Client> {
    let mut clients = Vec::new();
    for server in servers {
        let config = Config::builder()
            .url(server.url())
            .watchdog_timeout(watchdog)
            .connect_timeout(Duration::from_millis(300))
            .response_timeout(Duration::from_millis(300))
            .fallback_poll(Duration::from_millis(200))
            .build()
            .unwrap();
        clients.push(Client::connect_with(config).await.unwrap());
    }
    clients
}

fn redlock(clients: &[Client], name: &str) -> RedLock {
    RedLock::new(
        clients
            .iter()
            .map(|c| Arc::new(c.lock(name)) as Arc<dyn DistributedLock>),
    )
    .unwrap()
}

fn start_servers() -> Vec<RedisServer> {
    (0..SERVERS).map(|_| server()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_excludes_and_survives_two_dead_servers_but_not_three() {
    let mut servers = start_servers();
    let ours = clients(&servers, Duration::from_secs(30)).await;
    let theirs = clients(&servers, Duration::from_secs(30)).await;
    let mine = redlock(&ours, "job");
    let other = redlock(&theirs, "job");
    assert_eq!(mine.quorum(), 3);

    let guard = mine.lock().await.unwrap();
    assert_eq!(guard.guards().len(), SERVERS);
    assert!(other.try_lock().await.unwrap().is_none(), "excluded");
    guard.unlock().await.unwrap();
    let theirs_now = other.try_lock().await.unwrap().expect("free after unlock");
    theirs_now.unlock().await.unwrap();

    // Two servers die: a majority is still there.
    servers[0].kill();
    servers[1].kill();
    let started = Instant::now();
    let guard = mine
        .try_lock_for(Duration::from_secs(5), None)
        .await
        .unwrap()
        .expect("3 of 5 servers are enough");
    println!(
        "2 servers dead: acquired on {} servers in {:?}",
        guard.guards().len(),
        started.elapsed()
    );
    assert_eq!(guard.guards().len(), 3);
    assert!(other.try_lock().await.unwrap().is_none(), "still excluded");
    guard.unlock().await.unwrap();

    // A third dies: no majority can be reached; the wait ends in a typed error.
    servers[2].kill();
    let started = Instant::now();
    let err = mine
        .try_lock_for(Duration::from_secs(1), None)
        .await
        .expect_err("2 of 5 servers are not a majority");
    println!("3 servers dead: {err} after {:?}", started.elapsed());
    assert!(
        matches!(
            err,
            Error::NoQuorum {
                needed: 3,
                servers: 5,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "within the wait"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_server_does_not_hold_up_an_acquire() {
    let servers = start_servers();
    let ours = clients(&servers, Duration::from_secs(30)).await;
    let theirs = clients(&servers, Duration::from_secs(30)).await;
    let mine = redlock(&ours, "paused")
        .with_server_timeout(Duration::from_millis(100))
        .unwrap();
    servers[4].pause().unwrap();
    let started = Instant::now();
    let guard = mine.try_lock().await.unwrap().expect("4 of 5 answer");
    let took = started.elapsed();
    println!(
        "one server paused: acquired on {} servers in {took:?} (server timeout 100 ms)",
        guard.guards().len()
    );
    assert_eq!(guard.guards().len(), 4);
    assert!(
        redlock(&theirs, "paused")
            .with_server_timeout(Duration::from_millis(100))
            .unwrap()
            .try_lock()
            .await
            .unwrap()
            .is_none()
    );
    guard.unlock().await.unwrap();
    servers[4].resume().unwrap();
    // The attempt the paused server got late is undone once it answers.
    for client in &ours {
        client.wait_idle().await;
    }
    for server in &servers {
        assert_eq!(server.cli(&["EXISTS", "paused"]).unwrap(), "0");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loss_of_a_majority_is_reported() {
    let mut servers = start_servers();
    let ours = clients(&servers, Duration::from_millis(900)).await;
    let mine = redlock(&ours, "lost");
    let guard = mine.lock().await.unwrap();
    let lost = guard.lost();
    // Two parts gone: still a majority.
    for server in &servers[..2] {
        server.cli(&["DEL", "lost"]).unwrap();
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(1500), guard.lost())
            .await
            .is_err(),
        "3 of 5 parts still held: not lost"
    );
    assert!(!guard.is_lost());
    // A third: fewer than a majority.
    servers[2].kill();
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), lost)
        .await
        .expect("lost() fires once a majority is gone");
    println!("majority lost: lost() after {:?}", started.elapsed());
    assert!(guard.is_lost());
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_acquires_leave_nothing_on_any_server() {
    let servers = start_servers();
    let ours = clients(&servers, Duration::from_secs(30)).await;
    let theirs = clients(&servers, Duration::from_secs(30)).await;
    let blocker = redlock(&theirs, "storm").lock().await.unwrap();
    let mine = redlock(&ours, "storm");
    let mut dropped = 0;
    for i in 0..40u64 {
        let waited = tokio::time::timeout(
            Duration::from_millis(i % 7),
            mine.try_lock_for(Duration::from_secs(5), None),
        )
        .await;
        if waited.is_err() {
            dropped += 1;
        }
    }
    // Then with the lock free: acquires dropped after taking some parts.
    blocker.unlock().await.unwrap();
    for i in 0..40u64 {
        if tokio::time::timeout(Duration::from_micros(200 * i), mine.lock())
            .await
            .is_err()
        {
            dropped += 1;
        }
    }
    for client in &ours {
        client.wait_idle().await;
    }
    println!("{dropped} acquires dropped mid-way");
    for server in &servers {
        assert_eq!(
            server.cli(&["EXISTS", "storm"]).unwrap(),
            "0",
            "a part was left"
        );
    }
    for client in ours.iter().chain(&theirs) {
        client.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn servers_without_a_handle_count_in_the_majority() {
    let servers: Vec<RedisServer> = (0..3).map(|_| server()).collect();
    let ours = clients(&servers, Duration::from_secs(30)).await;
    // 3 handles of 5 servers (2 unreachable when it was built): all 3 must grant it.
    let lock = redlock(&ours, "declared").with_servers(5).unwrap();
    assert_eq!((lock.servers(), lock.quorum()), (5, 3));
    let guard = lock.try_lock().await.unwrap().expect("3 of 5");
    // One of the three taken by someone else: 2 of 5 is no majority.
    let theirs = clients(&servers[..1], Duration::from_secs(30)).await;
    guard.unlock().await.unwrap();
    let blocker = theirs[0].lock("declared").lock().await.unwrap();
    assert!(lock.try_lock().await.unwrap().is_none());
    blocker.unlock().await.unwrap();
    assert!(matches!(
        redlock(&ours, "declared").with_servers(2),
        Err(Error::InvalidConfig { .. })
    ));
}

/// Worker processes take one RedLock over 5 servers in a loop while, one at a time, servers
/// are paused and resumed, and one is killed: the exclusion checker finds 0 overlapping
/// validity windows, and the oracle counter loses no increment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_never_overlap_while_servers_are_paused_or_killed() {
    use keylatch_tests::checker;
    use keylatch_tests::workers::{Worker, args};
    const WORKER: &str = env!("CARGO_BIN_EXE_keylatch-test-fault-worker");

    let mut servers = start_servers();
    let oracle = server();
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let run = Duration::from_secs(8);
    let workers: Vec<Worker> = (0..3u64)
        .map(|id| {
            let pairs = [
                ("mode", "redlock".to_owned()),
                ("url", urls.join(",")),
                ("oracle", oracle.url()),
                ("name", "rl-job".to_owned()),
                ("id", id.to_string()),
                ("watchdog-ms", "1000".to_owned()),
                ("response-timeout-ms", "300".to_owned()),
                ("poll-ms", "200".to_owned()),
                ("hold-ms", "5".to_owned()),
                ("run-ms", run.as_millis().to_string()),
            ];
            Worker::spawn(WORKER, &args(&pairs, &[]))
        })
        .collect();
    for worker in &workers {
        assert!(
            worker
                .wait_for(Duration::from_secs(20), |e| e["ev"] == "ready")
                .await
                .is_some(),
            "a worker did not start"
        );
    }
    // One at a time: pause 0, resume; pause 1, resume; kill 2 (for good); pause 3, resume.
    for step in 0..4 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        if step == 2 {
            servers[2].kill();
            continue;
        }
        servers[step].pause().unwrap();
        tokio::time::sleep(Duration::from_millis(1000)).await;
        servers[step].resume().unwrap();
    }
    let mut events = Vec::new();
    for worker in workers {
        let (status, mut worker_events) = worker.finish(run + Duration::from_secs(30)).await;
        assert!(
            worker_events.iter().any(|e| e["ev"] == "done"),
            "a worker did not finish ({status:?})"
        );
        events.append(&mut worker_events);
    }
    let windows = checker::windows(&events);
    let overlaps = checker::overlaps(&windows);
    let writes = checker::accepted_writes(&events);
    let counter: usize = oracle
        .cli(&["GET", "rl-job:counter"])
        .unwrap()
        .parse()
        .unwrap_or(0);
    let errors = checker::count(&events, "error");
    println!(
        "{} holds by 3 workers over 5 servers, {overlaps} overlapping, {writes} writes, oracle \
         counter {counter}, {errors} acquire errors",
        windows.len()
    );
    assert!(windows.len() > 20, "the workers made progress");
    assert_eq!(overlaps, 0, "two workers held the RedLock at once");
    assert_eq!(counter, writes, "an increment was lost");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_the_release_on_any_server() {
    let servers = start_servers();
    let ours = clients(&servers, Duration::from_secs(30)).await;
    let theirs = clients(&servers, Duration::from_secs(30)).await;
    let holder = redlock(&theirs, "woken").lock().await.unwrap();
    // A long retry pause: the wait ends early only if a release message wakes it.
    let waiter = redlock(&ours, "woken").with_retry_delay(Duration::from_secs(20));
    let messages =
        |clients: &[Client]| -> u64 { clients.iter().map(|c| c.stats().hub_messages).sum() };
    let before = messages(&ours);
    let waiting = tokio::spawn(async move {
        let started = Instant::now();
        let guard = waiter.try_lock_for(Duration::from_secs(60), None).await;
        (guard, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = Instant::now();
    holder.unlock().await.unwrap();
    let (guard, waited) = waiting.await.unwrap();
    let guard = guard.unwrap().expect("acquired after the release");
    println!(
        "acquired {:?} after the release ({waited:?} in all), retry pause up to 20 s",
        released.elapsed()
    );
    assert!(
        messages(&ours) > before,
        "release messages reached the waiter's clients"
    );
    assert!(
        released.elapsed() < Duration::from_secs(10),
        "woken by a message, not by the 20 s pause"
    );
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_guard_keeps_every_part_until_its_lease_ends() {
    let servers = start_servers();
    let ours = clients(&servers, Duration::from_millis(900)).await;
    let theirs = clients(&servers, Duration::from_millis(900)).await;
    let guard = redlock(&ours, "forgotten").lock().await.unwrap();
    let parts = guard.guards().len();
    assert!(parts >= 3, "a majority granted: {parts}");
    guard.forget();
    // Not released on drop: every part is still held, and nobody else gets the lock.
    let held = servers
        .iter()
        .filter(|s| s.cli(&["EXISTS", "forgotten"]).unwrap().trim() == "1")
        .count();
    assert_eq!(held, parts, "every granted part is still held");
    assert!(
        redlock(&theirs, "forgotten")
            .try_lock()
            .await
            .unwrap()
            .is_none()
    );
    // Not renewed either: the watchdog forgot the parts, so their leases end.
    for client in &ours {
        assert_eq!(client.stats().watchdog.holds, 0, "no part is renewed");
    }
    let free = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(guard) = redlock(&theirs, "forgotten").try_lock().await.unwrap() {
                return guard;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the forgotten parts expire with their lease");
    free.unlock().await.unwrap();
}
