//! Exclusion: tasks on two clients increment a counter with a read, a yield and a write inside
//! the lock. Any overlap loses an increment, so the final count shows it.
use keylatch::redis::AsyncCommands;
use keylatch_tests::{client, increments_under, raw, server, unique};

const TASKS: usize = 8;
const ITERATIONS: u64 = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_tasks_on_two_clients_never_overlap() {
    let server = server();
    let clients = [client(&server).await, client(&server).await];
    let name = unique("exclusion");
    let counter = format!("{name}:counter");
    let locks: Vec<_> = (0..TASKS).map(|i| clients[i % 2].lock(&name)).collect();
    let total = increments_under(&server, locks, &counter, ITERATIONS).await;
    println!("{TASKS} tasks x {ITERATIONS} iterations: counter = {total}");
    assert_eq!(
        total,
        TASKS as u64 * ITERATIONS,
        "an increment was lost: two holders overlapped"
    );
    let mut conn = raw(&server).await;
    let exists: bool = conn.exists(&name).await.expect("exists");
    assert!(!exists, "the lock key remains after the last unlock");
    for c in &clients {
        assert_eq!(c.stats().watchdog.holds, 0);
    }
}
